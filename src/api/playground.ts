import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { errorBody } from "./errors.js";

/**
 * The browser playground at `/` and the translated-meeting page at `/meeting`: static files
 * (src/playground, copied next to the build by `npm run build`), the SDK as the browser loads it
 * (`/sdk/*.js`, the build of packages/client, which needs no bundler: its only import of `ws` is
 * never reached in browsers) and livekit-client's browser build, which the meeting page loads
 * only when rooms are on LiveKit (`/vendor/livekit-client.esm.mjs`: one self-contained ES module,
 * from node_modules). Nothing is built on request and nothing is read outside these fixed lists
 * of files.
 */

export const PLAYGROUND_FILES: Readonly<Record<string, string>> = {
  "playground.js": "text/javascript; charset=utf-8",
  "capture-worklet.js": "text/javascript; charset=utf-8",
  "playground.css": "text/css; charset=utf-8",
  "meeting.js": "text/javascript; charset=utf-8",
  "meeting-logic.js": "text/javascript; charset=utf-8",
  "meeting-room.js": "text/javascript; charset=utf-8",
  "meeting-create.js": "text/javascript; charset=utf-8",
  "meeting-captions.js": "text/javascript; charset=utf-8",
  "meeting.css": "text/css; charset=utf-8",
  "speech-player.js": "text/javascript; charset=utf-8",
};
/** The SDK modules the browser imports (the Node-only test client is not among them). */
export const SDK_FILES = [
  "index.js",
  "realtime.js",
  "dubbing.js",
  "errors.js",
  "messages.js",
  "protocol.js",
  "speak-lines.js",
];

const here = (relative: string) => fileURLToPath(new URL(relative, import.meta.url));
const playgroundDir = here("../playground/");
/** The SDK package's build: the same place from the sources (src/api) and from the build (dist/api). */
const sdkDir = here("../../packages/client/dist/");
/** The browser modules of npm packages the pages load, by the name they are served at. */
const VENDOR_FILES: Record<string, { readonly from: string; readonly file: string }> = {
  // The package's `require` entry is its UMD build; the ES module build lies beside it.
  "livekit-client.esm.mjs": { from: "livekit-client", file: "livekit-client.esm.mjs" },
};
const require = createRequire(import.meta.url);

export async function playgroundRoutes(app: FastifyInstance): Promise<void> {
  const page = { tags: ["playground"], hide: true };
  app.get("/", { schema: page }, async (_request, reply) =>
    reply.type("text/html; charset=utf-8").send(await readFile(`${playgroundDir}index.html`)),
  );
  app.get("/meeting", { schema: page }, async (_request, reply) =>
    reply.type("text/html; charset=utf-8").send(await readFile(`${playgroundDir}meeting.html`)),
  );
  app.get(
    "/playground/:file",
    { schema: { ...page, params: z.object({ file: z.string() }) } },
    async (request, reply) => {
      const { file } = request.params as { file: string };
      const type = Object.hasOwn(PLAYGROUND_FILES, file) ? PLAYGROUND_FILES[file] : undefined;
      if (!type) return reply.code(404).send(errorBody("not_found", `no playground file ${file}`));
      return reply.type(type).send(await readFile(`${playgroundDir}${file}`));
    },
  );
  app.get(
    "/sdk/:file",
    { schema: { ...page, params: z.object({ file: z.string() }) } },
    async (request, reply) => {
      const { file } = request.params as { file: string };
      if (!SDK_FILES.includes(file))
        return reply.code(404).send(errorBody("not_found", `no SDK module ${file}`));
      const source = await readFile(`${sdkDir}${file}`).catch(() => undefined);
      if (!source) {
        return reply
          .code(503)
          .send(errorBody("unavailable", "the SDK is not built: run `npm run build` (npm run setup does)"));
      }
      return reply.type("text/javascript; charset=utf-8").send(source);
    },
  );
  app.get(
    "/vendor/:file",
    { schema: { ...page, params: z.object({ file: z.string() }) } },
    async (request, reply) => {
      const { file } = request.params as { file: string };
      const vendored = Object.hasOwn(VENDOR_FILES, file) ? VENDOR_FILES[file] : undefined;
      if (!vendored) return reply.code(404).send(errorBody("not_found", `no vendored module ${file}`));
      const source = await readVendored(vendored.from, vendored.file);
      if (!source) {
        return reply
          .code(503)
          .send(errorBody("unavailable", `${vendored.from} is not installed: run \`npm install\``));
      }
      return reply.type("text/javascript; charset=utf-8").send(source);
    },
  );
}

async function readVendored(pkg: string, file: string): Promise<Buffer | undefined> {
  try {
    return await readFile(path.join(path.dirname(require.resolve(pkg)), file));
  } catch {
    return undefined;
  }
}
