/**
 * The sherpa-onnx host process: loads models and runs inference for the service's sherpa-onnx
 * engines (src/engines/kit/model-host/). sherpa-onnx runs here rather than in the service because:
 * - a model file it cannot read makes its native code end the process (`_Exit`), not throw;
 * - most of its calls block the thread that makes them;
 * - it bundles eSpeak NG (GPL-3.0) for Piper's phonemes, and this Apache-2.0 project runs GPL code
 *   only as a separate program (as src/engines/espeak-ng/ does).
 */
import { serveRequests } from "../kit/model-host/serve.js";
import { sherpa } from "./host-handlers.js";
import { asrHandlers } from "./host-asr.js";
import { speakerHandlers } from "./host-speaker.js";
import type { SherpaMethods } from "./host-protocol.js";
import { ttsHandlers } from "./host-tts.js";

serveRequests<SherpaMethods>({
  version: () => (sherpa as { version: string }).version,
  ...ttsHandlers,
  ...asrHandlers,
  ...speakerHandlers,
});
