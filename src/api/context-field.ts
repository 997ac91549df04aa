import { z } from "zod";
import { MAX_CONTEXT_LENGTH, MAX_GLOSSARY_TERMS } from "../core/glossary.js";
import { characterCount } from "./realtime/session-params.js";

/**
 * `context` in a JSON body (rooms and dubbing, beyond the spec, as sessions take it): free text with
 * names and jargon, and glossary lines `source => target`, parsed as for sessions (src/core/glossary.ts).
 */
export const contextField = z
  .string({ error: `context must be a string of names and jargon (up to ${MAX_CONTEXT_LENGTH} characters)` })
  .refine((value) => characterCount(value) <= MAX_CONTEXT_LENGTH, {
    error: (issue) =>
      `context is ${characterCount(issue.input as string)} characters long; the limit is ${MAX_CONTEXT_LENGTH}`,
  })
  .optional()
  .describe(
    `Beyond the spec, as a session's context: names and jargon to recognize and keep in translation, ` +
      `and glossary lines "source => target" ("term => =" keeps it verbatim); up to ` +
      `${MAX_CONTEXT_LENGTH} characters, the first ${MAX_GLOSSARY_TERMS} terms used`,
  );
