/**
 * What the host process's method handlers share (host-main.ts dispatches to them): the sherpa-onnx
 * module, loaded here once, and the shape of a handler.
 */
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
/**
 * sherpa-onnx-node: CommonJS, with its native addon; loaded in the host process only, never in the
 * service. It ships no types: each handler module declares the part it uses.
 */
export const sherpa: unknown = require("sherpa-onnx-node");

/** The request a handler serves. */
export interface HandlerRequest {
  readonly id: number;
  /** Sends part of the result ahead of it (streamed speech). */
  chunk(value: unknown): void;
  /** Whether the service has asked this request to stop. */
  cancelled(): boolean;
}

export type Handler = (params: never, request: HandlerRequest) => unknown;
