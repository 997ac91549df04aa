/**
 * A model host entry point for the tests of src/engines/kit/model-host/host.ts: served by the real
 * `serveRequests`, with methods that behave as a misbehaving model would (never answers, ends the
 * process, streams until told to stop, holds memory).
 */
import type { Method } from "../../../src/engines/kit/model-host/protocol.js";
import { serveRequests } from "../../../src/engines/kit/model-host/serve.js";

/** The test host's methods (test/unit/model-host.test.ts calls them). */
export interface TestHostMethods {
  readonly pid: Method<null, number>;
  readonly echo: Method<unknown, unknown>;
  readonly hang: Method<null, never>;
  readonly wait: Method<{ ms: number }, string>;
  readonly slowLoad: Method<{ ms: number }, string>;
  readonly crash: Method<null, never>;
  readonly load: Method<{ crash: boolean }, string>;
  readonly stream: Method<null, number, number>;
  readonly grow: Method<{ mib: number }, number>;
}

const held: Buffer[] = [];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

serveRequests<TestHostMethods>({
  pid: () => process.pid,
  echo: (value) => value,
  /** Never answers. */
  hang: () => new Promise(() => undefined),
  /** Answers after `ms`. */
  wait: async ({ ms }) => {
    await sleep(ms);
    return "waited";
  },
  /** A long step that leaves the process free (a model load), said to be still working. */
  slowLoad: async ({ ms }, request) => {
    await request.whileWorking(sleep(ms));
    return "loaded";
  },
  /** Ends the process as a native library's `_Exit` would. */
  crash: () => process.exit(3),
  /** A model load that ends the process when `crash` is set. */
  load: ({ crash }) => (crash ? process.exit(4) : "loaded"),
  /** Sends a part every 20 ms until cancelled; says how many parts it sent. */
  stream: async (_, request) => {
    let parts = 0;
    while (!request.cancelled() && parts < 500) {
      request.chunk(parts++);
      await sleep(20);
    }
    // The work goes on a little after the cancellation, as a model pass would.
    await sleep(100);
    return parts;
  },
  /** Holds `mib` more MiB (touched, so resident). */
  grow: ({ mib }) => {
    held.push(Buffer.alloc(mib * 1024 * 1024, 1));
    return process.pid;
  },
});
