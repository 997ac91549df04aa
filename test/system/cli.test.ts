import { existsSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readWav } from "../../src/audio/wav.js";
import { sharedMissing, sharedPath } from "../support/shared.js";
import { API_KEY, BROKE_KEY, startServer, type TestServer } from "../support/server.js";
import { runScript, type Run } from "../support/run-script.js";

/** The `relay` CLI and the raw-protocol example, run as child processes against the real server. */
const SPEECH_MISSING = sharedMissing("data/speech/librivox-pocketsphinx");
let server: TestServer;
let tmp: string;
let goForward: string;

beforeAll(async () => {
  server = await startServer();
  tmp = await mkdtemp(path.join(os.tmpdir(), "relay-cli-"));
  if (!SPEECH_MISSING) goForward = sharedPath("data/speech/librivox-pocketsphinx/goforward.wav");
});
afterAll(async () => {
  await server?.close();
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

function run(script: string, args: string[], env: Record<string, string> = {}): Promise<Run> {
  return runScript(script, args, { RELAY_SERVER: server.baseUrl, RELAY_API_KEY: API_KEY, ...env });
}

const relay = (...args: string[]) => run("src/cli/main.ts", args);
/** The `relay:`-prefixed lines are the CLI's error messages (other stderr lines are progress). */
const errorLines = (result: Run) => result.stderr.split("\n").filter((line) => line.startsWith("relay:"));

describe.skipIf(SPEECH_MISSING)("relay live", () => {
  it("prints each utterance once, whole, however many growing finals the stable mode sends", async () => {
    const clip = sharedPath("data/speech/misc/librispeech-1995-1837-0001.wav");
    const result = await relay("live", clip, "--from", "en", "--to", "es", "--no-audio", "--speed", "0");
    expect(result.code, result.stderr).toBe(0);
    const lines = result.stdout.split("\n").filter((line) => line.startsWith("[en]"));
    expect(lines.length).toBeGreaterThan(0);
    // No line is an earlier, shorter version of a later one (the growing finals of one utterance).
    for (const [i, line] of lines.entries())
      for (const later of lines.slice(i + 1)) expect(later.startsWith(line)).toBe(false);
  });

  it("--context-file gives the session its glossary; --context with it is a usage error", async () => {
    const glossary = path.join(tmp, "glossary.txt");
    await writeFile(glossary, "forward => adelante (glosario)\n");
    const result = await relay("live", goForward, "--no-audio", "--speed", "0", "--context-file", glossary);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/^\[es\] .*adelante \(glosario\)/mu);
    const both = await relay("live", goForward, "--no-audio", "--context", "x", "--context-file", glossary);
    expect(both.code).not.toBe(0);
    expect(errorLines(both)).toEqual(["relay: pass --context or --context-file, not both"]);
  });

  it("streams a WAV file, prints the final transcripts and writes the translated speech", async () => {
    const out = path.join(tmp, "live.wav");
    const result = await relay("live", goForward, "--from", "en", "--to", "es", "--out", out, "--speed", "0");
    expect(result.stderr).not.toMatch(/^relay:/mu);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("[en] go forward ten meters");
    expect(result.stdout).toMatch(/^\[es\] \S+/mu);
    const speech = await readWav(out);
    expect(speech.sampleRate).toBe(24_000);
    expect(speech.samples.length / speech.sampleRate).toBeGreaterThan(0.5);
  });

  it("--model relay-2 --voice auto names the speaker of each line", async () => {
    const result = await relay(
      "live",
      goForward,
      "--model",
      "relay-2",
      "--voice",
      "auto",
      "--speed",
      "0",
      "--out",
      path.join(tmp, "auto.wav"),
    );
    expect(result.stderr).not.toMatch(/^relay:/mu);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("[en] 1: go forward ten meters");
    expect(result.stdout).toMatch(/^\[es\] 1: \S+/mu);
  });

  it("--json prints every server message as one JSON line; --no-audio writes no file", async () => {
    const result = await relay("live", goForward, "--to", "fr", "--speed", "max", "--no-audio", "--json");
    expect(result.code).toBe(0);
    const messages = result.stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { type: string; is_final?: boolean; text?: string });
    expect(messages[0]?.type).toBe("ready");
    const finals = messages.filter((m) => m.type === "original_transcript" && m.is_final === true);
    expect(finals.at(-1)?.text).toBe("go forward ten meters");
    expect(messages.some((m) => m.type === "translated_transcript" && m.is_final === true)).toBe(true);
  });

  it("reports a refused session request (401, 402) on stderr and exits non-zero", async () => {
    const wrongKey = await run("src/cli/main.ts", ["live", goForward, "--no-audio"], {
      RELAY_API_KEY: "not-a-key",
    });
    expect(wrongKey.code).not.toBe(0);
    expect(errorLines(wrongKey)).toEqual([expect.stringMatching(/HTTP 401 unauthorized: invalid API key/u)]);
    expect(wrongKey.stdout).toBe("");

    const broke = await relay("live", goForward, "--no-audio", "--api-key", BROKE_KEY);
    expect(broke.code).not.toBe(0);
    expect(errorLines(broke)).toEqual([expect.stringMatching(/HTTP 402 insufficient_balance/u)]);
  });

  it("exits non-zero with the session-start error when the server rejects the parameters", async () => {
    const result = await relay("live", goForward, "--to", "ja", "--out", path.join(tmp, "ja.wav"));
    expect(result.code).not.toBe(0);
    expect(errorLines(result)).toEqual([
      expect.stringMatching(/^relay: session rejected: no translation from "en" to "ja"/u),
    ]);
    expect(existsSync(path.join(tmp, "ja.wav"))).toBe(false);
  });

  it("answers an unknown --to with the languages it can translate into and speak, not every voice", async () => {
    const report = (await (await fetch(new URL("/v1/languages", server.baseUrl))).json()) as {
      translation: { from: string; to: string }[];
      voice_output: { language: string }[];
    };
    const voiced = new Set(report.voice_output.map((voice) => voice.language));
    const reached = ["en", ...report.translation.filter((pair) => pair.from === "en").map((pair) => pair.to)];
    const result = await relay("live", goForward, "--to", "xx", "--out", path.join(tmp, "xx.wav"));
    expect(result.code).not.toBe(0);
    const [line] = errorLines(result);
    expect(line).toMatch(
      /^relay: session rejected: --to xx has no voice output with the configured engines; /u,
    );
    const offered = /available for: (.*)$/u.exec(line!)![1]!.split(", ");
    expect(offered.sort()).toEqual(reached.filter((language) => voiced.has(language)).sort());
    // Voices the service has, but no translation from English reaches (it has far more voices).
    expect(voiced.size).toBeGreaterThan(offered.length);
  });

  it("refuses an --out it could not write and an input directory before any session, and names a refused session only once", async () => {
    const noDirectory = await relay("live", goForward, "--out", "/nonexistent-dir/x.wav");
    expect(noDirectory.code).not.toBe(0);
    // Nothing but the reason: no session line, no transcript (the session was never opened).
    expect(noDirectory.stderr.trim()).toBe("relay: --out: the directory /nonexistent-dir does not exist");
    expect(noDirectory.stdout).toBe("");
    const outIsDirectory = await relay("live", goForward, "--out", tmp);
    expect(outIsDirectory.stderr.trim()).toBe(`relay: --out ${tmp} is a directory; name a file to write`);

    const directoryIn = await relay("live", tmp, "--no-audio");
    expect(directoryIn.code).not.toBe(0);
    expect(directoryIn.stderr.trim()).toBe(`relay: ${tmp} is a directory; pass an audio file`);

    const refused = await relay("live", goForward, "--from", "xx", "--no-audio");
    expect(refused.code).not.toBe(0);
    expect(refused.stderr.trim().split("\n")).toEqual([
      expect.stringMatching(
        /^relay: session rejected: --from xx cannot be recognized by the configured engines; /u,
      ),
    ]);
    // An accepted session is named, briefly: its id and model.
    const accepted = await relay("live", goForward, "--no-audio", "--speed", "0");
    expect(accepted.code, accepted.stderr).toBe(0);
    expect(accepted.stderr).toMatch(/^session [0-9a-f-]{36} \(relay-1\/[^/\s]+\)$/mu);
  });
});

