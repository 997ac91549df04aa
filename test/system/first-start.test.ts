import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../support/ports.js";
import { runScript, type Run } from "../support/run-script.js";
import { startServiceProcess, type ServiceProcess } from "../support/service-process.js";
import { sharedMissing, sharedPath } from "../support/shared.js";

/**
 * What a new user meets in the first minutes, as the README has them do it: `npm start` with no
 * model pulled and no key configured, then the CLI. The service says where it listens, which
 * recognition it offers and how to widen it, and how to get a key; the CLI's errors name its own
 * flags, the step that helps, and the address it could not reach.
 */
const SPEECH_MISSING = sharedMissing("data/speech/librivox-pocketsphinx");
const TIER = "English recognition only: PocketSphinx";
const UPGRADE = "`npx relay models pull base`, then restart, for 99 languages";

let service: ServiceProcess;
let dataDir: string;
let apiKey: string;

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(os.tmpdir(), "relay-first-start-"));
  // As `npm start` runs on a fresh clone: no PUBLIC_BASE_URL, no API_KEYS, nothing pulled.
  service = await startServiceProcess("first-start", {
    DATA_DIR: dataDir,
    PUBLIC_BASE_URL: "",
    API_KEYS: "",
    LOG_LEVEL: "info",
  });
  const created = await relay(["keys", "create", "--json"]);
  expect(created.code, created.stderr).toBe(0);
  apiKey = (JSON.parse(created.stdout) as { key: string }).key;
});
afterAll(async () => {
  service?.child.kill("SIGTERM");
  await service?.exited;
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

function relay(args: string[], env: Record<string, string> = {}): Promise<Run> {
  return runScript("src/cli/main.ts", args, {
    RELAY_SERVER: service.baseUrl,
    DATA_DIR: dataDir,
    ...(apiKey ? { RELAY_API_KEY: apiKey } : {}),
    ...env,
  });
}

const errorLines = (result: Run) => result.stderr.split("\n").filter((line) => line.startsWith("relay:"));

describe("npm start on a fresh clone", () => {
  it("prints, after its JSON log, where it listens, the playground, the recognition tier and what clone voices speak with, each with its next step", () => {
    const lines = service.stdout().split("\n");
    const bannerAt = lines.findIndex((line) => line.startsWith("relay "));
    expect(bannerAt).toBeGreaterThan(0);
    expect(lines.slice(0, bannerAt).every((line) => line.startsWith("{"))).toBe(true);
    const port = new URL(service.baseUrl).port;
    const origin = `http://localhost:${port}`;
    expect(lines[bannerAt]).toMatch(
      new RegExp(
        `^relay \\S+ is listening on ${origin} \\(playground: ${origin}/, translated meetings: ${origin}/meeting, API reference: ${origin}/docs\\)$`,
      ),
    );
    expect(lines[bannerAt + 1]).toBe(`${TIER} — ${UPGRADE}`);
    // Rooms' default voice, clone, without the tone colour model: the library's, and the way to more.
    expect(lines[bannerAt + 2]).toBe(
      "Clone voices: the nearest library voice — `npx relay models pull tone-color`, then restart, for each speaker's own voice",
    );
  });

  it("says once, with the fix, that no API key can open a session", () => {
    const warnings = service
      .stdout()
      .split("\n")
      .filter((line) => line.includes("no API key can open a session"));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain("`API_KEYS=dev-key npm start`");
    expect(warnings[0]).toContain("`npx relay keys create`");
  });

  it("GET /v1/languages and `relay languages` give the same tier, languages by name", async () => {
    const report = (await (await fetch(`${service.baseUrl}/v1/languages`)).json()) as {
      recognition_tier: { summary: string; upgrade?: string };
    };
    expect(report.recognition_tier).toEqual({ summary: TIER, upgrade: UPGRADE });
    const listed = await relay(["languages"]);
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout).toContain(`${TIER}\n  for more: ${UPGRADE}\n`);
    expect(listed.stdout).toContain("Speech input (--from; 1 language):\n  en (English)\n");
  });
});

describe.skipIf(SPEECH_MISSING)("the CLI's errors say what to do next", () => {
  const clip = () => sharedPath("data/speech/librivox-pocketsphinx/goforward.wav");

  it("a language the engines cannot recognize: named by its flag, with the pull that adds it", async () => {
    const result = await relay(["live", clip(), "--from", "de", "--to", "es", "--no-audio", "--speed", "0"]);
    expect(result.code).toBe(1);
    expect(errorLines(result)).toEqual([
      "relay: session rejected: --from de cannot be recognized by the configured engines; recognition is " +
        `available for: en (the server's operator can add languages: ${UPGRADE})`,
    ]);
  });

  it("parameters that need each other are named as the flags that set them", async () => {
    const live = await relay(["live", clip(), "--voice", "auto", "--no-audio", "--speed", "0"]);
    expect(errorLines(live)).toEqual(["relay: session rejected: --voice auto needs --model relay-2"]);
    const speak = await relay(["speak", "hello", "--to", "en", "--voice", "auto", "--out", "/dev/null"]);
    expect(errorLines(speak)).toEqual([
      "relay: session rejected: --voice auto matches voices to speakers, and `relay speak` has none; " +
        "pass a numeric --voice",
    ]);
  });

  it("a server that is not there: the address, the cause and what to try", async () => {
    const nowhere = `http://127.0.0.1:${await freePort()}`;
    for (const args of [["languages"], ["live", clip(), "--no-audio"]]) {
      const result = await relay(args, { RELAY_SERVER: nowhere });
      expect(result.code).toBe(1);
      expect(errorLines(result)).toEqual([
        expect.stringContaining(
          `cannot reach ${nowhere}: ECONNREFUSED (is the service running? Start it with \`npm start\`, or name another with --server)`,
        ),
      ]);
    }
  });
});
