import { z } from "zod";
import type { AsrEngine } from "../../core/contracts.js";
import { base, environment, familySettings, role } from "../kit/descriptor.js";

const settings = environment(
  "pocketsphinx",
  {
    POCKETSPHINX_MODEL_DIR: z.string().default("/usr/share/pocketsphinx/model/en-us"),
    // Pronounces the context's words the dictionary lacks (src/engines/pocketsphinx/pronunciation.ts).
    POCKETSPHINX_ESPEAK_BIN: z.string().default("espeak-ng"),
    POCKETSPHINX_MAX_DECODERS: z.coerce.number().int().min(1).optional(),
    // Real-time profile: a bounded search without the second (flat) pass. `npm run bench:asr` on the
    // LibriVox clips: 0.12 CPU-s per audio second and 18 ms to finish an utterance, against 0.31 and
    // 239 ms with the library defaults, for WER 0.347 instead of 0.307 (docs/benchmarks.md).
    POCKETSPHINX_SETTINGS: z
      .string()
      .default("-maxhmmpf 2000 -fwdflat no -bestpath yes")
      .transform((value, ctx) => {
        const parts = value.split(/\s+/u).filter(Boolean);
        if (parts.length % 2 !== 0 || parts.some((part, i) => i % 2 === 0 && !part.startsWith("-"))) {
          ctx.addIssue({
            code: "custom",
            message: 'expected "-name value" pairs, e.g. "-maxhmmpf 2000 -fwdflat no"',
          });
          return z.NEVER;
        }
        return Object.fromEntries(parts.flatMap((part, i) => (i % 2 === 0 ? [[part, parts[i + 1]!]] : [])));
      }),
  },
  (e, service) => ({
    modelDir: e.POCKETSPHINX_MODEL_DIR,
    espeakBinary: e.POCKETSPHINX_ESPEAK_BIN,
    // One decoder per concurrently speaking session, bounded so memory stays predictable.
    maxDecoders: e.POCKETSPHINX_MAX_DECODERS ?? Math.min(service.maxSessions, 16),
    decoderSettings: e.POCKETSPHINX_SETTINGS as Readonly<Record<string, string>>,
  }),
);

/** `pocketsphinx` in the engines file: its entries' schema, and the factory that imports and builds the engine. */
export const descriptor = {
  id: "pocketsphinx",
  environment: settings,
  asr: role(
    z.strictObject({
      engine: z.literal("pocketsphinx"),
      ...base,
      modelDir: z.string().optional(),
      maxDecoders: z.number().int().min(1).optional(),
    }),
    async (spec, c): Promise<AsrEngine> => {
      const own = familySettings(c, settings);
      const { createPocketSphinxEngine } = await import("./index.js");
      return createPocketSphinxEngine({
        modelDir: spec.modelDir ?? own.modelDir,
        maxDecoders: spec.maxDecoders ?? own.maxDecoders,
        decoderSettings: own.decoderSettings,
        espeakBinary: own.espeakBinary,
      });
    },
  ),
} as const;
