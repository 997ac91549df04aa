import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { copyFile, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import {
  createApertiumEngine,
  discoverModes,
  type ApertiumEngine,
  type ApertiumPairStatus,
} from "../../src/engines/apertium/index.js";
import { ApertiumPipeline } from "../../src/engines/apertium/pipeline.js";
import { FULL_RECORDINGS } from "../support/recordings.js";
import { sharedMissing, sharedPath } from "../support/shared.js";
import { WAIT } from "../support/wait.js";

const MODES_DIR = "/usr/share/apertium/modes";
const HAVE_APERTIUM = existsSync(path.join(MODES_DIR, "eng-spa.mode"));
const FLORES_MISSING = sharedMissing("data", "text", "flores-dev");
if (!HAVE_APERTIUM) console.warn(`[apertium] skipping engine tests: no eng-spa mode in ${MODES_DIR}`);

/** The pairs compared with the command line by default (all with RELAY_TEST_FULL=1). */
const COMPARED_PAIRS = ["en-es", "es-en", "fr-es"];

function flores(language: string, count: number): string[] {
  const lines = readFileSync(sharedPath("data", "text", "flores-dev", `${language}.txt`), "utf8").split("\n");
  return lines.filter((line) => line.trim() !== "").slice(0, count);
}

/** Corpus chrF (character 1–6-grams, β = 2, spaces removed), on a 0–100 scale. */
function chrF(hypotheses: readonly string[], references: readonly string[]): number {
  const order = 6;
  const matched = new Array<number>(order).fill(0);
  const hypTotal = new Array<number>(order).fill(0);
  const refTotal = new Array<number>(order).fill(0);
  const grams = (text: string, n: number): Map<string, number> => {
    const chars = [...text.replace(/\s+/g, "")];
    const counts = new Map<string, number>();
    for (let i = 0; i + n <= chars.length; i++) {
      const gram = chars.slice(i, i + n).join("");
      counts.set(gram, (counts.get(gram) ?? 0) + 1);
    }
    return counts;
  };
  hypotheses.forEach((hyp, s) => {
    for (let n = 1; n <= order; n++) {
      const h = grams(hyp, n);
      const r = grams(references[s]!, n);
      for (const [gram, count] of h) matched[n - 1]! += Math.min(count, r.get(gram) ?? 0);
      for (const count of h.values()) hypTotal[n - 1]! += count;
      for (const count of r.values()) refTotal[n - 1]! += count;
    }
  });
  let precision = 0;
  let recall = 0;
  for (let n = 0; n < order; n++) {
    precision += hypTotal[n]! ? matched[n]! / hypTotal[n]! : 0;
    recall += refTotal[n]! ? matched[n]! / refTotal[n]! : 0;
  }
  precision /= order;
  recall /= order;
  const beta2 = 4;
  return precision + recall === 0
    ? 0
    : (100 * (1 + beta2) * precision * recall) / (beta2 * precision + recall);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function statusOf(engine: ApertiumEngine, from: string, to: string): ApertiumPairStatus {
  const status = engine.pipelines().find((p) => p.from === from && p.to === to);
  if (!status) throw new Error(`no pipeline for ${from}→${to}`);
  return status;
}

/** A pipeline member every Apertium mode has; stopping it stalls requests in the middle of the pipe. */
function pretransferOf(engine: ApertiumEngine, from: string, to: string): number {
  const member = statusOf(engine, from, to).processes.find((m) => m.program === "apertium-pretransfer");
  if (!member) throw new Error("apertium-pretransfer not found in the pipeline");
  return member.pid;
}

/** A modes directory holding only the given installed modes (quick, single-pair engines). */
async function modesDirWith(names: readonly string[], parent = tmpdir()): Promise<string> {
  const dir = await mkdtemp(path.join(parent, "apertium-modes-"));
  for (const name of names)
    await copyFile(path.join(MODES_DIR, `${name}.mode`), path.join(dir, `${name}.mode`));
  return dir;
}

describe.skipIf(!HAVE_APERTIUM)("Apertium engine (real pipelines)", () => {
  let engine: ApertiumEngine;
  let createMs = 0;

  beforeAll(async () => {
    const started = performance.now();
    engine = await createApertiumEngine({ onWarning: (message) => console.warn(message) });
    createMs = performance.now() - started;
    // Directions start on first use; the service warms them all once it listens, as here.
    await engine.warmUp();
  });
  afterAll(async () => {
    await engine?.close();
  });

  it("declares the installed direct pairs and describes its version", () => {
    const pairs = engine.capabilities.pairs.map((p) => `${p.from}-${p.to}`);
    expect(pairs).toContain("en-es");
    expect(pairs).toContain("es-en");
    expect(pairs.every((p) => /^[a-z]{2}-[a-z]{2}$/.test(p))).toBe(true);
    expect(new Set(pairs).size).toBe(pairs.length);
    expect(engine.capabilities.usesContext).toBe(false);
    expect(engine.info.id).toBe("apertium");
    expect(engine.info.version).toMatch(/apertium-eng-spa/);
    const startups = engine
      .pipelines()
      .map((p) => `${p.mode} ${Math.round(p.startupMs ?? NaN)} ms`)
      .join(", ");
    console.log(
      `[apertium] engine created in ${Math.round(createMs)} ms; pipeline start-up (parallel): ${startups}`,
    );
    console.log(`[apertium] pairs: ${pairs.join(" ")}; version: ${engine.info.version}`);
  });

  it("translates English to Spanish", async () => {
    const spanish = await engine.translate({ from: "en", to: "es", text: "Hello, how are you?" });
    expect(spanish).toMatch(/Hola/);
    expect(spanish).not.toMatch(/[*#@]/);
  });

  it.skipIf(FLORES_MISSING)("translates a sentence in every declared pair", async () => {
    for (const { from, to } of engine.capabilities.pairs) {
      const [source] = flores(from, 1);
      const translation = await engine.translate({ from, to, text: source! });
      expect(translation.length, `${from}→${to}`).toBeGreaterThan(source!.length / 3);
      expect(translation, `${from}→${to}`).not.toBe(source);
      expect(translation, `${from}→${to}`).not.toMatch(/[*#@~]/);
    }
  });

  it("returns empty text without using the pipeline and rejects unknown pairs", async () => {
    const pid = pretransferOf(engine, "en", "es");
    process.kill(pid, "SIGSTOP"); // a request that reached the pipeline would now hang
    try {
      expect(await engine.translate({ from: "en", to: "es", text: "" })).toBe("");
      expect(await engine.translate({ from: "en", to: "es", text: " \n\t " })).toBe("");
    } finally {
      process.kill(pid, "SIGCONT");
    }
    await expect(engine.translate({ from: "en", to: "xx", text: "Hello" })).rejects.toThrow(/en→xx/);
  });

  it("keeps reserved characters and line breaks intact and shows no unknown-word marks", async () => {
    const text = "a ^b$ c/d <e> @f *g {h} [i] \\j\nThe zorblaxian flimflammed here.";
    const translation = await engine.translate({ from: "en", to: "es", text });
    for (const token of ["^b$", "c/d", "<e>", "@f", "*g", "{h}", "[i]", "\\j"])
      expect(translation).toContain(token);
    expect(translation.split("\n")).toHaveLength(2);
    expect(translation.split("\n")[1]).toMatch(/zorblaxian/);
    expect(translation).not.toMatch(/[*@#]zorblaxian|[*@#]flimflam/);
    expect(translation.match(/\*/g)).toHaveLength(1); // only the user's own asterisk
    expect(translation).not.toContain("#");
    for (const last of ["\\", "^", "$", "[", "]", "*", "#", "~", "@", "."]) {
      const ending = await engine.translate({ from: "en", to: "es", text: `Yes ${last}` });
      expect(ending.endsWith(last), `${JSON.stringify(last)} → ${JSON.stringify(ending)}`).toBe(true);
    }
    // The pipeline is still in step afterwards.
    expect(await engine.translate({ from: "en", to: "es", text: "Hello, how are you?" })).toMatch(/Hola/);
  });

  it.skipIf(FLORES_MISSING)(
    "answers 200 concurrent requests in order, identical to sequential translation",
    async () => {
      const sources = flores("en", 200);
      // Apertium's tagger keeps state across requests the first time it meets certain words (see the
      // report), so the pipeline sees every sentence once before results are compared.
      for (const text of sources) await engine.translate({ from: "en", to: "es", text });
      const sequential: string[] = [];
      for (const text of sources) sequential.push(await engine.translate({ from: "en", to: "es", text }));
      const order: number[] = [];
      const concurrent = await Promise.all(
        sources.map((text, i) =>
          engine.translate({ from: "en", to: "es", text }).then((translation) => {
            order.push(i);
            return translation;
          }),
        ),
      );
      expect(concurrent).toEqual(sequential);
      expect(order).toEqual(sources.map((_, i) => i));
    },
  );

  it.skipIf(FLORES_MISSING)(
    "matches the apertium command line on FLORES sentences (whitespace aside)",
    async () => {
      const dir = await mkdtemp(path.join(tmpdir(), "apertium-cli-"));
      try {
        const normalize = (s: string): string => s.replace(/[*#@]/g, "").replace(/\s+/g, " ").trim();
        // By default the default stack's pair both ways and one of another package (docs/testing.md,
        // "Trimmed files"); RELAY_TEST_FULL=1 compares every installed pair.
        const compared = engine.capabilities.pairs.filter(
          ({ from, to }) => FULL_RECORDINGS || COMPARED_PAIRS.includes(`${from}-${to}`),
        );
        expect(compared.length).toBe(
          FULL_RECORDINGS ? engine.capabilities.pairs.length : COMPARED_PAIRS.length,
        );
        for (const { from, to } of compared) {
          const mode = engine.pipelines().find((p) => p.from === from && p.to === to)!.mode;
          const sources = flores(from, 50);
          const file = path.join(dir, `${mode}.txt`);
          await writeFile(file, sources.join("\n") + "\n");
          const cli = execFileSync("apertium", ["-u", mode, file], { encoding: "utf8" }).split("\n");
          // A fresh pipeline sees the sentences in the same order as the command line does.
          const fresh = await createApertiumEngine({ modesDir: await modesDirWith([mode], dir) });
          try {
            let same = 0;
            for (const [i, text] of sources.entries()) {
              if (normalize(await fresh.translate({ from, to, text })) === normalize(cli[i] ?? "")) same++;
            }
            // Differences left are context effects: the command line translates the file as one text.
            expect(same, `${mode}: ${same}/${sources.length} identical`).toBeGreaterThanOrEqual(
              sources.length * 0.9,
            );
          } finally {
            await fresh.close();
          }
        }
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    },
  );

  it.skipIf(FLORES_MISSING)(
    "translates 100 FLORES sentences en→es with a plausible chrF and reports warm latency",
    async () => {
      const sources = flores("en", 200);
      const references = flores("es", 200);
      const hypotheses: string[] = [];
      const started = performance.now();
      for (const text of sources) hypotheses.push(await engine.translate({ from: "en", to: "es", text }));
      const meanMs = (performance.now() - started) / sources.length;
      expect(hypotheses.every((h) => h.trim().length > 0)).toBe(true);
      const score = chrF(hypotheses.slice(0, 100), references.slice(0, 100));
      expect(score).toBeGreaterThan(25);
      const words = sources.reduce((sum, s) => sum + s.split(/\s+/).length, 0) / sources.length;
      console.log(
        `[apertium] en→es FLORES: chrF ${score.toFixed(1)} (100 sentences); warm latency ` +
          `${meanMs.toFixed(2)} ms/sentence (mean of ${sources.length}, ${words.toFixed(0)} words each)`,
      );
    },
  );
});

describe.skipIf(!HAVE_APERTIUM)("Apertium pipeline failures", () => {
  let engine: ApertiumEngine;
  let modesDir = "";

  beforeAll(async () => {
    modesDir = await modesDirWith(["eng-spa"]);
    engine = await createApertiumEngine({ modesDir, requestTimeoutMs: 2500, maxInFlight: 4 });
    await engine.warmUp();
  });
  afterAll(async () => {
    await engine?.close();
    await rm(modesDir, { recursive: true, force: true });
  });

  it("fails in-flight requests when a pipeline process dies, then restarts on the next request", async () => {
    const before = statusOf(engine, "en", "es").processes.map((p) => p.pid);
    const pid = pretransferOf(engine, "en", "es");
    process.kill(pid, "SIGSTOP"); // hold the requests inside the pipe
    const requests = ["One.", "Two.", "Three.", "Four.", "Five."].map((text) =>
      engine.translate({ from: "en", to: "es", text }).then(
        (translation) => ({ translation }),
        (error: unknown) => ({ error: error as Error }),
      ),
    );
    // All five are written at once (four into the pipe, the fifth queued behind them).
    process.kill(pid, "SIGKILL");
    const outcomes = await Promise.all(requests);
    // maxInFlight = 4: those four were in the dead pipe; the fifth was still queued and is re-sent.
    for (const outcome of outcomes.slice(0, 4)) {
      expect("error" in outcome && outcome.error.message).toMatch(
        // The killed program, or the one writing into it (SIGPIPE: lt-proc, before pretransfer) when
        // its death is seen first.
        /^apertium eng-spa pipeline ended unexpectedly: (apertium-[a-z-]+|lt-proc) was killed by SIG(KILL|PIPE)/,
      );
    }
    expect(outcomes[4]).toEqual({ translation: "Cinco." });
    expect(await engine.translate({ from: "en", to: "es", text: "Hello, how are you?" })).toMatch(/Hola/);
    const after = statusOf(engine, "en", "es");
    expect(after.starts).toBe(2);
    expect(after.processes.map((p) => p.pid)).not.toContain(pid);
    expect(before.filter(alive)).toEqual([]); // every old program ended and was reaped
  });

  it("times out a stuck request, restarts the pipeline and re-sends the requests behind it", async () => {
    const stuck = statusOf(engine, "en", "es").processes.map((p) => p.pid);
    process.kill(pretransferOf(engine, "en", "es"), "SIGSTOP");
    const head = engine.translate({ from: "en", to: "es", text: "Hello." });
    const behind = engine.translate({ from: "en", to: "es", text: "Good morning." });
    await expect(head).rejects.toThrow(/no answer within 2500 ms/);
    expect(await behind).toMatch(/Buenos días/);
    expect(statusOf(engine, "en", "es").starts).toBe(3);
    await vi.waitFor(() => expect(stuck.filter(alive)).toEqual([]), { ...WAIT, interval: 20 });
  });

  it("gives freshly started programs the start-up bound, not the request timeout, for their first answer", async () => {
    const [mode] = (await discoverModes(modesDir)).modes;
    // Two fresh pipelines with a 300 ms request timeout whose first answers are held up (as
    // dictionary loading on a busy machine can be): one with a 20 s start-up bound, one with 300 ms.
    const pipelines = [20_000, 300].map(
      (startupTimeoutMs) =>
        new ApertiumPipeline({
          name: mode!.name,
          commands: mode!.commands,
          requestTimeoutMs: 300,
          startupTimeoutMs,
          maxInFlight: 1,
        }),
    );
    try {
      const [patient, hasty] = pipelines.map((pipeline) => {
        const translation = pipeline.translate("Good morning.").catch((error: Error) => error);
        const held = pipeline.status().processes.find((m) => m.program === "apertium-pretransfer")!.pid;
        process.kill(held, "SIGSTOP");
        return { translation, held };
      });
      // The 300 ms bound gives up: by then the request timeout has passed for the other one too.
      expect(String(await hasty!.translation)).toMatch(/no answer within 300 ms/);
      process.kill(patient!.held, "SIGCONT");
      expect(await patient!.translation).toMatch(/Buenos días/);
    } finally {
      await Promise.all(pipelines.map((pipeline) => pipeline.close()));
    }
  });

  it("drops a cancelled request still queued and keeps the pipe in sync after one already written", async () => {
    const pipeline = new ApertiumPipeline({
      name: "eng-spa",
      commands: (await discoverModes(modesDir)).modes.find((m) => m.name === "eng-spa")!.commands,
      requestTimeoutMs: 5_000,
      startupTimeoutMs: 30_000,
      maxInFlight: 1,
    });
    try {
      const reason = new Error("session closed");
      const controller = new AbortController();
      const written = pipeline.translate("Hello.", controller.signal);
      const queued = pipeline.translate("Good night.", controller.signal);
      const kept = pipeline.translate("Good morning.");
      controller.abort(reason);
      await expect(written).rejects.toBe(reason);
      await expect(queued).rejects.toBe(reason);
      expect(await kept).toMatch(/Buenos días/);
      expect(pipeline.status().starts).toBe(1);
      await expect(pipeline.translate("Hello.", AbortSignal.abort(reason))).rejects.toBe(reason);
      expect(await pipeline.translate("Hello.")).toMatch(/Hola/);
    } finally {
      await pipeline.close();
    }
  });

  it("ends every process on close and rejects later calls", async () => {
    const local = await createApertiumEngine({ modesDir });
    expect(statusOf(local, "en", "es").processes).toEqual([]); // started on first use
    await local.warmUp();
    const pids = statusOf(local, "en", "es").processes.map((p) => p.pid);
    expect(pids.length).toBeGreaterThan(3);
    expect(pids.every(alive)).toBe(true);
    await local.close();
    expect(pids.filter(alive)).toEqual([]);
    expect(statusOf(local, "en", "es").processes).toEqual([]);
    await expect(local.translate({ from: "en", to: "es", text: "Hello." })).rejects.toThrow(/closed/);
  });

  it("warms only the directions asked for; the others start on their first request", async () => {
    const dir = await modesDirWith(["eng-spa", "spa-eng"]);
    const local = await createApertiumEngine({ modesDir: dir });
    try {
      await local.warmUp([{ from: "en", to: "es" }]);
      expect(statusOf(local, "en", "es").processes.length).toBeGreaterThan(3);
      expect(statusOf(local, "es", "en").processes).toEqual([]);
      expect(await local.translate({ from: "es", to: "en", text: "Hola." })).toMatch(/Hello/);
      expect(statusOf(local, "es", "en").processes.length).toBeGreaterThan(3);
    } finally {
      await local.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("says nothing of a warm-up cut short by closing the engine (a service stopping as it starts)", async () => {
    const warnings: string[] = [];
    const local = await createApertiumEngine({ onWarning: (m) => warnings.push(m) });
    const warming = local.warmUp();
    await local.close();
    await warming;
    expect(warnings).toEqual([]);
  });

  it("leaves out a direction whose pipeline cannot start and fails when none can", async () => {
    const dir = await modesDirWith(["eng-spa"]);
    try {
      await writeFile(
        path.join(dir, "eng-fra.mode"),
        "/nonexistent/lt-proc '/nowhere/eng-fra.automorf.bin'\n",
      );
      const warnings: string[] = [];
      const partial = await createApertiumEngine({ modesDir: dir, onWarning: (m) => warnings.push(m) });
      expect(partial.capabilities.pairs).toEqual([{ from: "en", to: "es" }]);
      expect(warnings.join("\n")).toMatch(/eng-fra left out/);
      await partial.close();
      await rm(path.join(dir, "eng-spa.mode"));
      await expect(createApertiumEngine({ modesDir: dir, onWarning: () => undefined })).rejects.toThrow(
        /could be started/,
      );
      await rm(path.join(dir, "eng-fra.mode"));
      await expect(createApertiumEngine({ modesDir: dir })).rejects.toThrow(/no Apertium translation modes/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
