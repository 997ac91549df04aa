import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROJECT_ROOT, runScript } from "../support/run-script.js";
import { startServer, type TestServer } from "../support/server.js";

/**
 * The README's "Try it" commands, run literally (each `npx relay …` line, against a service started
 * as the README says: the embedded engines, `API_KEYS=dev-key`), and the transcript printed under
 * `relay live` is what it prints. Only `out/` is moved, to a temporary directory.
 */
interface Command {
  readonly args: string[];
  /** The `# …` lines printed under it: its expected standard output. */
  readonly output: string[];
}

async function tryItCommands(): Promise<Command[]> {
  const readme = await readFile(path.join(PROJECT_ROOT, "README.md"), "utf8");
  const section = readme.slice(readme.indexOf("## Try it"));
  const block = /```sh\n([\s\S]*?)```/u.exec(section)![1]!;
  const commands: { args: string[]; output: string[] }[] = [];
  for (const line of block.split("\n")) {
    if (line.startsWith("# ")) commands.at(-1)?.output.push(line.slice(2));
    if (!line.startsWith("npx relay ")) continue;
    const command = line.replace(/\s+#.*$/u, "").slice("npx relay ".length);
    // Words, or "quoted words" (the README's commands need no other shell syntax).
    const args = [...command.matchAll(/"([^"]*)"|(\S+)/gu)].map((m) => m[1] ?? m[2]!);
    commands.push({ args, output: [] });
  }
  return commands;
}

let server: TestServer;
let out: string;
let commands: Command[];

beforeAll(async () => {
  server = await startServer({ API_KEYS: "dev-key", DUBBING_WORKERS: "1" });
  out = await mkdtemp(path.join(os.tmpdir(), "relay-readme-"));
  commands = await tryItCommands();
});
afterAll(async () => {
  await server?.close();
  if (out) await rm(out, { recursive: true, force: true });
});

describe("the README's Try it", () => {
  // `relay live` streams in real time. The README's command finalizes per sentence: each final is
  // the recognizer's decode of a whole utterance (PocketSphinx writes no punctuation), cut by the
  // VAD's pauses, so the transcript does not depend on the machine's load (in the default stable
  // mode, where an utterance's pieces are cut depends on how far recognition lags).
  it("runs every command as written, and relay live prints the transcript shown", async () => {
    expect(commands.map((c) => c.args[0])).toEqual(["live", "speak", "dub", "languages"]);
    for (const { args, output } of commands) {
      const moved = args.map((arg) => (arg.startsWith("out/") ? path.join(out, arg.slice(4)) : arg));
      const result = await runScript("src/cli/main.ts", moved, { RELAY_SERVER: server.baseUrl });
      expect(result.code, `relay ${args.join(" ")}: ${result.stderr}`).toBe(0);
      if (output.length > 0) expect(result.stdout.trimEnd().split("\n")).toEqual(output);
    }
    for (const written of ["live.wav", "bonjour.wav", "dubbed.mp4"])
      expect(existsSync(path.join(out, written)), written).toBe(true);
  });
});
