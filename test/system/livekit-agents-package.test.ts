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
import { PROJECT_ROOT } from "../support/run-script.js";
import { API_KEY, startServer, type TestServer } from "../support/server.js";
import { sharedMissing, sharedPath } from "../support/shared.js";

const execFileAsync = promisify(execFile);

async function run(
  command: string,
  args: string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<{ stdout: string; stderr: string }> {
  try {
    return await execFileAsync(command, args, { ...options, maxBuffer: 16 * 1024 * 1024 });
  } catch (error) {
    const { stdout = "", stderr = "" } = error as { stdout?: string; stderr?: string };
    throw new Error(`${path.basename(command)} ${args.join(" ")} failed:\n${stdout}${stderr}`, {
      cause: error,
    });
  }
}

const PLUGIN_DIR = path.join(PROJECT_ROOT, "packages", "livekit-agents");
const CLIENT_DIR = path.join(PROJECT_ROOT, "packages", "client");
const TSC = path.join(PROJECT_ROOT, "node_modules", "typescript", "bin", "tsc");
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
const tarballs: Record<string, { path: string; files: string[] }> = {};

/** Builds a package into a copy of it and packs that (the checkout's dist is left alone). */
async function pack(packageDir: string, name: string): Promise<void> {
  const copy = path.join(dir, name);
  await mkdir(copy);
  await run(process.execPath, [
    TSC,
    "-p",
    path.join(packageDir, "tsconfig.json"),
    "--outDir",
    `${copy}/dist`,
  ]);
  for (const file of ["package.json", "README.md", "LICENSE"])
    await copyFile(path.join(packageDir, file), path.join(copy, file));
  const { stdout } = await run("npm", ["pack", "--json", "--ignore-scripts", "--pack-destination", dir], {
    cwd: copy,
  });
  const [made] = JSON.parse(stdout) as { filename: string; files: { path: string }[] }[];
  tarballs[name] = { path: path.join(dir, made!.filename), files: made!.files.map((f) => f.path).sort() };
}

beforeAll(async () => {
  server = await startServer();
  dir = await mkdtemp(path.join(tmpdir(), "relay-agents-package-"));
  // The SDK as the workspace built it (npm run build, before the tests): sdk-package.test.ts tests
  // its own packing; here it is only what the plugin depends on.
  const { stdout } = await run("npm", [
    "pack",
    "--json",
    "--ignore-scripts",
    "--pack-destination",
    dir,
    CLIENT_DIR,
  ]);
  const [client] = JSON.parse(stdout) as { filename: string; files: { path: string }[] }[];
  tarballs["client"] = {
    path: path.join(dir, client!.filename),
    files: client!.files.map((f) => f.path).sort(),
  };
  await pack(PLUGIN_DIR, "plugin");
}, 180_000);
afterAll(async () => {
  await server?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("the LiveKit Agents plugin package", () => {
  it("is ready to publish: README, licence, declarations and code, public, agents as a peer, no warning from npm", async () => {
    const { files } = tarballs["plugin"]!;
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
    const { stdout, stderr } = await run("npm", ["publish", "--dry-run", "--ignore-scripts"], {
      cwd: path.join(dir, "plugin"),
    });
    const output = `${stdout}${stderr}`;
    const warnings = output
      .split("\n")
      .filter((line) => /^npm warn/iu.test(line) && !/requires you to be logged in/u.test(line));
    expect(warnings).toEqual([]);
    expect(output).toMatch(/with tag latest and public access \(dry-run\)/u);
    expect(output).toContain("+ @relay-translate/livekit-agents@0.1.0");
  });

  it.skipIf(sharedMissing(SPEECH))(
    "installs alone in seconds, type-checks its README and the example agent, and runs the README's example against relay",
    async () => {
      const app = path.join(dir, "agent");
      await mkdir(app);
      await writeFile(
        path.join(app, "package.json"),
        JSON.stringify({ name: "agent", private: true, type: "module" }),
      );
      const { stdout: wsPacked } = await run(
        "npm",
        ["pack", "--json", "--pack-destination", dir, path.join(PROJECT_ROOT, "node_modules", "ws")],
        { cwd: dir },
      );
      const wsTarball = path.join(dir, (JSON.parse(wsPacked) as { filename: string }[])[0]!.filename);
      // The package alone: no registry, and its peers not installed (the agent has its own).
      const started = performance.now();
      await run(
        "npm",
        [
          "install",
          wsTarball,
          tarballs["client"]!.path,
          tarballs["plugin"]!.path,
          "--offline",
          "--legacy-peer-deps",
          "--no-audit",
          "--no-fund",
        ],
        { cwd: app },
      );
      const installSeconds = (performance.now() - started) / 1000;
      const lock = JSON.parse(
        await readFile(path.join(app, "node_modules", ".package-lock.json"), "utf8"),
      ) as {
        packages: Record<string, unknown>;
      };
      const installed = Object.keys(lock.packages)
        .map((key) => key.replace(/^.*node_modules\//u, ""))
        .sort();
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
    },
    180_000,
  );
});
