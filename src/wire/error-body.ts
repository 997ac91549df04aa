import { z } from "zod";

/**
 * The body of every HTTP error the service sends (the REST interface, the WebSocket upgrade
 * refusals, the local object store): `{"error": {"code", "message"}}` with a stable,
 * machine-readable `code` and a message saying what is wrong and what would work.
 */
export function errorBody(code: string, message: string) {
  return { error: { code, message } };
}

/** `errorBody` as a route's response schema: the API reference documents it, the serializer checks it. */
export const errorBodySchema = z
  .object({
    error: z.object({
      code: z.string().describe("Stable, machine-readable code, e.g. rate_limited"),
      message: z.string().describe("What is wrong and what would work, for a person to read"),
    }),
  })
  .describe("The body of every error");
