import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import type { Accounts } from "../../auth/accounts.js";
import type { EngineRegistry } from "../../engines/registry.js";
import type { LanguageCode } from "../../engines/types.js";
import { EmptyRoomsLimitError, RoomCapacityError, type Rooms } from "../../rooms/rooms.js";
import { defaultVoice } from "../../voices/library.js";
import { ApiError } from "../errors.js";
import type { AccountRateLimit } from "../rate-limit.js";

/** `POST /api/beta1/session`: a translation room with a translator in it. */

export interface RoomRouteOptions {
  readonly rooms: Rooms;
  readonly accounts: Accounts;
  readonly registry: EngineRegistry;
  readonly publicBaseUrl: (request: FastifyRequest) => string;
  /** The per-account limit shared with the dubbing endpoints. */
  readonly rateLimit: AccountRateLimit;
}

/** `xx-XX` as the spec shows it; a bare `xx` (and script subtags) are accepted too. */
const LANGUAGE_TAG = /^[A-Za-z]{2,3}(-[A-Za-z]{4})?(-([A-Za-z]{2}|\d{3}))?$/u;

const sessionRequest = z.object({
  source_language: z.string({ error: "source_language is required: a language code such as en-US" }),
  target_language: z.string({ error: "target_language is required: a language code such as es-ES" }),
  voice_type: z
    .enum(["clone", "female", "male"], { error: 'voice_type must be "clone", "female" or "male"' })
    .default("clone"),
});

export async function roomRoutes(app: FastifyInstance, options: RoomRouteOptions): Promise<void> {
  const { rooms, accounts, registry } = options;

  app.post("/api/beta1/session", async (request) => {
    const account = await accounts.authenticate(request.headers.authorization, "rooms");
    const body = parseSessionRequest(request.body);
    const sourceLanguage = languageOf("source_language", body.source_language);
    const targetLanguage = languageOf("target_language", body.target_language);
    checkServable(registry, body, sourceLanguage, targetLanguage);
    await options.rateLimit(request, account);
    try {
      const room = await rooms.create(
        {
          accountId: account.id,
          sourceLanguage,
          targetLanguage,
          voice: body.voice_type === "clone" ? "clone" : defaultVoice(body.voice_type),
        },
        options.publicBaseUrl(request),
      );
      return { url: room.url, token: room.token, room_name: room.roomName };
    } catch (error) {
      if (error instanceof EmptyRoomsLimitError) {
        throw new ApiError(429, "rate_limited", error.message, {
          "retry-after": String(error.retryAfterSec),
        });
      }
      if (error instanceof RoomCapacityError) {
        throw new ApiError(
          503,
          "capacity_exhausted",
          "no room capacity right now; retry after a short backoff",
          {
            "retry-after": "1",
          },
        );
      }
      throw error;
    }
  });

  // Beyond the spec: a token for one more participant of a room the caller created.
  app.post("/api/beta1/session/:roomName/participants", async (request) => {
    const account = await accounts.authenticate(request.headers.authorization, "rooms");
    await options.rateLimit(request, account);
    const { roomName } = request.params as { roomName: string };
    const admitted = await rooms.admit(roomName, account.id, options.publicBaseUrl(request));
    if (!admitted) throw new ApiError(404, "not_found", `no open room ${roomName} created with this API key`);
    return { url: admitted.url, token: admitted.token, room_name: roomName, identity: admitted.identity };
  });
}

function parseSessionRequest(body: unknown): z.infer<typeof sessionRequest> {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw new ApiError(400, "invalid_request", "the body must be a JSON object");
  }
  const result = sessionRequest.safeParse(body);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  throw new ApiError(400, "invalid_request", issue.message);
}

function languageOf(field: string, tag: string): LanguageCode {
  if (!LANGUAGE_TAG.test(tag)) {
    throw new ApiError(
      400,
      "invalid_language",
      `${field} "${tag}" is not a language code; use the form xx-XX, e.g. en-US`,
    );
  }
  return tag.split("-")[0]!.toLowerCase();
}

function checkServable(
  registry: EngineRegistry,
  body: z.infer<typeof sessionRequest>,
  source: LanguageCode,
  target: LanguageCode,
): void {
  if (!registry.recognizer(source)) {
    throw new ApiError(
      400,
      "invalid_language",
      `source_language "${body.source_language}" cannot be recognised by the configured engines; ` +
        `speech recognition is available for: ${registry.recognitionLanguages().join(", ")}`,
    );
  }
  if (!registry.translationRoute(source, target)) {
    throw new ApiError(
      400,
      "invalid_language",
      `target_language "${body.target_language}" is not supported from "${body.source_language}" by the ` +
        `configured engines; from "${source}" the targets are: ${registry.translationTargets(source).join(", ")}`,
    );
  }
  if (!registry.synthesizer(target)) {
    throw new ApiError(
      400,
      "invalid_language",
      `target_language "${body.target_language}" has no voice output with the configured engines; ` +
        `voice output is available for: ${registry.voiceLanguages().join(", ")}`,
    );
  }
}
