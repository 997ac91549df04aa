import type { ServerMessage } from "../../wire/messages.js";
import type { FastifyInstance } from "fastify";
import type { RawData, WebSocket } from "ws";
import { forwardSocket } from "../../fleet/forward-socket.js";
import { Channel } from "../../core/channel.js";
import { jsonSchemaTransform } from "fastify-type-provider-zod";
import { errorBody, errorBodySchema } from "../../wire/error-body.js";
import { Pcm16Input, SocketWire } from "../../wire/socket-wire.js";
import type { LanguageCode } from "../../core/contracts.js";
import { mintRoomToken, verifyRoomToken, type RoomTokenKeys } from "../tokens.js";
import {
  TRANSLATOR_IDENTITY,
  type RoomAccess,
  type RoomBackend,
  type RoomConnection,
  type RoomEvent,
  type RoomLanguages,
  type RoomMember,
} from "../types.js";
import { listeningLanguage, roomLanguageOf, trackOf } from "../room-languages.js";

/**
 * The embedded room server: media rooms inside this process, so rooms work with no other service.
 * A client opens `ws(s)://<service>/rooms/<room_name>?access_token=<LiveKit-format JWT>`, sends
 * PCM16 16 kHz mono binary frames, and receives the translator's speech (float32 24 kHz binary
 * frames) and JSON events: transcripts and participant joins/leaves. The translator is no
 * participant here, but is named as on LiveKit (identity and track) in each `joined` event.
 */

export const ROOMS_PATH = "/rooms";

export interface EmbeddedRoomOptions {
  readonly keys: RoomTokenKeys;
  readonly tokenTtlSec: number;
  readonly maxParticipants: number;
  /**
   * In a fleet, the address of the process hosting a room this one does not: a participant's
   * connection is forwarded there. Undefined when no live process hosts it.
   */
  readonly hostOf?: (roomName: string) => Promise<string | undefined>;
}

const notUpgraded = errorBody(
  "upgrade_required",
  "this URL is a WebSocket endpoint: connect with a WebSocket client",
);

/** A participant as others are told of them (no socket). */
const memberOf = ({ identity, language, name }: RoomMember): RoomMember => ({
  identity,
  ...(language === undefined ? {} : { language }),
  ...(name === undefined ? {} : { name }),
});

interface Participant extends RoomMember {
  readonly wire: SocketWire;
}

class EmbeddedRoom {
  readonly participants = new Map<string, Participant>();
  translator: { readonly events: Channel<RoomEvent>; readonly speaks: boolean } | undefined;

  constructor(
    readonly name: string,
    readonly roomLanguages: RoomLanguages,
  ) {}

  broadcast(message: ServerMessage, except?: string): void {
    for (const participant of this.participants.values())
      if (participant.identity !== except) participant.wire.send(message);
  }

  /** To `listeners` only, or to everyone. */
  deliver(message: ServerMessage, listeners: readonly string[] | undefined): void {
    if (!listeners) return this.broadcast(message);
    for (const identity of listeners) this.participants.get(identity)?.wire.send(message);
  }

  tell(event: RoomEvent): void {
    this.translator?.events.push(event);
  }
}

export class EmbeddedRoomServer implements RoomBackend {
  readonly kind = "embedded";
  private readonly rooms = new Map<string, EmbeddedRoom>();

  constructor(private readonly options: EmbeddedRoomOptions) {}

  async createRoom(roomName: string, languages: RoomLanguages): Promise<void> {
    if (!this.rooms.has(roomName)) this.rooms.set(roomName, new EmbeddedRoom(roomName, languages));
  }

  async clientAccess(roomName: string, client: RoomMember, publicBaseUrl: string): Promise<RoomAccess> {
    const { keys, tokenTtlSec } = this.options;
    return {
      url: `${publicBaseUrl.replace(/^http/u, "ws")}${ROOMS_PATH}/${encodeURIComponent(roomName)}`,
      token: await mintRoomToken(keys, {
        roomName,
        identity: client.identity,
        ...(client.language === undefined ? {} : { language: client.language }),
        ...(client.name === undefined ? {} : { name: client.name }),
        role: "client",
        ttlSec: tokenTtlSec,
      }),
    };
  }

