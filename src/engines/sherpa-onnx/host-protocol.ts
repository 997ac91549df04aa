/**
 * Messages between the service and its sherpa-onnx host process (host.ts ↔ host-main.ts). Typed
 * arrays cross as they are (the channel uses Node's "advanced" serialization).
 */

/** A request; `id` is unique per host process. */
export interface HostRequest {
  readonly id: number;
  readonly method: string;
  readonly params: unknown;
}

/** A request's cancellation (its reply still comes: an error or what was done before it stopped). */
export interface HostCancel {
  readonly id: number;
  readonly cancel: true;
}

export type HostReply =
  /** Part of the result, for methods that stream (speech, chunk by chunk). */
  | { readonly id: number; readonly chunk: unknown }
  | { readonly id: number; readonly result: unknown }
  | { readonly id: number; readonly error: string };

/** A Piper (VITS) voice, as sherpa-onnx's `OfflineTts` takes it. */
export interface TtsModelFiles {
  readonly kind: "vits";
  readonly model: string;
  readonly tokens: string;
  /**
   * eSpeak NG's data directory (the phonemizer inside sherpa-onnx reads it). sherpa-onnx sets its
   * phonemizer up once per process: the first voice's directory serves every later one.
   */
  readonly dataDir: string;
}

export interface LoadTtsParams {
  /** The name replies and later requests use for this model. */
  readonly name: string;
  readonly files: TtsModelFiles;
  readonly threads: number;
}

export interface LoadedTts {
  readonly speakers: number;
  readonly sampleRate: number;
}

export interface GenerateParams {
  readonly name: string;
  readonly text: string;
  readonly speaker: number;
  /** sherpa-onnx's speed: 1 is the model's own pace, 2 twice as fast. */
  readonly speed: number;
}
