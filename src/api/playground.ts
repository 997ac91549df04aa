import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { errorBody } from "./errors.js";

/**
 * The browser playground at `/`: static files (src/playground, copied next to the build by
 * `npm run build`) and the SDK as the browser loads it (`/sdk/*.js`, the build of packages/client,
 * which needs no bundler: its only import of `ws` is never reached in browsers).
 * Nothing is built on request and nothing is read outside these fixed lists of files.
 */

const PLAYGROUND_FILES: Record<string, string> = {
  "playground.js": "text/javascript; charset=utf-8",
  "capture-worklet.js": "text/javascript; charset=utf-8",
  "playground.css": "text/css; charset=utf-8",
};
/** The SDK modules the browser imports (the Node-only test client is not among them). */
const SDK_FILES = ["index.js", "realtime.js", "dubbing.js", "errors.js"];

const here = (relative: string) => fileURLToPath(new URL(relative, import.meta.url));
const playgroundDir = here("../playground/");
/** The SDK package's build: the same place from the sources (src/api) and from the build (dist/api). */
const sdkDir = here("../../packages/client/dist/");

export async function playgroundRoutes(app: FastifyInstance): Promise<void> {
  const page = { tags: ["playground"], hide: true };
  app.get("/", { schema: page }, async (_request, reply) =>
    reply.type("text/html; charset=utf-8").send(await readFile(`${playgroundDir}index.html`)),
  );
  app.get(
    "/playground/:file",
    { schema: { ...page, params: z.object({ file: z.string() }) } },
    async (request, reply) => {
      const { file } = request.params as { file: string };
      const type = PLAYGROUND_FILES[file];
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
}
