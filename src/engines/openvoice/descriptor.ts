import { z } from "zod";
import type { ToneColorEngine } from "../../core/contracts.js";
import { environment, familySettings, type EngineDefaults } from "../kit/descriptor.js";
import { findToneColorModel } from "./catalogue.js";
import { pulledToneColorModel, toneColorLoadProblem, toneColorModelDir } from "./models.js";

const settings = environment(
  "openvoice",
  {
    /**
     * "on" (default): voice_type=clone speaks in each speaker's own voice when a tone colour model
     * is pulled; "off": never (the nearest library voice serves, as without the model).
     */
    VOICE_CLONE: z.enum(["on", "off"]).default("on"),
  },
  (e, service) => {
    const enabled = e.VOICE_CLONE === "on";
    // Settled with the configuration, as the other pulled models are: the engines it names are
    // what this process serves.
    return { enabled, model: enabled ? pulledToneColorModel(service.modelsDir)?.name : undefined };
  },
);

/**
 * `openvoice`: tone colour conversion for voice_type=clone. Not an engine the engines file names:
 * the service loads it when a model is pulled and VOICE_CLONE allows (src/engines/routing/registry.ts).
 */
export const descriptor = {
  id: "openvoice",
  environment: settings,
  /** The converter, undefined when VOICE_CLONE is off or no model is pulled; throws when one cannot load. */
  async toneColor(c: EngineDefaults): Promise<ToneColorEngine | undefined> {
    const { model } = familySettings(c, settings);
    if (model === undefined) return undefined;
    // The engine (onnxruntime, its host) is loaded only when a model is there to serve.
    const { createOpenVoiceEngine } = await import("./index.js");
    const entry = findToneColorModel(model)!;
    const problem = toneColorLoadProblem(entry, c.modelsDir);
    if (problem) throw new Error(`the tone colour model is not loaded: ${problem}`);
    return createOpenVoiceEngine({ entry, dir: toneColorModelDir(entry, c.modelsDir) });
  },
  /** Whether VOICE_CLONE lets clone voices be converted at all. */
  enabled: (c: EngineDefaults): boolean => familySettings(c, settings).enabled,
} as const;
