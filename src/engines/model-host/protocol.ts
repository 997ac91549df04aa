/**
 * Messages between the service and a model host process (host.ts ↔ serve.ts). Typed arrays cross
 * as they are (the channel uses Node's "advanced" serialization).
 */

/** A request; `id` is unique per host process. */
export interface HostRequest {
  readonly id: number;
  readonly method: string;
  readonly params: unknown;
}

/** The process's first message: it has loaded its code and serves requests from now on. */
export interface HostReady {
  readonly ready: true;
}

/** A request's cancellation (its reply still comes: an error or what was done before it stopped). */
export interface HostCancel {
  readonly id: number;
  readonly cancel: true;
}

/** A final reply carries the process's resident memory (bytes), for the service's memory ceiling. */
export type HostReply =
  /** Part of the result, for methods that stream (speech, chunk by chunk). */
  | { readonly id: number; readonly chunk: unknown }
  /** Still working on a long step (a model load) with its event loop free: renews the deadline. */
  | { readonly id: number; readonly alive: true }
  | { readonly id: number; readonly result: unknown; readonly rss?: number }
  | { readonly id: number; readonly error: string; readonly rss?: number };
