import swagger from "@fastify/swagger";
import swaggerUi from "@fastify/swagger-ui";
import type { FastifyInstance } from "fastify";
import { jsonSchemaTransform } from "fastify-type-provider-zod";
import { z } from "zod";
import { SERVICE_VERSION } from "../version.js";
import { errorBodySchema } from "../wire/error-body.js";
import { messagesJsonSchema } from "../wire/messages.js";

/**
 * The API reference: an OpenAPI 3.1 document generated from the routes' zod schemas by
 * @fastify/swagger (`GET /openapi.json`), a reference page (`GET /docs`, @fastify/swagger-ui, served
 * from the package, no network), and the WebSocket messages as JSON Schema generated from the zod
 * schemas the server builds its messages with (`GET /v1/messages.schema.json`).
 */

const ERROR_MEANINGS: Record<number, string> = {
  400: "The request is invalid (invalid_request, or a more specific code)",
  401: "Missing or invalid API key (unauthorized)",
  402: "The account's balance cannot cover this (insufficient_balance)",
  403: "The API key is not entitled to this (forbidden)",
  404: "No such resource (not_found)",
  409: "Conflicts with the resource's state",
  413: "The body is too large (payload_too_large)",
  426: "A WebSocket endpoint fetched without upgrading (upgrade_required)",
  429: "Over a rate or count limit (rate_limited); see Retry-After",
  500: "Internal error, or an engine or room back-end failed (internal_error)",
  503: "No capacity right now (capacity_exhausted); see Retry-After",
};

/** The route's error responses, each with the error body. */
export function errorResponses(...statuses: number[]): Record<number, z.ZodType> {
  return Object.fromEntries(
    statuses.map((status) => [status, errorBodySchema.describe(ERROR_MEANINGS[status] ?? "Error")]),
  );
}

/**
 * Route config that keeps a WebSocket route in the reference: @fastify/websocket hides them (the
 * upgrade is not an HTTP exchange), but users need to find them, their success (the 101 upgrade,
 * documented here only: it has no body for the route's serializer) and their refusals.
 */
export const DOCUMENTED_WEBSOCKET = {
  swaggerTransform: (document: Parameters<typeof jsonSchemaTransform>[0]) => {
    const transformed = jsonSchemaTransform({ ...document, schema: { ...document.schema, hide: false } });
    const upgraded = { type: "null", description: "Switching Protocols: the WebSocket is open" };
    return {
      ...transformed,
      schema: {
        ...transformed.schema,
        response: { 101: upgraded, ...(transformed.schema.response as Record<string, unknown>) },
      },
    };
  },
};

/** Routes that need the API key. */
export const BEARER = [{ bearer: [] }];

export async function registerApiReference(app: FastifyInstance): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: "3.1.0",
      info: {
        title: "relay",
        version: SERVICE_VERSION,
        description:
          "Self-hostable speech translation: real-time sessions over WebSocket (GET /v1/session, then " +
          "the ws_url; messages in /v1/messages.schema.json), translation rooms, and video dubbing.",
      },
      components: {
        securitySchemes: { bearer: { type: "http", scheme: "bearer", description: "API key" } },
      },
      tags: [
        { name: "real-time", description: "Sessions, voices and languages" },
        { name: "rooms", description: "Media rooms with a translator in them" },
        { name: "dubbing", description: "Uploads, jobs and results" },
        { name: "operations", description: "Health, readiness and metrics" },
      ],
    },
    transform: jsonSchemaTransform,
  });
  await app.register(swaggerUi, {
    routePrefix: "/docs",
    uiConfig: { deepLinking: true },
    // Swagger UI sets inline styles; the rest of the service's Content-Security-Policy holds here too.
    transformStaticCSP: (header) => header.replace("style-src 'self'", "style-src 'self' 'unsafe-inline'"),
  });
  app.get("/openapi.json", { schema: { hide: true } }, async () => app.swagger());
  const messages = messagesJsonSchema();
  app.get(
    "/v1/messages.schema.json",
    {
      schema: {
        tags: ["real-time"],
        summary: "The WebSocket's JSON messages, both directions, as JSON Schema",
        response: { 200: z.looseObject({}).describe("A JSON Schema (draft 2020-12) document") },
      },
    },
    async () => messages,
  );
}
