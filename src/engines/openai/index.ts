/**
 * Remote engines speaking the OpenAI-compatible HTTP API — the de-facto standard of open inference
 * servers (faster-whisper / whisper.cpp servers, vLLM, llama.cpp server, Ollama, Kokoro-FastAPI, …)
 * and of hosted APIs. See client.ts and ../remote/ for retries, time limits, concurrency and the
 * circuit breaker.
 */
export { RemoteClient, createRemoteClient, type RemoteEngineOptions } from "./client.js";
export { RemoteEngineError, type RemoteErrorKind, type RemoteKind } from "../kit/remote/errors.js";
export { type CircuitOptions, type CircuitStatus } from "../kit/remote/guard.js";
export { createOpenAiAsrEngine, type OpenAiAsrOptions } from "./asr.js";
export { createOpenAiMtEngine, type OpenAiMtOptions } from "./mt.js";
export { createOpenAiTtsEngine, type OpenAiTtsOptions, type OpenAiTtsVoices } from "./tts.js";
export { languageCodeOf } from "./languages.js";
