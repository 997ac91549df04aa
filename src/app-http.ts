import rateLimit from "@fastify/rate-limit";
import websocket from "@fastify/websocket";
import Fastify, { type FastifyInstance } from "fastify";
import { serializerCompiler, validatorCompiler } from "fastify-type-provider-zod";
import type { Redis } from "ioredis";
import { frameworkErrorOptions, limitHeaderBytes, registerErrorHandling } from "./api/errors.js";
import { registerApiReference } from "./api/openapi.js";
import { requestIds, trustedProxies } from "./api/proxies.js";
import { CONTEXT_QUERY_BYTES } from "./api/realtime/routes.js";
import { RequestLog, requestLogSerializers } from "./api/request-log.js";
import { browserOriginsOf, registerSecurityHeaders } from "./api/security-headers.js";
import type { Config } from "./config.js";

/** Largest WebSocket message accepted; bigger ones close the socket with 1009. */
const MAX_MESSAGE_BYTES = 64 * 1024;

/**
 * The HTTP server before any route: logging and request ids, trusted proxies, header and body
 * bounds, security headers, the error format, zod validation, and the rate-limit, WebSocket and API
 * reference plugins the routes rely on. The service's routes and what they run on are wired in
 * src/app.ts.
 */
export async function createHttpServer(
  config: Config,
  redis: Redis | undefined,
  /** Where log lines go instead of stdout (tests read them). */
  logStream?: { write(line: string): void },
): Promise<FastifyInstance> {
  const isTrustedProxy = trustedProxies(config.http.trustedProxies);
  const http = Fastify({
    logger: {
      level: config.logLevel,
      serializers: requestLogSerializers,
      ...(logStream ? { stream: logStream } : {}),
    },
    bodyLimit: 1 << 20,
    // Node's parser holds requests to the largest bound (GET /v1/session's); limitHeaderBytes, the rest.
    http: { maxHeaderSize: config.http.maxHeaderBytes + CONTEXT_QUERY_BYTES },
    forceCloseConnections: true,
    trustProxy: (address: string) => isTrustedProxy(address),
    // The request id is echoed on the response and names the request in every log line.
    requestIdHeader: false,
    genReqId: requestIds(isTrustedProxy),
    logController: new RequestLog(config.http.requestLogPerSec),
    ...frameworkErrorOptions,
  });
  http.addHook("onRequest", async (request, reply) => {
    reply.header("x-request-id", request.id);
  });
  limitHeaderBytes(http, config.http.maxHeaderBytes);
  const { backend } = config.rooms;
  const livekitUrl = backend.kind === "livekit" ? backend.url : undefined;
  await registerSecurityHeaders(http, browserOriginsOf(config.publicBaseUrl, config.storage, livekitUrl));
  registerErrorHandling(http);
  // Route schemas are zod schemas: requests are validated (and defaults applied) before a handler runs.
  http.setValidatorCompiler(validatorCompiler);
  http.setSerializerCompiler(serializerCompiler);
  const keyPrefix = config.redis?.keyPrefix ?? "";
  // With Redis the counters are the fleet's, so a key's budget is the same whichever process
  // counts a request; without it they are this process's.
  await http.register(rateLimit, {
    global: false,
    ...(redis ? { redis, nameSpace: `${keyPrefix}rate:` } : {}),
  });
  await http.register(websocket, {
    // UTF-8 is validated per message by the session (an error frame, not a dropped connection).
    options: { maxPayload: MAX_MESSAGE_BYTES, skipUTF8Validation: true },
    errorHandler(error, socket, request) {
      // Protocol violations (oversized frames: 1009) are closed by ws itself with the right code.
      if ((error as { code?: string }).code?.startsWith("WS_ERR_")) {
        request.log.debug({ err: error }, "client broke the WebSocket protocol");
        return;
      }
      request.log.error({ err: error }, "session handler failed");
      socket.close(4500, "internal error");
    },
  });
  // Before the routes: the reference collects them as they are added.
  await registerApiReference(http);
  return http;
}
