import { STATUS_CODES } from "node:http";
import type { Socket } from "node:net";
import type {
  FastifyError,
  FastifyInstance,
  FastifyReply,
  FastifyRequest,
  FastifyServerOptions,
} from "fastify";
import { hasZodFastifySchemaValidationErrors } from "fastify-type-provider-zod";
import { AuthError, type AuthErrorKind } from "../auth/errors.js";
import { errorBody } from "../wire/error-body.js";

export { errorBody } from "../wire/error-body.js";

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

/** The HTTP status of each refusal of the auth domain; its error code is the kind itself. */
const AUTH_STATUS: Record<AuthErrorKind, number> = {
  unauthorized: 401,
  forbidden: 403,
  insufficient_balance: 402,
};

/** One failed check of a route's zod `schema` (body, querystring or params). */
export interface ValidationIssue {
  /** Dotted path of the failing field ("source_url", "metadata.name"); "" for the value as a whole. */
  readonly field: string;
  /** zod's issue code: "invalid_type", "invalid_value", "custom" (a refinement or transform), … */
  readonly kind: string;
  /** The schema's message for the issue. */
  readonly message: string;
}

/**
 * How a route reports a request its `schema` refused (route `config.validationError`): the error
 * code (default `invalid_request`) and message (default `<field>: <message>`) for the first issue.
 */
export interface ValidationErrorMapping {
  readonly code?: (issue: ValidationIssue) => string;
  readonly message?: (issue: ValidationIssue) => string;
}

declare module "fastify" {
  interface FastifyContextConfig {
    validationError?: ValidationErrorMapping;
    /** Bytes the route's request line and headers may take beyond the service's bound (`limitHeaderBytes`). */
    extraHeaderBytes?: number;
  }
}

function validationRefusal(
  validation: readonly { instancePath: string; keyword: string; message?: string }[],
  request: FastifyRequest,
) {
  const first = validation[0];
  const issue: ValidationIssue = {
    field: (first?.instancePath ?? "").replace(/^\//u, "").replaceAll("/", "."),
    kind: first?.keyword ?? "custom",
    message: first?.message ?? "invalid request",
  };
  const mapping = request.routeOptions.config.validationError;
  const code = mapping?.code?.(issue) ?? "invalid_request";
  const message =
    mapping?.message?.(issue) ?? (issue.field === "" ? issue.message : `${issue.field}: ${issue.message}`);
  return errorBody(code, message);
}

const CODES_BY_STATUS: Record<number, string> = {
  400: "invalid_request",
  401: "unauthorized",
  402: "insufficient_balance",
  403: "forbidden",
  404: "not_found",
  405: "method_not_allowed",
  406: "not_acceptable",
  408: "request_timeout",
  413: "payload_too_large",
  414: "uri_too_long",
  415: "unsupported_media_type",
  426: "upgrade_required",
  429: "rate_limited",
  431: "headers_too_large",
  503: "unavailable",
};

/**
 * Messages for errors raised by Fastify or Node's HTTP parser. They are fixed texts: the framework's
 * own messages quote the request (its URL, content type or header bytes), and an error body must
 * never echo what the client sent.
 */
const FRAMEWORK_MESSAGES: Record<number, string> = {
  400: "the request is malformed (check the JSON body, the URL encoding and the headers)",
  404: "no such route; see the README for the endpoints",
  406: "the requested response type is not available; this API answers application/json",
  408: "the request was not received in time",
  413: "the request body is too large",
  414: "the URL is too long",
  415: "unsupported content type; send application/json",
  431: "the request headers (including the URL) are too large",
};

function frameworkError(status: number): { status: number; body: ReturnType<typeof errorBody> } {
  const code = status >= 400 && status < 500 ? status : 400;
  const message =
    FRAMEWORK_MESSAGES[code] ?? `the request was refused (${STATUS_CODES[code] ?? "client error"})`;
  return { status: code, body: errorBody(CODES_BY_STATUS[code] ?? "invalid_request", message) };
}

/** Fastify options that route its framework-level errors (bad URL, over-long parameter) to our body. */
export const frameworkErrorOptions: Pick<FastifyServerOptions, "frameworkErrors" | "clientErrorHandler"> = {
  frameworkErrors(error: FastifyError, _request, reply: FastifyReply) {
    const { status, body } = frameworkError(error.code === "FST_ERR_MAX_PARAM_LENGTH" ? 414 : 400);
    void reply.code(status).send(body);
  },
  // Errors of Node's HTTP parser (malformed request line or headers, headers over the size limit,
  // timeouts) never reach a route: answer them on the raw socket, still with our body.
  clientErrorHandler(error: Error & { code?: string }, socket: Socket) {
    if (error.code === "ECONNRESET" || socket.destroyed) return;
    const status =
      error.code === "HPE_HEADER_OVERFLOW" ? 431 : error.code === "ERR_HTTP_REQUEST_TIMEOUT" ? 408 : 400;
    const { body } = frameworkError(status);
    const json = JSON.stringify(body);
    if (socket.writable) {
      socket.write(
        `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nConnection: close\r\n` +
          `Content-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(json)}\r\n\r\n${json}`,
      );
    }
    socket.destroy();
  },
};

/**
 * Holds every request's line and headers to `maxBytes`, plus its route's `extraHeaderBytes`, with
 * the 431 Node's parser gives past its own limit. That limit is set to the largest route's bound
 * (a long `context` in `GET /v1/session`), so the other routes are held to theirs here.
 */
export function limitHeaderBytes(app: FastifyInstance, maxBytes: number): void {
  app.addHook("onRequest", async (request, reply) => {
    const { method, url, httpVersion, rawHeaders } = request.raw;
    // As sent: "METHOD URL HTTP/x.y\r\n", "name: value\r\n" each, "\r\n" (Node reads them as latin1).
    let bytes = `${method} ${url} HTTP/${httpVersion}\r\n\r\n`.length;
    for (let i = 0; i + 1 < rawHeaders.length; i += 2)
      bytes += rawHeaders[i]!.length + rawHeaders[i + 1]!.length + 4;
    if (bytes > maxBytes + (request.routeOptions.config.extraHeaderBytes ?? 0)) {
      const { status, body } = frameworkError(431);
      return reply.code(status).send(body);
    }
  });
}

export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error, request, reply) => {
    if (error instanceof ApiError) {
      return reply.code(error.statusCode).headers(error.headers).send(errorBody(error.code, error.message));
    }
    if (error instanceof AuthError) {
      return reply.code(AUTH_STATUS[error.kind]).send(errorBody(error.kind, error.message));
    }
    // A route's zod schema refused the request: the route chooses the code from the failing field.
    if (hasZodFastifySchemaValidationErrors(error)) {
      return reply.code(400).send(validationRefusal(error.validation, request));
    }
    const status = (error as { statusCode?: number }).statusCode ?? 500;
    if (status >= 500) {
      request.log.error({ err: error }, "request failed");
      return reply.code(500).send(errorBody("internal_error", "internal error; the failure was logged"));
    }
    // Fastify's own client errors (bad JSON, wrong content type, body too large).
    request.log.debug({ err: error }, "request refused by the framework");
    const refused = frameworkError(status);
    return reply.code(refused.status).send(refused.body);
  });
  app.setNotFoundHandler((_request, reply) => reply.code(404).send(frameworkError(404).body));
}
