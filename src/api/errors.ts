import type { FastifyInstance } from "fastify";

/**
 * Every HTTP error leaves the service as `{"error": {"code", "message"}}` with a stable,
 * machine-readable `code` and a message saying what is wrong and what would work.
 */
export class ApiError extends Error {
  constructor(
    readonly statusCode: number,
    readonly code: string,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

export function errorBody(code: string, message: string) {
  return { error: { code, message } };
}

const CODES_BY_STATUS: Record<number, string> = {
  400: "invalid_request",
  401: "unauthorized",
  402: "insufficient_balance",
  403: "forbidden",
  404: "not_found",
  405: "method_not_allowed",
  413: "payload_too_large",
  415: "unsupported_media_type",
  429: "rate_limited",
  503: "unavailable",
};

export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error, request, reply) => {
    if (error instanceof ApiError) {
      return reply.code(error.statusCode).headers(error.headers).send(errorBody(error.code, error.message));
    }
    const status = (error as { statusCode?: number }).statusCode ?? 500;
    if (status >= 500) {
      request.log.error({ err: error }, "request failed");
      return reply.code(500).send(errorBody("internal_error", "internal error; the failure was logged"));
    }
    // Fastify's own client errors (bad JSON, wrong content type, body too large).
    return reply
      .code(status)
      .send(errorBody(CODES_BY_STATUS[status] ?? "invalid_request", (error as Error).message));
  });
  app.setNotFoundHandler((request, reply) =>
    reply
      .code(404)
      .send(errorBody("not_found", `no route for ${request.method} ${request.url.split("?")[0]}`)),
  );
}