  async joinAsTranslator(roomName: string, options = { speaks: true }): Promise<RoomConnection> {
    const room = this.rooms.get(roomName);
    if (!room) throw new Error(`room ${roomName} does not exist`);
    const events = new Channel<RoomEvent>();
    const translator = { events, speaks: options.speaks };
    room.translator = translator;
    return {
      events,
      participants: [...room.participants.values()].map(memberOf),
      async publishAudio(samples, output) {
        for (const identity of output.listeners) room.participants.get(identity)?.wire.audio(samples);
      },
      // The embedded server has no tracks: speech goes to its listeners' sockets as it comes.
      async openOutput() {},
      async publishData(message, listeners) {
        room.deliver(message, listeners);
      },
      async leave() {
        if (room.translator === translator) room.translator = undefined;
        events.close();
      },
    };
  }

  async deleteRoom(roomName: string): Promise<void> {
    const room = this.rooms.get(roomName);
    if (!room) return;
    this.rooms.delete(roomName);
    room.translator?.events.close();
    for (const participant of room.participants.values()) participant.wire.close(1000, "room closed");
  }

  async close(): Promise<void> {
    await Promise.all([...this.rooms.keys()].map((name) => this.deleteRoom(name)));
  }

  /** The participants' WebSocket endpoint. */
  routes = async (app: FastifyInstance): Promise<void> => {
    app.get(
      `${ROOMS_PATH}/:roomName`,
      {
        websocket: true,
        schema: {
          tags: ["rooms"],
          summary: "Join an embedded room (the url of POST /api/beta1/session) as a WebSocket",
          description:
            "?access_token=<token>. PCM16 LE mono 16 kHz in; the translator's float32 24 kHz speech and " +
            "JSON events (transcripts, joins and leaves) out. Refused at the handshake with 400, 401, 403 " +
            "or 404; a plain GET answers 426.",
          response: {
            400: errorBodySchema.describe("The join URL's language is not the room's (invalid_language)"),
            401: errorBodySchema.describe("No room token, or an invalid one (unauthorized)"),
            403: errorBodySchema.describe("The room is full (room_full)"),
            404: errorBodySchema.describe("The room has ended (not_found)"),
            426: errorBodySchema.describe("Fetched without upgrading (upgrade_required)"),
          },
        },
        // @fastify/websocket hides WebSocket routes from the API reference; this one belongs there,
        // with its success (the 101 upgrade, which has no body for the serializer).
        config: {
          swaggerTransform: (document: Parameters<typeof jsonSchemaTransform>[0]) => {
            const transformed = jsonSchemaTransform({
              ...document,
              schema: { ...document.schema, hide: false },
            });
            const upgraded = { type: "null", description: "Switching Protocols: the WebSocket is open" };
            const response = transformed.schema.response as Record<string, unknown>;
            return {
              ...transformed,
              schema: { ...transformed.schema, response: { 101: upgraded, ...response } },
            };
          },
        },
        // Refuse the upgrade itself (HTTP 401/404/403) so a client never joins with a bad token.
        preValidation: async (request, reply) => {
          const { roomName } = request.params as { roomName: string };
          const token = (request.query as Record<string, unknown>).access_token;
          if (typeof token !== "string" || token === "") {
            return reply
              .code(401)
              .send(errorBody("unauthorized", "pass the room token as ?access_token=<token>"));
          }
          const verified = await verifyRoomToken(this.options.keys, token, roomName);
          if (!verified.ok) return reply.code(401).send(errorBody("unauthorized", `${verified.reason}`));
          const room = this.rooms.get(roomName);
          if (!room) {
            const host = await this.options.hostOf?.(roomName);
            if (!host) return reply.code(404).send(errorBody("not_found", `room ${roomName} has ended`));
            const forward = new URL(
              `${host.replace(/^http/u, "ws")}${ROOMS_PATH}/${encodeURIComponent(roomName)}`,
            );
            forward.searchParams.set("access_token", token);
            const { language } = request.query as Record<string, unknown>;
            if (typeof language === "string") forward.searchParams.set("language", language);
            if (!request.ws) return reply.code(426).header("upgrade", "websocket").send(notUpgraded);
            request.roomForward = forward.toString();
            return;
          }
          if (
            room.participants.size >= this.options.maxParticipants &&
            !room.participants.has(verified.identity)
          ) {
            return reply
              .code(403)
              .send(
                errorBody("room_full", `room ${roomName} has ${this.options.maxParticipants} participants`),
              );
          }
          // The join URL may name the participant's language over the token's; either must be the room's.
          const asked = (request.query as Record<string, unknown>).language ?? verified.language;
          let language: LanguageCode | undefined;
          if (asked !== undefined) {
            const read = roomLanguageOf(String(asked), room.roomLanguages.languages);
            if (!read.ok) return reply.code(400).send(errorBody("invalid_language", read.message));
            language = read.language;
          }
          // Every refusal above is told a plain GET too (the meeting page asks why it was refused);
          // past them a plain GET (a link previewer) joins nothing, where @fastify/websocket would
          // answer an empty 404.
          if (!request.ws) return reply.code(426).header("upgrade", "websocket").send(notUpgraded);
          request.roomParticipant = {
            roomName,
            identity: verified.identity,
            ...(language === undefined ? {} : { language }),
            ...(verified.name === undefined ? {} : { name: verified.name }),
          };
        },
      },
      (socket, request) =>
        request.roomForward
          ? forwardSocket(socket, request.roomForward)
          : this.attachParticipant(socket, request.roomParticipant!),
    );
  };

