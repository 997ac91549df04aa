import { z } from "zod";
import type { AsrEngine, TtsEngine } from "../../core/contracts.js";
import { base, hostLimits, role } from "../kit/descriptor.js";

/** `sherpa-onnx` in the engines file: its entries' schema, and the factory that imports and builds the engine. */
export const descriptor = {
  id: "sherpa-onnx",
  asr: role(
    z.strictObject({
      engine: z.literal("sherpa-onnx"),
      ...base,
      /** A pulled streaming recognition model (default: the pulled one). */
      model: z.string().min(1).optional(),
      /** A pulled punctuation model for finals, or false for none (default: the pulled one, if any). */
      punctuation: z.union([z.string().min(1), z.literal(false)]).optional(),
      threads: z.number().int().min(1).max(16).optional(),
      maxStreams: z.number().int().min(1).max(1024).optional(),
      maxHostMiB: z.number().int().min(256).optional(),
      ...hostLimits,
    }),
    async (spec, c): Promise<AsrEngine> => {
      const [{ createSherpaRecognizer }, { recognizerFiles }] = await Promise.all([
        import("./recognizer.js"),
        import("./models.js"),
      ]);
      return createSherpaRecognizer({
        ...recognizerFiles(spec.model, spec.punctuation, c.modelsDir),
        threads: spec.threads,
        maxStreams: spec.maxStreams,
        maxHostMiB: spec.maxHostMiB,
        timeoutMs: spec.timeoutMs,
      });
    },
  ),
  tts: role(
    z.strictObject({
      engine: z.literal("sherpa-onnx"),
      ...base,
      /** Catalogue names of pulled voice models, in order of preference (default: every pulled one). */
      voices: z.array(z.string().min(1)).min(1).optional(),
      threads: z.number().int().min(1).max(16).optional(),
      maxConcurrent: z.number().int().min(1).max(16).optional(),
      maxQueued: z.number().int().min(0).max(1024).optional(),
      maxQueuedPerAccount: z.number().int().min(1).max(1024).optional(),
      maxHostMiB: z.number().int().min(256).optional(),
      ...hostLimits,
    }),
    async (spec, c): Promise<TtsEngine> => {
      const [{ createSherpaTtsEngine }, { neuralVoiceModels }, { voiceMeasurementStore }] = await Promise.all(
        [import("./tts.js"), import("./models.js"), import("../../voices/measurement-store.js")],
      );
      return createSherpaTtsEngine({
        models: neuralVoiceModels(spec.voices, c.modelsDir),
        threads: spec.threads,
        maxConcurrent: spec.maxConcurrent,
        maxQueued: spec.maxQueued,
        maxQueuedPerAccount: spec.maxQueuedPerAccount,
        maxHostMiB: spec.maxHostMiB,
        timeoutMs: spec.timeoutMs,
        measurements: voiceMeasurementStore(c.voiceMeasurementsDir),
      });
    },
  ),
} as const;
