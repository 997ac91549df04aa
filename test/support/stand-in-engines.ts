import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { standInEntry, startOpenAiServer, type OpenAiTestServer } from "./openai-server.js";
import { startServer, type TestServer } from "./server.js";

/** An ENGINES_FILE entry for the stand-in: a model serving `languages` (`extra`: more of its fields). */
export type StandInEntry = (
  model: string,
  languages: readonly string[],
  extra?: Record<string, unknown>,
) => Record<string, unknown>;

/** The service on engines the OpenAI-compatible stand-in serves, and the stand-in itself. */
export interface StandInService {
  readonly remote: OpenAiTestServer;
  readonly server: TestServer;
  /** A scratch directory of the test's (the engines file is in it), removed by `close`. */
  readonly dir: string;
  close(): Promise<void>;
}

/**
 * Starts the stand-in (test/support/openai-server.ts) and the service with an ENGINES_FILE that
 * `engines` writes from stand-in entries (`entry`) and any other engines; `env`: the service's
 * other settings.
 */
export async function serviceOnStandIn(
  name: string,
  engines: (entry: StandInEntry, remote: OpenAiTestServer) => Record<string, unknown>,
  env: Record<string, string> = {},
): Promise<StandInService> {
  const remote = await startOpenAiServer();
  const dir = await mkdtemp(path.join(tmpdir(), `${name}-`));
  const enginesFile = path.join(dir, "engines.json");
  const entry: StandInEntry = (model, languages, extra = {}) => standInEntry(remote, model, languages, extra);
  await writeFile(enginesFile, JSON.stringify(engines(entry, remote)));
  const server = await startServer({ ENGINES_FILE: enginesFile, ...env });
  return {
    remote,
    server,
    dir,
    close: async () => {
      await server.close();
      await remote.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** The stand-in translator's answer tagged with the language its prompt asks for ("[German] …"). */
export function replyTaggedWithLanguage(text: string, body: Record<string, unknown>): string {
  const [system] = body["messages"] as { content: string }[];
  return `[${/into (.*)\.$/mu.exec(system!.content.split("\n")[0]!)?.[1]}] ${text.trim()}`;
}