  /** Puts a participant whose token was verified into its room: joins, relays its audio, leaves on close. */
  private attachParticipant(
    socket: WebSocket,
    { roomName, ...member }: RoomMember & { roomName: string },
  ): void {
    const { identity, language } = member;
    const room = this.rooms.get(roomName);
    const wire = new SocketWire(socket);
    if (!room) return wire.close(1000, "room closed");
    // As on LiveKit, a second connection with the same identity replaces the first.
    room.participants.get(identity)?.wire.close(1000, "replaced by a new connection with the same identity");
    const participant: Participant = { ...member, wire };
    const others = [...room.participants.values()].filter((other) => other.identity !== identity);
    room.participants.set(identity, participant);
    const { translator } = room;
    const declared = language === undefined ? {} : { language };
    const named = member.name === undefined ? {} : { name: member.name };
    wire.send({
      type: "joined",
      room_name: roomName,
      identity,
      participants: others.map((other) => other.identity),
      participant_info: others.map(memberOf),
      language: language ?? null,
      languages: [...room.roomLanguages.languages],
      translator: translator
        ? {
            identity: TRANSLATOR_IDENTITY,
            audio_track: translator.speaks
              ? trackOf(listeningLanguage({ identity, ...declared }, room.roomLanguages), room.roomLanguages)
              : null,
          }
        : null,
    });
    room.broadcast(
      { type: "participant_joined", identity, ...declared, ...named, timestamp: Date.now() / 1000 },
      identity,
    );
    room.tell({ type: "participant_joined", identity, ...declared, ...named });

    const input = new Pcm16Input((warning) => wire.error(warning));
    socket.on("message", (data: RawData, isBinary: boolean) => {
      if (!isBinary) {
        wire.error("rooms take audio only: send PCM16 16 kHz mono as binary frames");
        return;
      }
      const samples = input.push(data);
      if (samples.length > 0) room.tell({ type: "audio", identity, pcm: samples });
    });
    const leave = () => {
      if (room.participants.get(identity) !== participant) return;
      room.participants.delete(identity);
      room.broadcast({ type: "participant_left", identity, timestamp: Date.now() / 1000 });
      room.tell({ type: "participant_left", identity });
    };
    socket.on("close", leave);
    socket.on("error", leave);
  }
}

declare module "fastify" {
  interface FastifyRequest {
    roomParticipant?: RoomMember & { roomName: string };
    /** The host's URL of a room another process of the fleet hosts. */
    roomForward?: string;
  }
}
