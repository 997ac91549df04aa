/**
 * What a model host's two sides agree on (host.ts ↔ serve.ts): each host's methods as a typed map
 * (`Method`), the request API engines call them through, and the messages on the IPC channel.
 * Typed arrays cross as they are (the channel uses Node's "advanced" serialization).
 */

/**
 * One method of a host: its parameters, its result and, for methods that stream, the parts sent
 * ahead of the result. A host's methods are an interface of these (sherpa-onnx/host-protocol.ts),
 * which both sides are typed with: call sites and handlers agree without casts.
 */
export interface Method<Params, Result, Chunk = never> {
  readonly params: Params;
  readonly result: Result;
  readonly chunk: Chunk;
}

/** A host's methods by name. */
export type MethodMap<M> = { readonly [K in keyof M]: Method<unknown, unknown, unknown> };

export interface RequestOptions<Chunk = unknown> {
  /** Receives the parts of a streamed result, in order, before the request resolves. */
  readonly onChunk?: (chunk: Chunk) => void;
  /**
   * Asks the host to stop; the request then rejects with the signal's reason once the host has
   * stopped (or at its deadline).
   */
  readonly signal?: AbortSignal;
  /** This request's deadline instead of the host's (no reply nor part for this long). */
  readonly timeoutMs?: number;
}

/** What `request` takes and gives for method `K` of the method map `M`. */
export type RequestOf<M extends MethodMap<M>> = <K extends keyof M & string>(
  method: K,
  params: M[K]["params"],
  options?: RequestOptions<M[K]["chunk"]>,
) => Promise<M[K]["result"]>;

/** A stream's handle on one process: its requests all go there (the process holds its state). */
export interface PinnedHost<M extends MethodMap<M>> {
  request: RequestOf<M>;
  /** The stream is done with the process (a replaced process may then end). */
  release(): void;
}

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
