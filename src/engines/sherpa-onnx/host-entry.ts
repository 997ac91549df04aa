/** The sherpa-onnx host process's entry point (host-main.ts), for src/engines/kit/model-host/host.ts. */
export const SHERPA_HOST = new URL("./host-main.js", import.meta.url);
