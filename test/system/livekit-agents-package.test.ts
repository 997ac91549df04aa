/**
 * The LiveKit Agents plugin as users get it: @relay-translate/livekit-agents packed as npm would
 * publish it (with the SDK it depends on), installed alone from its tarballs into an empty project
 * with no registry, its peers (@livekit/agents, @livekit/rtc-node) then taken from the workspace as
 * an agent's own, and the README's examples and examples/livekit-agent type-checked there with tsc
 * (strict) and the runnable one run with node against the service on real speech.
 */
import { execFile } from "node:child_process";
import { copyFile, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
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
import { sharedMissing, sharedPath } from "../support/shared.js";

const PLUGIN_DIR = path.join(PROJECT_ROOT, "packages", "livekit-agents");
const CLIENT_DIR = path.join(PROJECT_ROOT, "packages", "client");
const SPEECH = "data/speech/librivox-pocketsphinx/goforward.wav";

/** Where a package the plugin's workspace resolves lives (its folder, whatever its exports allow). */
function packageFolder(name: string): string {
  const entry = createRequire(path.join(PLUGIN_DIR, "package.json")).resolve(name);
  return entry.slice(0, entry.lastIndexOf(`node_modules/${name}/`) + `node_modules/${name}`.length);
}

/** The fenced ```ts block under a README heading. */
function codeUnder(readme: string, heading: string): string {
  const section = readme.slice(readme.indexOf(`## ${heading}`));
  const match = /```ts\n([\s\S]*?)```/u.exec(section);
  if (!match) throw new Error(`no ts block under "${heading}"`);
  return match[1]!;
}

let server: TestServer;
let dir: string;
/** The plugin built from its sources and packed; the SDK as the workspace built it. */
let plugin: Packed;
let clientTarball: string;

beforeAll(async () => {
  server = await startServer();
  dir = await mkdtemp(path.join(tmpdir(), "relay-agents-package-"));
  // The SDK as the workspace built it (npm run build, before the tests): sdk-package.test.ts tests
  // its own packing; here it is only what the plugin depends on.
  clientTarball = await packInstalled(CLIENT_DIR, dir);
  plugin = await packFromSources(PLUGIN_DIR, dir, "plugin");
});
afterAll(async () => {
  await server?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("the LiveKit Agents plugin package", () => {
  it("is ready to publish: README, licence, declarations and code, public, agents as a peer, no warning from npm", async () => {
    const { files } = plugin;
    expect(files.filter((file) => !file.startsWith("dist/"))).toEqual([
      "LICENSE",
      "README.md",
      "package.json",
    ]);
    expect(files).toEqual(
      expect.arrayContaining(["dist/index.js", "dist/index.d.ts", "dist/stt.js", "dist/tts.js"]),
    );
    const manifest = JSON.parse(await readFile(path.join(PLUGIN_DIR, "package.json"), "utf8")) as {
      dependencies: Record<string, string>;
      peerDependencies: Record<string, string>;
    };
    expect(Object.keys(manifest.dependencies)).toEqual(["@relay-translate/client"]);
    expect(Object.keys(manifest.peerDependencies).sort()).toEqual(["@livekit/agents", "@livekit/rtc-node"]);
    const { output, warnings } = await publishDryRun(plugin.copy);
    expect(warnings).toEqual([]);
    expect(output).toMatch(/with tag latest and public access \(dry-run\)/u);
    expect(output).toContain("+ @relay-translate/livekit-agents@0.1.0");
  });

  it.skipIf(sharedMissing(SPEECH))(
    "installs alone in seconds, type-checks its README and the example agent, and runs the README's example against relay and with none",
    async () => {
      const app = path.join(dir, "agent");
      await mkdir(app);
      await writeFile(
        path.join(app, "package.json"),
        JSON.stringify({ name: "agent", private: true, type: "module" }),
      );
      const wsTarball = await packInstalled(path.join(PROJECT_ROOT, "node_modules", "ws"), dir);
      // The package alone: no registry, and its peers not installed (the agent has its own).
      const started = performance.now();
      await run(
        "npm",
        [
          "install",
          wsTarball,
          clientTarball,
          plugin.tarball,
          "--offline",
          "--legacy-peer-deps",
          "--no-audit",
          "--no-fund",
        ],
        { cwd: app },
      );
      const installSeconds = (performance.now() - started) / 1000;
      const installed = await installedPackages(app);
      expect(installed).toEqual(["@relay-translate/client", "@relay-translate/livekit-agents", "ws"]);
      console.info(`LiveKit Agents plugin: installed alone in ${installSeconds.toFixed(1)} s`);

      // The agent's own @livekit/agents and @livekit/rtc-node: the workspace's.
      await mkdir(path.join(app, "node_modules", "@livekit"), { recursive: true });
      for (const name of ["@livekit/agents", "@livekit/rtc-node"])
        await symlink(packageFolder(name), path.join(app, "node_modules", name), "dir");

      const readme = await readFile(path.join(PLUGIN_DIR, "README.md"), "utf8");
      await mkdir(path.join(app, "src"));
      await writeFile(path.join(app, "src", "in-an-agent.ts"), codeUnder(readme, "In an agent"));
      await writeFile(
        path.join(app, "src", "speak-and-hear.ts"),
        codeUnder(readme, "Try it without LiveKit"),
      );
      await copyFile(
        path.join(PROJECT_ROOT, "examples", "livekit-agent", "agent.ts"),
        path.join(app, "src", "example-agent.ts"),
      );
      await writeFile(
        path.join(app, "tsconfig.json"),
        JSON.stringify({
          compilerOptions: {
            target: "ES2022",
            module: "NodeNext",
            moduleResolution: "NodeNext",
            strict: true,
            // The agents' own declarations need types this project does not install.
            skipLibCheck: true,
            types: ["node"],
            typeRoots: [path.join(PROJECT_ROOT, "node_modules", "@types")],
            outDir: "dist",
          },
          include: ["src"],
        }),
      );
      await run(process.execPath, [TSC, "-p", "tsconfig.json"], { cwd: app });

      const { stdout } = await run(process.execPath, ["dist/speak-and-hear.js", sharedPath(SPEECH)], {
        cwd: app,
        env: { ...process.env, RELAY_SERVER: server.baseUrl, RELAY_API_KEY: API_KEY },
      });
      const lines = stdout.trim().split("\n");
      expect(Number(/^spoke (\d+\.\d) s of speech$/mu.exec(stdout)?.[1])).toBeGreaterThan(1);
      expect(
        lines
          .filter((line) => line.startsWith("heard: "))
          .map((line) => line.slice(7))
          .join(" "),
      ).toBe("go forward ten meters");

      // With no relay there, what a person sees is the line that says so: the URL and the cause.
      const nowhere = `http://127.0.0.1:${await freePort()}`;
      const failed = (await promisify(execFile)(
        process.execPath,
        ["dist/speak-and-hear.js", sharedPath(SPEECH)],
        {
          cwd: app,
          env: { ...process.env, RELAY_SERVER: nowhere, RELAY_API_KEY: API_KEY },
        },
      ).catch((error: unknown) => error)) as { code?: number; stdout: string; stderr: string };
      expect(failed.code).toBe(1);
      expect(`${failed.stdout}${failed.stderr}`.trim()).toBe(
        `relay.ChunkedStream: cannot reach ${nowhere}/v1/session: ECONNREFUSED`,
      );
    },
    180_000,
  );
});
