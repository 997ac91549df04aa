/**
 * The SDK as users get it: @relay-translate/client packed as npm would publish it, installed into
 * an empty TypeScript project (nothing of the server comes with it), an example compiled there with
 * tsc (strict, no skipLibCheck: the package's declarations must be clean for Node and for
 * browsers) and run with node against the running service.
 */
import { execFile } from "node:child_process";
import { copyFile, mkdir, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROJECT_ROOT } from "../support/run-script.js";
import { API_KEY, startServer, type TestServer } from "../support/server.js";

const execFileAsync = promisify(execFile);

/** Runs a command; a failure says what it printed (tsc reports on stdout). */
async function run(
  command: string,
  args: string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<{ stdout: string }> {
  try {
    return await execFileAsync(command, args, options);
  } catch (error) {
    const { stdout = "", stderr = "" } = error as { stdout?: string; stderr?: string };
    throw new Error(`${path.basename(command)} ${args.join(" ")} failed:\n${stdout}${stderr}`, {
      cause: error,
    });
  }
}
const PACKAGE_DIR = path.join(PROJECT_ROOT, "packages", "client");
const TSC = path.join(PROJECT_ROOT, "node_modules", "typescript", "bin", "tsc");

/** A text-to-speech session and a refused key, as an application writes them. */
const NODE_EXAMPLE = `import { HttpError, RealtimeSession, type ServerMessage } from "@relay-translate/client";

const baseUrl = process.env.RELAY_SERVER ?? "http://localhost:8080";
const refused = await RealtimeSession.open({ baseUrl, apiKey: "not-a-key" }).catch((error: unknown) => error);
console.log(\`refused: \${refused instanceof HttpError ? refused.code : String(refused)}\`);

const session = await RealtimeSession.open(
  { baseUrl, apiKey: process.env.RELAY_API_KEY },
  { mode: "tts", targetLanguage: "es" },
);
let samples = 0;
session.onAudio = (audio) => (samples += audio.length);
session.speak("Buenos días.", { correlationId: "line-1" });
const seen: ServerMessage["type"][] = [];
for await (const message of session) {
  seen.push(message.type);
  // The union narrows on type: correlation_id is known to be a string here.
  if (message.type === "speak_ack") console.log(\`speak_ack: \${message.correlation_id}\`);
  if (message.type === "speech_end") break;
}
session.close();
console.log(\`closed: \${(await session.closed).code}\`);
console.log(\`messages: \${seen.join(" ")}\`);
console.log(\`speech samples: \${samples}\`);
`;

/** The same package in a browser program: DOM types only, no Node types. */
const BROWSER_EXAMPLE = `import { DubbingClient, RealtimeSession } from "@relay-translate/client";

export async function start(file: File): Promise<void> {
  const client = new DubbingClient(location.origin, "key");
  const { sourceUrl } = await client.upload(file.name, file);
  await client.create({ sourceUrl, targetLang: "es" });
  const session = await RealtimeSession.open({ baseUrl: location.origin }, { targetLanguage: "es" });
  const context = new AudioContext();
  session.onAudio = (samples) => context.createBuffer(1, samples.length, 24_000).copyToChannel(samples, 0);
}
`;

const compilerOptions = {
  target: "ES2022",
  module: "NodeNext",
  moduleResolution: "NodeNext",
  strict: true,
  skipLibCheck: false,
};

let server: TestServer;
let dir: string;

beforeAll(async () => {
  server = await startServer();
  dir = await mkdtemp(path.join(tmpdir(), "relay-sdk-package-"));
}, 60_000);
afterAll(async () => {
  await server?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** Packs the package from its sources: built into a copy, so the checkout's dist is left alone. */
async function pack(): Promise<{ tarball: string; files: string[]; size: number }> {
  const copy = path.join(dir, "package");
  await mkdir(copy);
  await run(process.execPath, [
    TSC,
    "-p",
    path.join(PACKAGE_DIR, "tsconfig.json"),
    "--outDir",
    `${copy}/dist`,
  ]);
  for (const file of ["package.json", "README.md"])
    await copyFile(path.join(PACKAGE_DIR, file), path.join(copy, file));
  const { stdout } = await run("npm", ["pack", "--json", "--ignore-scripts", "--pack-destination", dir], {
    cwd: copy,
  });
  const [packed] = JSON.parse(stdout) as { filename: string; size: number; files: { path: string }[] }[];
  return {
    tarball: path.join(dir, packed!.filename),
    files: packed!.files.map((file) => file.path).sort(),
    size: packed!.size,
  };
}

describe("the SDK package", () => {
  it("installs into an empty TypeScript project with ws as its only dependency, compiles and runs against the service", async () => {
    const { tarball, files, size } = await pack();
    expect(files).toContain("dist/index.js");
    expect(files).toContain("dist/index.d.ts");
    expect(files.filter((file) => !file.startsWith("dist/"))).toEqual(["README.md", "package.json"]);

    const app = path.join(dir, "app");
    await mkdir(path.join(app, "src"), { recursive: true });
    await writeFile(
      path.join(app, "package.json"),
      JSON.stringify({ name: "sdk-app", private: true, type: "module" }),
    );
    const started = performance.now();
    await run(
      "npm",
      ["install", tarball, "typescript@5.9", "@types/node@20", "--prefer-offline", "--no-audit", "--no-fund"],
      { cwd: app },
    );
    const installSeconds = (performance.now() - started) / 1000;
    const lock = JSON.parse(await readFile(path.join(app, "node_modules", ".package-lock.json"), "utf8")) as {
      packages: Record<string, unknown>;
    };
    const installed = Object.keys(lock.packages)
      .map((key) => key.replace(/^.*node_modules\//u, ""))
      .sort();
    // The SDK brings ws and nothing else (typescript and the Node types are the app's own).
    expect(installed).toEqual(["@relay-translate/client", "@types/node", "typescript", "undici-types", "ws"]);
    const { stdout: du } = await run("du", ["-sk", path.join(app, "node_modules")]);
    console.info(
      `SDK package: tarball ${size} bytes; app install ${installSeconds.toFixed(1)} s, ` +
        `${installed.length} packages, ${du.split("\t")[0]} KiB (with typescript and @types/node)`,
    );

    await writeFile(path.join(app, "src", "speak.ts"), NODE_EXAMPLE);
    await writeFile(path.join(app, "src", "browser.ts"), BROWSER_EXAMPLE);
    const appTsc = path.join(app, "node_modules", "typescript", "bin", "tsc");
    await writeFile(
      path.join(app, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: { ...compilerOptions, types: ["node"], outDir: "dist" },
        files: ["src/speak.ts"],
      }),
    );
    await writeFile(
      path.join(app, "tsconfig.browser.json"),
      JSON.stringify({
        compilerOptions: { ...compilerOptions, lib: ["ES2023", "DOM"], types: [], noEmit: true },
        files: ["src/browser.ts"],
      }),
    );
    await run(process.execPath, [appTsc, "-p", "tsconfig.json"], { cwd: app });
    await run(process.execPath, [appTsc, "-p", "tsconfig.browser.json"], { cwd: app });
    await expect(stat(path.join(app, "dist", "speak.js"))).resolves.toBeTruthy();

    const { stdout } = await run(process.execPath, ["dist/speak.js"], {
      cwd: app,
      env: { ...process.env, RELAY_SERVER: server.baseUrl, RELAY_API_KEY: API_KEY },
    });
    const lines = stdout.trim().split("\n");
    expect(lines).toContain("refused: unauthorized");
    expect(lines).toContain("speak_ack: line-1");
    expect(lines).toContain("closed: 1000");
    expect(lines.find((line) => line.startsWith("messages: "))).toMatch(
      /^messages: .*speak_ack.* speech_end$/u,
    );
    expect(Number(/^speech samples: (\d+)$/mu.exec(stdout)?.[1])).toBeGreaterThan(0);
  }, 300_000);
});