describe("relay speak, voices, languages", () => {
  it("speak writes a WAV of speech", async () => {
    const out = path.join(tmp, "hola.wav");
    const result = await relay("speak", "Hola, buenos días", "--to", "es", "--out", out, "--voice", "12");
    expect(result.code).toBe(0);
    const speech = await readWav(out);
    expect(speech.sampleRate).toBe(24_000);
    expect(speech.samples.length).toBeGreaterThan(0);
    expect(speech.samples.some((sample) => sample !== 0)).toBe(true);
  });

  it("speak says a text past the service's 5,000 characters a line, cut into lines after its sentences", async () => {
    const out = path.join(tmp, "long.wav");
    const text = "The meeting starts at nine. ".repeat(190); // 5,320 characters
    const result = await relay("speak", text, "--to", "en", "--out", out);
    expect(errorLines(result)).toEqual([]);
    expect(result.code).toBe(0);
    expect(result.stderr).toMatch(/^wrote .*long\.wav: [\d.]+ s of speech \(the text in 2 lines\)$/mu);
    const speech = await readWav(out);
    expect(speech.samples.length).toBeGreaterThan(0);

    const empty = await relay("speak", "  ", "--to", "en", "--out", out);
    expect(errorLines(empty)).toEqual(["relay: nothing to speak: the text is empty"]);
    const nowhere = await relay("speak", "Hola", "--to", "es", "--out", "/nonexistent-dir/x.wav");
    expect(errorLines(nowhere)).toEqual(["relay: --out: the directory /nonexistent-dir does not exist"]);
  });

  it("voices --gender female prints a table of exactly the female voices", async () => {
    const result = await relay("voices", "--gender", "female");
    expect(result.code).toBe(0);
    const listed = (await (await fetch(new URL("/v1/voices?gender=female", server.baseUrl))).json()) as {
      voices: { id: number; name: string }[];
    };
    const rows = result.stdout.split("\n").filter((line) => /^\d+\s{2,}/u.test(line));
    expect(rows).toHaveLength(listed.voices.length);
    expect(rows.every((row) => /^\d+\s+\S+\s+female\b/u.test(row))).toBe(true);
    expect(result.stdout).not.toMatch(/\bmale\b/u);
    for (const voice of listed.voices)
      expect(result.stdout).toMatch(new RegExp(`^${voice.id}\\s+${voice.name}\\b`, "mu"));
  });

  it("languages summarizes recognition, translation pairs and voice output", async () => {
    const result = await relay("languages");
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^Speech input \(--from; 1 language\):\n {2}en \(English\)$/mu);
    expect(result.stdout).toMatch(/^ {2}en → es\b/mu);
    expect(result.stdout).toMatch(/^Voice output .*\d+ languages/mu);
  });
});

