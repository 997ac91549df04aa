/**
 * Lag behind the speaker (issue 50): how long after the speaker a listener hears the translation,
 * measured the way simultaneous speech translation is measured (SimulEval), on the live service.
 * Prints a Markdown table and writes JSON to bench-results/lag.json.
 *
 *   npm run bench:lag [-- --tier embedded|whisper] [-- --quick] [-- --pace catch-up|natural] [-- --max-speedup 1.5]
 *
 * Tiers: `embedded` (default: PocketSphinx, Apertium, eSpeak NG), English into Spanish; `whisper`:
 * relay's whisper.cpp engine on faster-whisper's real base converted to ggml and installed as
 * MODELS_DIR/ggml-base.bin (then base is the default recognizer), which also recognizes Spanish, so
 * the FLEURS Spanish clips are measured into English (Apertium es→en).
 *
 * Clips. Short form: the LibriVox clips that have a transcription (5) and LJSpeech LJ001-0001…0010
 * one by one, trailing silence trimmed to 100 ms (scripts/realtime-load.ts); FLEURS es (5) on the
 * whisper tier only (PocketSphinx recognizes English only, so FLEURS needs a multilingual
 * recognizer). Long form: LJSpeech LJ001-0001… in order, whole clips with their own leading and
 * trailing silence joined until ≥ 60 s (0001…0010, 66.70 s) and ≥ 180 s (0001…0027, 188.65 s), one
 * session and one turn each. `--quick`: two clips per short-form set, and the 60 s turn only.
 *
 * Definitions (all times in seconds since the clip's first frame was sent):
 * - Computation-aware: each clip is streamed in real time (20 ms frames) from t = 0, so wall-clock
 *   time is the source heard so far; then `finalize`, and everything up to `finalized` is kept.
 * - Listener: plays the translated audio frames (float32, 24 kHz) in order; a frame starts at
 *   max(its arrival, the end of the previous one) and lasts its sample count / 24000.
 * - StartOffset = start of the first frame; EndOffset = end of the last frame − source duration.
 * - Output words: each translated final adds the words beyond the previous final of its segment
 *   (finals are prefix extensions), and that span is spoken in one clip, alone or joined with the
 *   spans after it (an utterance's unfinished pieces are spoken as one phrase). Clips are told apart
 *   on the wire by their last frame, which is shorter than the synthesizer's full frames. A clip
 *   speaks the spans whose finals had arrived when it began and no clip spoke before — as many of
 *   them as best fit its length at the session's seconds per character — or, when none had, it
 *   continues the clip before (a line of several sentences). Each word's time is the playback time
 *   of its position in its clip's audio, the position proportional to the word's character offset
 *   in the clip's text.
 * - AL and LAAL (Papi et al. 2022, "Over-Generation Cannot Be Rewarded: Length-Adaptive Average
 *   Lagging for Simultaneous Speech Translation", as SimulEval's ALScorer / LAALScorer compute
 *   them): with word delays d_i, source duration |X|, τ the first i with d_i ≥ |X| (all words if
 *   none), AL = 1/τ Σ_{i≤τ} d_i − (i−1)·|X|/|Y|; d_1 alone when d_1 > |X|. |Y| is the reference
 *   length (SimulEval's default, `use_ref_len`), LAAL's is max(|Y|, hypothesis words). No reference
 *   translations exist for these clips: |Y| is the source transcript's word count. The delays are
 *   word starts in the played audio, SimulEval's `*_SpeechAlign_BOW` variant, computation-aware.
 * - ATD (Kano et al. 2022, "Average Token Delay", as SimulEval's ATDScorer pairs tokens): tokens are
 *   output words (ending where the next word of the line starts, the last at the line's audio end)
 *   and 300 ms source pieces; a chunk is a line, whose source is what had been heard when its final
 *   arrived. Word t of chunk c is paired with source piece min(t − max(0, Y_{c−1} − X_{c−1}), X_c)
 *   (Y, X: words and pieces up to the chunk); ATD = mean(end of word − end of its piece).
 * - Backlog: seconds of translated audio arrived and not yet played, sampled every second; its max
 *   and its value at the end of speech (t = source duration). On the 180 s turn, its max over each
 *   third of the turn: "no growth" is the last third's max no higher than the first's.
 * - Speed-up applied: the session's `pace` (`--pace`, default the service's default, catch-up) and
 *   `maxSpeedup`; measured from the service's `relay_speech_seconds_total{speed}` (/metrics) over each
 *   clip set: the mean speed weighted by seconds spoken, and the fastest used. Spoken s / source s
 *   shows how much longer the translation is than the speech, as sent (after any speed-up).
 * - Pieces per phrase: finals' spans (each a piece the stabiliser committed) per clip spoken, over
 *   the clip set: 1 when every piece is spoken on its own.
 */
import { execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { cpus, loadavg, tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { concatPcm } from "../src/audio/pcm.js";
import { readWavAsPcm16 } from "../src/audio/wav.js";
import { createSession, RealtimeSocket, type Received } from "../src/cli/recording-socket.js";
import { OUTPUT_SAMPLE_RATE } from "../src/pipeline/framer.js";
import { startServiceProcess, type ServiceProcess } from "../test/support/service-process.js";
import { pythonEnvDir } from "../test/support/python-clients.js";
import { realModelDir } from "../test/support/real-models.js";
import { speechBySpeed, speedsChosen } from "../test/support/speech-metrics.js";
import { flagValue, SHARED, loadClip } from "./realtime-load.js";

const QUICK = process.argv.includes("--quick");
const TIER = ((tier = flagValue("--tier") ?? "embedded") => {
  if (tier !== "embedded" && tier !== "whisper") throw new Error("--tier: embedded or whisper");
  return tier;
})();
/** The session's pace parameters (docs/realtime-api.md, "Pace"); absent: the service's defaults. */
const PACE = {
  ...(flagValue("--pace") === undefined ? {} : { pace: flagValue("--pace")! }),
  ...(flagValue("--max-speedup") === undefined ? {} : { maxSpeedup: flagValue("--max-speedup")! }),
};
const API_KEY = "bench-key";
const SPEECH = path.join(SHARED, "data/speech");

interface Clip {
  readonly name: string;
  readonly pcm: Int16Array;
  /** Words of the source transcript: the reference length of AL and LAAL (file comment). */
  readonly referenceWords: number;
}

interface ClipSet {
  readonly name: string;
  readonly from: string;
  readonly to: string;
  readonly form: "short" | "60 s" | "180 s";
  readonly clips: readonly Clip[];
}

const wordCount = (text: string) => text.split(/\s+/u).filter(Boolean).length;

/** LJSpeech's metadata: `id|text|normalized text` per line. */
const LJ_WORDS = new Map(
  readFileSync(path.join(SPEECH, "ljspeech/metadata.csv"), "utf8")
    .split("\n")
    .filter(Boolean)
    .map((line) => {
      const [id, text] = line.split("|") as [string, string];
      return [id, wordCount(text)] as const;
    }),
);
const LJ_IDS = [...LJ_WORDS.keys()].filter((id) => id.startsWith("LJ001-")).sort();

/** The LibriVox transcription: `<s> words </s> (clip)` per line. */
const LIBRIVOX = readFileSync(path.join(SPEECH, "librivox-pocketsphinx/transcription"), "utf8")
  .split("\n")
  .flatMap((line) => {
    const match = /^<s> (.*) <\/s> \((.+)\)$/u.exec(line.trim());
    return match ? [{ name: match[2]!, words: wordCount(match[1]!) }] : [];
  });

async function shortClip(name: string, referenceWords: number): Promise<Clip> {
  return { name, pcm: (await loadClip(name)).pcm, referenceWords };
}

/** Whole LJSpeech clips in order, joined until the turn lasts at least `seconds`. */
async function turn(seconds: number): Promise<Clip> {
  const parts: Int16Array[] = [];
  let samples = 0;
  let words = 0;
  for (const id of LJ_IDS) {
    if (samples >= seconds * 16_000) break;
    const pcm = await readWavAsPcm16(path.join(SPEECH, `ljspeech/wavs/${id}.wav`));
    parts.push(pcm);
    samples += pcm.length;
    words += LJ_WORDS.get(id)!;
  }
  const name = `LJ001-0001…${LJ_IDS[parts.length - 1]!.slice(-4)}`;
  return { name, pcm: concatPcm(parts), referenceWords: words };
}

async function clipSets(): Promise<ClipSet[]> {
  const few = <T>(items: T[]) => (QUICK ? items.slice(0, 2) : items);
  const librivox = await Promise.all(
    few(LIBRIVOX).map((c) => shortClip(`librivox-pocketsphinx/${c.name}.wav`, c.words)),
  );
  const lj = await Promise.all(
    few(LJ_IDS.slice(0, 10)).map((id) => shortClip(`ljspeech/wavs/${id}.wav`, LJ_WORDS.get(id)!)),
  );
  const fleurs = await Promise.all(
    few(["005", "006", "007", "008", "009"]).map((n) =>
      shortClip(
        `fleurs-dev/fleurs-es-${n}.wav`,
        wordCount(readFileSync(path.join(SPEECH, `fleurs-dev/fleurs-es-${n}.txt`), "utf8")),
      ),
    ),
  );
  const enEs = { from: "en", to: "es" };
  return [
    ...(TIER === "whisper"
      ? [{ name: "FLEURS es", from: "es", to: "en", form: "short", clips: fleurs } as const]
      : []),
    { name: "LibriVox", ...enEs, form: "short", clips: librivox },
    { name: "LJSpeech single", ...enEs, form: "short", clips: lj },
    { name: "60 s turn", ...enEs, form: "60 s", clips: [await turn(60)] },
    ...(QUICK ? [] : [{ name: "180 s turn", ...enEs, form: "180 s", clips: [await turn(180)] } as const]),
  ];
}

/** The service's environment for the whisper tier: base as MODELS_DIR's default ggml-base.bin. */
async function whisperModels(): Promise<Record<string, string>> {
  const dir = await mkdtemp(path.join(tmpdir(), "relay-bench-lag-"));
  await promisify(execFile)(path.join(pythonEnvDir("models"), "bin/python"), [
    "scripts/convert-whisper-ct2-to-ggml.py",
    realModelDir("whisper-base"),
    path.join(dir, "ggml-base.bin"),
  ]);
  return { MODELS_DIR: dir };
}

async function startService(engines: Record<string, string>): Promise<ServiceProcess> {
  const service = await startServiceProcess("bench-lag", {
    API_KEYS: API_KEY,
    DATA_DIR: "/tmp/relay-bench-lag",
    ...engines,
  });
  // Which recognizer runs: a whisper run that fell back to PocketSphinx would measure nothing.
  console.error(`healthz: ${await (await fetch(`${service.baseUrl}/healthz`)).text()}`);
  return service;
}

/** Streams one clip in real time on a fresh session; what arrived, timed from its first frame. */
async function stream(baseUrl: string, set: ClipSet, clip: Clip): Promise<Received[]> {
  const params = { sourceLanguage: set.from, targetLanguage: set.to, ...PACE };
  const socket = await RealtimeSocket.connect((await createSession(baseUrl, API_KEY, params)).ws_url);
  await socket.waitFor((m) => m.type === "ready");
  const start = performance.now();
  const first = socket.received.length;
  await socket.stream(clip.pcm, { chunkMs: 20, speed: 1 });
  socket.finalize();
  await socket.waitFor((m) => m.type === "finalized", 300_000);
  socket.close();
  return socket.received.slice(first).map((r) => ({ ...r, at: (r.at - start) / 1000 }));
}

/** A played frame: when it arrived, started and ended for the listener. */
interface Played {
  readonly arrival: number;
  readonly start: number;
  readonly end: number;
}

/** A spoken line: the words its translated final added, when that final arrived, its frames. */
interface Line {
  readonly text: string;
  readonly arrival: number;
  readonly frames: Played[];
}

/**
 * The lines of a session as they were spoken, each with the played frames of its clip(s) (file
 * comment): a clip speaks one or more finals' lines (the service joins an utterance's unfinished
 * pieces into phrases), or continues the line before it (a line of several sentences).
 */
function linesOf(received: readonly Received[]): { lines: Line[]; played: Played[]; pieces: number } {
  const previous = new Map<unknown, number>();
  const finals: Line[] = [];
  for (const r of received) {
    const m = r.message;
    if (m?.type !== "translated_transcript" || m.is_final !== true) continue;
    const words = String(m.translated_text ?? m.text)
      .split(/\s+/u)
      .filter(Boolean);
    const before = previous.get(m.correlation_id) ?? 0;
    previous.set(m.correlation_id, words.length);
    if (words.length > before)
      finals.push({ text: words.slice(before).join(" "), arrival: r.at, frames: [] });
  }
  const audio = received.filter((r) => r.audio);
  const full = Math.max(0, ...audio.map((r) => r.audio!.length));
  const played: Played[] = [];
  const clips: Played[][] = [];
  let clipStarts = true;
  for (const r of audio) {
    const start = Math.max(r.at, played.at(-1)?.end ?? 0);
    const frame = { arrival: r.at, start, end: start + r.audio!.length / OUTPUT_SAMPLE_RATE };
    played.push(frame);
    if (clipStarts) clips.push([]);
    clips.at(-1)!.push(frame);
    clipStarts = r.audio!.length < full;
  }
  const seconds = (frames: readonly Played[]) => frames.reduce((sum, f) => sum + f.end - f.start, 0);
  const characters = (group: readonly Line[]) => group.reduce((sum, l) => sum + l.text.length, 0);
  // Seconds per character over the whole session, to tell how many lines a clip speaks.
  const rate = seconds(played) / Math.max(1, characters(finals));
  const lines: Line[] = [];
  let next = 0;
  for (const frames of clips) {
    // Lines that had arrived when the clip began and no clip spoke before: the clip speaks the first
    // j of them, j the count whose text best fits its length; none: it continues the line before.
    let arrived = next;
    while (arrived < finals.length && finals[arrived]!.arrival <= frames[0]!.arrival) arrived++;
    if (arrived === next && lines.length > 0) {
      lines.at(-1)!.frames.push(...frames);
      continue;
    }
    const misfit = (from: number, end: number) =>
      Math.abs(characters(finals.slice(from, end)) * rate - seconds(frames));
    let best = next + 1;
    for (let j = next + 2; j <= arrived; j++) if (misfit(next, j) < misfit(next, best)) best = j;
    const group = finals.slice(next, Math.min(best, finals.length));
    next = Math.min(best, finals.length);
    lines.push({
      text: group.map((l) => l.text).join(" "),
      arrival: group.at(-1)?.arrival ?? frames[0]!.arrival,
      frames: [...frames],
    });
  }
  lines.push(...finals.slice(next));
  return { lines, played, pieces: finals.length };
}

/** Playback time of a fraction (0…1) of a line's audio. */
function timeAt(frames: readonly Played[], fraction: number): number {
  const total = frames.reduce((sum, f) => sum + (f.end - f.start), 0);
  let left = fraction * total;
  for (const f of frames) {
    if (left <= f.end - f.start) return f.start + left;
    left -= f.end - f.start;
  }
  return frames.at(-1)!.end;
}

/** SimulEval's AL (LAAL with the hypothesis length folded into `targetLength`). */
function averageLagging(delays: readonly number[], source: number, targetLength: number): number {
  if (delays[0]! > source) return delays[0]!;
  let sum = 0;
  let tau = 0;
  for (const [i, d] of delays.entries()) {
    sum += d - (i * source) / targetLength;
    tau = i + 1;
    if (d >= source) break;
  }
  return sum / tau;
}

interface ClipResult {
  readonly clip: string;
  readonly sourceSeconds: number;
  readonly spokenSeconds: number;
  readonly words: number;
  /** Finals' spans (the pieces committed), and the clips they were spoken in (phrases). */
  readonly pieces: number;
  readonly lines: number;
  readonly startOffset: number | null;
  readonly endOffset: number | null;
  readonly al: number | null;
  readonly laal: number | null;
  readonly atd: number | null;
  readonly maxBacklog: number;
  readonly backlogAtEndOfSpeech: number;
  readonly backlog: number[];
  readonly translation: string;
}

function analyse(clip: Clip, received: readonly Received[]): ClipResult {
  const source = clip.pcm.length / 16_000;
  const { lines, played, pieces } = linesOf(received);
  const spoken = lines.filter((l) => l.frames.length > 0);
  // Word starts and ends, and the chunk (line) each belongs to.
  const words: { start: number; end: number; chunk: number }[] = [];
  for (const [chunk, line] of spoken.entries()) {
    const offsets = [...line.text.matchAll(/\S+/gu)].map((m) => m.index);
    for (const [j, offset] of offsets.entries()) {
      const next = offsets[j + 1];
      words.push({
        start: timeAt(line.frames, offset / line.text.length),
        end: next === undefined ? line.frames.at(-1)!.end : timeAt(line.frames, next / line.text.length),
        chunk,
      });
    }
  }
  const delays = words.map((w) => w.start);
  const backlogAt = (t: number) =>
    played.reduce((sum, f) => (f.arrival <= t ? sum + Math.max(0, f.end - Math.max(f.start, t)) : sum), 0);
  const lastEnd = played.at(-1)?.end ?? 0;
  const backlog = Array.from({ length: Math.floor(lastEnd) + 1 }, (_, t) => +backlogAt(t).toFixed(2));
  const round = (v: number | undefined) => (v === undefined ? null : +v.toFixed(2));
  return {
    clip: clip.name,
    sourceSeconds: +source.toFixed(2),
    spokenSeconds: +played.reduce((sum, f) => sum + f.end - f.start, 0).toFixed(2),
    words: words.length,
    pieces,
    lines: spoken.length,
    startOffset: round(played[0]?.start),
    endOffset: round(played.length ? lastEnd - source : undefined),
    al: round(delays.length ? averageLagging(delays, source, clip.referenceWords) : undefined),
    laal: round(
      delays.length
        ? averageLagging(delays, source, Math.max(clip.referenceWords, delays.length))
        : undefined,
    ),
    atd: round(words.length ? averageTokenDelay(words, spoken, source) : undefined),
    maxBacklog: Math.max(+backlogAt(source).toFixed(2), ...backlog),
    backlogAtEndOfSpeech: +backlogAt(source).toFixed(2),
    backlog,
    translation: lines.map((l) => l.text).join(" | "),
  };
}

/** ATD over output words and 300 ms source pieces, a line being a chunk (file comment). */
function averageTokenDelay(
  words: readonly { end: number; chunk: number }[],
  lines: readonly Line[],
  source: number,
): number {
  const piece = 0.3;
  // Source pieces heard, and words output, by the end of each chunk.
  const heard = lines.map((l) => Math.ceil(Math.min(l.arrival, source) / piece));
  const output = lines.map((_, c) => words.filter((w) => w.chunk <= c).length);
  const delays = words.map((w, index) => {
    const t = index + 1;
    const c = w.chunk;
    const ahead = c === 0 ? 0 : Math.max(0, output[c - 1]! - heard[c - 1]!);
    const s = Math.max(1, Math.min(t - ahead, heard[c]!));
    return w.end - Math.min(s * piece, source);
  });
  return delays.reduce((a, b) => a + b, 0) / delays.length;
}

/** The median, the mean of the middle two for an even count. */
function median(values: readonly (number | null)[]): number | null {
  const sorted = values.filter((v): v is number => v !== null).sort((a, b) => a - b);
  if (sorted.length === 0) return null;
  const middle = sorted.length / 2;
  const value = Number.isInteger(middle)
    ? (sorted[middle - 1]! + sorted[middle]!) / 2
    : sorted[Math.floor(middle)]!;
  return +value.toFixed(2);
}

const mean = (values: readonly (number | null)[]) => {
  const present = values.filter((v): v is number => v !== null);
  return present.length ? +(present.reduce((a, b) => a + b, 0) / present.length).toFixed(2) : null;
};

/**
 * The issue's targets for each form, and whether the measured values meet them. "No growth over the
 * turn" is read on the backlog sampled each second: its maximum over the last third of the turn is
 * no higher than over the first third.
 */
function target(
  form: ClipSet["form"],
  endOffset: number | null,
  laal: number | null,
  backlog: readonly number[],
) {
  if (form === "180 s") {
    const third = Math.floor(backlog.length / 3);
    const [first, last] = [Math.max(...backlog.slice(0, third)), Math.max(...backlog.slice(-third))];
    return {
      target: "no growth (max backlog, last third ≤ first third)",
      met: last <= first,
      backlogByThird: [first, Math.max(...backlog.slice(third, -third)), last],
    };
  }
  const [end, lag] = form === "short" ? [2.0, 2.5] : [2.5, 3.0];
  const label = `${form === "short" ? "median " : ""}EndOffset ≤ ${end} s, LAAL ≤ ${lag} s`;
  return { target: label, met: endOffset !== null && laal !== null && endOffset <= end && laal <= lag };
}

async function main(): Promise<void> {
  const sets = await clipSets();
  const loadBefore = loadavg()[0]!.toFixed(2);
  const service = await startService(TIER === "whisper" ? await whisperModels() : {});
  // Warm-up: the first session loads the engines.
  const warmUp = sets.find((set) => set.name === "LibriVox")!;
  await stream(service.baseUrl, warmUp, warmUp.clips[0]!);
  const rows = [];
  for (const set of sets) {
    const results: ClipResult[] = [];
    const spokenBefore = await speechBySpeed(service.baseUrl);
    for (const clip of set.clips) {
      const result = analyse(clip, await stream(service.baseUrl, set, clip));
      console.error(JSON.stringify(result, (key, value: unknown) => (key === "backlog" ? undefined : value)));
      results.push(result);
    }
    const endOffset = median(results.map((r) => r.endOffset));
    const laal = mean(results.map((r) => r.laal));
    const maxBacklog = Math.max(...results.map((r) => r.maxBacklog));
    const source = results.reduce((sum, r) => sum + r.sourceSeconds, 0);
    const spoken = results.reduce((sum, r) => sum + r.spokenSeconds, 0);
    const speed = speedsChosen(spokenBefore, await speechBySpeed(service.baseUrl));
    rows.push({
      set: set.name,
      pair: `${set.from}→${set.to}`,
      clips: results.length,
      sourceSeconds: +source.toFixed(2),
      startOffset: median(results.map((r) => r.startOffset)),
      endOffset,
      al: mean(results.map((r) => r.al)),
      laal,
      atd: mean(results.map((r) => r.atd)),
      maxBacklog,
      backlogAtEndOfSpeech: Math.max(...results.map((r) => r.backlogAtEndOfSpeech)),
      spokenPerSource: +(spoken / source).toFixed(2),
      // Pieces committed per clip spoken: how far the service joined pieces into phrases.
      piecesPerPhrase: +(
        results.reduce((sum, r) => sum + r.pieces, 0) /
        Math.max(
          1,
          results.reduce((sum, r) => sum + r.lines, 0),
        )
      ).toFixed(2),
      speedUp: +speed.mean.toFixed(2),
      fastest: speed.fastest,
      ...target(set.form, endOffset, laal, results[0]!.backlog),
      results,
    });
  }
  service.child.kill("SIGTERM");
  await service.exited;

  const machine = {
    cpus: cpus().length,
    model: cpus()[0]?.model,
    node: process.version,
    loadAverageBefore: loadBefore,
    loadAverageAfter: loadavg()[0]!.toFixed(2),
  };
  await mkdir("bench-results", { recursive: true });
  const file = path.join("bench-results", "lag.json");
  // Each tier's run keeps the other's results.
  const previous = existsSync(file) ? (JSON.parse(readFileSync(file, "utf8")) as object) : {};
  const run = `${TIER}${PACE.pace === "natural" ? " natural" : ""}`;
  await writeFile(
    file,
    JSON.stringify({ ...previous, [run]: { machine, quick: QUICK, pace: PACE, rows } }, null, 2),
  );

  console.log(
    [
      `Tier: ${TIER}${QUICK ? " (--quick)" : ""}; pace: ${JSON.stringify(PACE)}; machine: ${machine.model} × ${machine.cpus}, load average ${loadBefore} before, ${machine.loadAverageAfter} after`,
      "",
      "| tier | clip set | clips | source s | StartOffset | EndOffset (median) | AL | LAAL | ATD | max backlog | backlog at end of speech | spoken s / source s | pieces per phrase | speed-up (mean / fastest) | target | met |",
      "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
      ...rows.map(
        (r) =>
          `| ${TIER} | ${r.set} (${r.pair}) | ${r.clips} | ${r.sourceSeconds} | ${r.startOffset} | ${r.endOffset} | ${r.al} | ${r.laal} | ${r.atd} | ${r.maxBacklog} | ${r.backlogAtEndOfSpeech} | ${r.spokenPerSource} | ${r.piecesPerPhrase} | ${r.speedUp.toFixed(2)} / ${r.fastest.toFixed(2)} | ${r.target} | ${r.met ? "met" : "not met"}${"backlogByThird" in r && r.backlogByThird ? ` (thirds: ${r.backlogByThird.join(" / ")} s)` : ""} |`,
      ),
    ].join("\n"),
  );
}

await main();
