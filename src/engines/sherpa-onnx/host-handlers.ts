/**
 * The sherpa-onnx module, loaded once in the host process (host-main.ts) for its method handlers.
 */
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
/**
 * sherpa-onnx-node: CommonJS, with its native addon; loaded in the host process only, never in the
 * service. It ships no types: each handler module declares the part it uses.
 */
export const sherpa: unknown = require("sherpa-onnx-node");
