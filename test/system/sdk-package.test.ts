/**
 * The SDK as users get it: @relay-translate/client packed as npm would publish it (and checked as
 * `npm publish --dry-run` sees it), installed from its tarball into an empty project outside the
 * workspace with no registry (ws, its one dependency, from a tarball too), imported from plain
 * Node ESM, and an example compiled there with tsc (strict, no skipLibCheck: the package's
 * declarations must be clean for Node and for browsers) and run with node against the service.
 */
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  installedPackages,
  packFromSources,
  packInstalled,
  publishDryRun,
  run,
  TSC,
  type Packed,
} from "../support/npm-package.js";
import { freePort } from "../support/ports.js";
import { PROJECT_ROOT } from "../support/run-script.js";
import { API_KEY, startServer, type TestServer } from "../support/server.js";

const PACKAGE_DIR = path.join(PROJECT_ROOT, "packages", "client");
// The workspace's Node types: the app installs nothing but the SDK.
const TYPE_ROOTS = [path.join(PROJECT_ROOT, "node_modules", "@types")];

/** Every export, a refused session and an unreachable service, from plain JavaScript. */
const ESM_CHECK = `import * as sdk from "@relay-translate/client";

const { ConnectionError, RealtimeSession, SessionError } = sdk;
console.log(\`exports: \${Object.keys(sdk).sort().join(" ")}\`);
const options = { baseUrl: process.env.RELAY_SERVER, apiKey: process.env.RELAY_API_KEY };
const refused = await RealtimeSession.open(options, { sourceLanguage: "vo" }).catch((error) => error);
console.log(\`refused: \${refused instanceof SessionError} \${refused.message}\`);
const closed = { baseUrl: process.env.RELAY_CLOSED };
const unreachable = await RealtimeSession.open(closed).catch((error) => error);
console.log(\`unreachable: \${unreachable instanceof ConnectionError} \${unreachable.message}\`);
`;

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
  typeRoots: TYPE_ROOTS,
};

let server: TestServer;
let dir: string;
/** The package as `npm pack` made it, built from the sources (the checkout's dist is left alone). */
let packed: Packed;

beforeAll(async () => {
  server = await startServer();
  dir = await mkdtemp(path.join(tmpdir(), "relay-sdk-package-"));
  packed = await packFromSources(PACKAGE_DIR, dir, "package");
});
afterAll(async () => {
  await server?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("the SDK package", () => {
  it("is ready to publish: its README, licence, declarations and code, public, and no warning from npm", async () => {
    expect(packed.files.filter((file) => !file.startsWith("dist/"))).toEqual([
      "LICENSE",
      "README.md",
      "package.json",
    ]);
    expect(packed.files).toEqual(expect.arrayContaining(["dist/index.js", "dist/index.d.ts"]));
    expect(await readFile(path.join(packed.copy, "LICENSE"), "utf8")).toMatch(/^\s*Apache License/u);

    const { output, warnings } = await publishDryRun(packed.copy);
    expect(warnings).toEqual([]);
    // A scoped package is private unless it says otherwise (and a private publish fails).
    expect(output).toMatch(/with tag latest and public access \(dry-run\)/u);
    expect(output).toContain("+ @relay-translate/client@0.1.0");
  });

  it("installs from its tarball with no registry, ws its only dependency, and works from plain Node ESM", async () => {
    const app = path.join(dir, "app");
    await mkdir(path.join(app, "src"), { recursive: true });
    await writeFile(
      path.join(app, "package.json"),
      JSON.stringify({ name: "sdk-app", private: true, type: "module" }),
    );
    // ws from the workspace, as a tarball: with --offline npm may ask no registry for anything.
    const wsTarball = await packInstalled(path.join(PROJECT_ROOT, "node_modules", "ws"), dir);
    const started = performance.now();
    await run("npm", ["install", wsTarball, packed.tarball, "--offline", "--no-audit", "--no-fund"], {
      cwd: app,
    });
    const installSeconds = (performance.now() - started) / 1000;
    const installed = await installedPackages(app);
    expect(installed).toEqual(["@relay-translate/client", "ws"]);
    const { stdout: du } = await run("du", ["-sk", path.join(app, "node_modules")]);
    console.info(
      `SDK package: tarball ${packed.size} bytes; app install ${installSeconds.toFixed(1)} s, ` +
        `${installed.length} packages, ${du.split("\t")[0]} KiB`,
    );

    await writeFile(path.join(app, "check.mjs"), ESM_CHECK);
    const { stdout } = await run(process.execPath, ["check.mjs"], {
      cwd: app,
      env: {
        ...process.env,
        RELAY_SERVER: server.baseUrl,
        RELAY_API_KEY: API_KEY,
        RELAY_CLOSED: `http://127.0.0.1:${await freePort()}`,
      },
    });
    const lines = stdout.trim().split("\n");
    expect(lines[0]).toBe(
      "exports: ConnectionError DubbingClient HttpError INPUT_SAMPLE_RATE MAX_FRAME_BYTES " +
        "MAX_SPEAK_CHARACTERS MAX_WAITING_SPEAKS OUTPUT_FRAME_SAMPLES OUTPUT_SAMPLE_RATE ProtocolError " +
        "RealtimeSession SessionError UPLOAD_CONTENT_TYPES contentTypeFor createSession speakableLines " +
        "storageErrorBody",
    );
    expect(lines).toContainEqual(
      expect.stringMatching(/^refused: true sourceLanguage="vo" cannot be recognized/u),
    );
    expect(lines).toContainEqual(
      expect.stringMatching(
        /^unreachable: true cannot reach http:\/\/127\.0\.0\.1:\d+\/v1\/session: ECONNREFUSED$/u,
      ),
    );
  });

  it("type-checks in TypeScript projects for Node and for browsers and runs against the service", async () => {
    const app = path.join(dir, "app");
    await writeFile(path.join(app, "src", "speak.ts"), NODE_EXAMPLE);
    await writeFile(path.join(app, "src", "browser.ts"), BROWSER_EXAMPLE);
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
    await run(process.execPath, [TSC, "-p", "tsconfig.json"], { cwd: app });
    await run(process.execPath, [TSC, "-p", "tsconfig.browser.json"], { cwd: app });
    await expect(stat(path.join(app, "dist", "speak.js"))).resolves.toBeTruthy();

    const { stdout } = await run(process.execPath, ["dist/speak.js"], {
      cwd: app,
      env: { ...process.env, RELAY_SERVER: server.baseUrl, RELAY_API_KEY: API_KEY },
    });
    const lines = stdout.trim().split("\n");
    expect(lines).toContain("refused: unauthorized");
    expect(lines).toContain("speak_ack: line-1");
    expect(lines).toContain("closed: 1000");
    // The tts session's second ready, then the speak's; the SDK's own acceptance check (an empty
    // update_metadata) leaves no metadata_ack behind.
    expect(lines).toContain("messages: ready speak_ack speech_end");
    expect(Number(/^speech samples: (\d+)$/mu.exec(stdout)?.[1])).toBeGreaterThan(0);
  });
});
