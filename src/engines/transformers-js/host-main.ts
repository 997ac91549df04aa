/**
 * The transformers.js host process: loads translation models and translates for the service's
 * transformers-js engine (index.ts). It runs in a process of its own because onnxruntime's `run()`
 * blocks the thread that calls it for the whole of a forward pass: in the service it would stall
 * every session's audio; here it stalls only this process, and the service batches sentences for it.
 */
import { serveRequests } from "../kit/model-host/serve.js";
import { translationHandlers } from "./host-translate.js";

serveRequests(translationHandlers());