describe("the common options", () => {
  it("every command that talks to the service takes --server and --api-key, even where no key is needed", async () => {
    // Options on the command line, nothing in the environment.
    const listed = await runScript(
      "src/cli/main.ts",
      ["languages", "--server", server.baseUrl, "--api-key", API_KEY],
      {},
    );
    expect(errorLines(listed)).toEqual([]);
    expect(listed.code).toBe(0);
    expect(listed.stdout).toMatch(/^Engines:/mu);
    const voices = await runScript(
      "src/cli/main.ts",
      ["voices", "--api-key", API_KEY, "--server", server.baseUrl],
      {},
    );
    expect(errorLines(voices)).toEqual([]);
    expect(voices.code).toBe(0);
    // Both from the environment too, as the session commands always did.
    for (const command of ["voices", "languages"]) {
      const help = await runScript("src/cli/main.ts", [command, "--help"], {});
      // (commander wraps the help text at 80 columns)
      expect(help.stdout, command).toMatch(/--server <url>[^-]*env:\s+RELAY_SERVER\)/u);
      expect(help.stdout, command).toMatch(/--api-key <key>[^-]*env:\s+RELAY_API_KEY\)/u);
    }
  });
});

describe.skipIf(SPEECH_MISSING)("examples/sdk-translate.ts", () => {
  it("translates a WAV file with the SDK and prints the final transcripts", async () => {
    const result = await run("examples/sdk-translate.ts", [goForward]);
    expect(result.stderr).not.toMatch(/error/iu);
    expect(result.code).toBe(0);
    // The utterance once, whole, however many growing finals it came as.
    expect(result.stdout.split("\n").filter((line) => line.startsWith("[en]"))).toEqual([
      "[en] go forward ten meters",
    ]);
    expect(result.stdout).toMatch(/^\[es\] .*diez metros/imu);
    expect(Number(/^received (\d+\.\d+) s of translated speech/mu.exec(result.stdout)?.[1])).toBeGreaterThan(
      0,
    );
  });
});

describe.skipIf(SPEECH_MISSING)("examples/realtime-translate.ts", () => {
  it("translates a WAV file over the raw protocol and prints the final transcript", async () => {
    const result = await run("examples/realtime-translate.ts", [goForward]);
    expect(result.stderr).not.toMatch(/error/iu);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("[en] go forward ten meters");
    expect(result.stdout).toMatch(/^\[es\] \S+/mu);
    const seconds = /^received (\d+\.\d+) s of translated speech/mu.exec(result.stdout)?.[1];
    expect(Number(seconds)).toBeGreaterThan(0);
  });
});
