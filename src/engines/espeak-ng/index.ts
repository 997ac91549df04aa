/**
 * eSpeak NG speech synthesis.
 *
 * Licensing: eSpeak NG is GPL-3.0 and this project is Apache-2.0, so eSpeak NG is used ONLY as a
 * separate program — one `espeak-ng` process per utterance, started by a resident launcher shell
 * (see launcher.ts). Never link or load libespeak-ng (no FFI, no WASM build of it) into this process.
 *
 * Safety: text reaches eSpeak NG in a file, never on the command line, and SSML is off (no `-m`), so
 * text cannot inject options or markup. Every argument is either a number or a voice file/variant
 * name checked against what eSpeak NG itself listed at start-up.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import type {
  EngineInfo,
  SynthesisRequest,
  SynthesizedAudio,
  TtsCapabilities,
  TtsEngine,
} from "../../core/contracts.js";
import { decodeWav, type MonoAudio } from "../../audio/wav.js";
import { levelSpeech } from "../../audio/loudness.js";
import { ProgramLauncher } from "./launcher.js";
import { defaultLocales, isoCodeOf, parseVoiceList, type EspeakVoiceEntry } from "./voices.js";

export interface EspeakEngineOptions {
  /** Program to run; default "espeak-ng" from PATH. */
  readonly binary?: string;
  /** The espeak-ng-data directory (the one holding `voices/!v`); default: the one eSpeak NG reports. */
  readonly dataDir?: string;
  /** eSpeak NG processes allowed to run at once; further requests queue. Default 2. */
  readonly maxConcurrent?: number;
  /** Per-utterance time limit; the process is killed when it is exceeded. Default 30 s. */
  readonly timeoutMs?: number;
  /** eSpeak NG amplitude 0..200 (output is levelled afterwards; this only sets headroom). Default 100. */
  readonly amplitude?: number;
}

const execFileAsync = promisify(execFile);

/** eSpeak NG's speed at rate factor 1 (its own default, words per minute). */
const DEFAULT_WPM = 175;
/** eSpeak NG accepts 80..450 wpm; faster is unintelligible anyway. */
const MIN_WPM = 80;
const MAX_WPM = 450;
/** eSpeak NG's "embedded command" introducer: Ctrl-A, then a value and a letter (e.g. "\x0130R"). */
const EMBEDDED = "\u0001";
/** Control characters (except tab and newline) would let text carry embedded commands. */
const CONTROL_CHARACTERS = /(?![\t\n])\p{Cc}/gu;
/** eSpeak NG's native output rate (fixed for all its voices). */
const NATIVE_RATE = 22_050;

export async function createEspeakEngine(options: EspeakEngineOptions = {}): Promise<TtsEngine> {
  const binary = options.binary ?? "espeak-ng";
  const timeoutMs = options.timeoutMs ?? 30_000;
  const amplitude = clampInteger(options.amplitude ?? 100, 0, 200);
  const concurrency = options.maxConcurrent ?? 2;
  if (!Number.isInteger(concurrency) || concurrency < 1) {
    throw new Error(`eSpeak NG maxConcurrent must be a positive integer, got ${concurrency}`);
  }
  // `--path` accepts the espeak-ng-data directory itself (or its parent).
  const pathArgs = options.dataDir ? [`--path=${options.dataDir}`] : [];
  const setupTimeout = Math.max(timeoutMs, 10_000);
  // eSpeak NG silently falls back to its built-in data when --path is wrong, so check it here.
  if (options.dataDir && !existsSync(path.join(options.dataDir, "phontab"))) {
    throw new Error(`${options.dataDir} is not an espeak-ng-data directory (it has no phontab)`);
  }

  const run = async (args: string[]): Promise<string> => {
    try {
      return (
        await execFileAsync(binary, [...pathArgs, ...args], { timeout: setupTimeout, encoding: "utf8" })
      ).stdout;
    } catch (error) {
      throw new Error(`could not run ${binary} ${args.join(" ")}: ${(error as Error).message}`, {
        cause: error,
      });
    }
  };
  const versionOutput = (await run(["--version"])).trim();
  const version = /text-to-speech:\s*(\S+)/.exec(versionOutput)?.[1];
  const reportedDataDir = /Data at:\s*(.+)$/m.exec(versionOutput)?.[1]?.trim();
  if (!version) throw new Error(`unexpected output from ${binary} --version: ${versionOutput.slice(0, 200)}`);
  const dataDir = options.dataDir ?? reportedDataDir;
  if (!dataDir) throw new Error(`${binary} --version did not report its data directory; pass dataDir`);

  const listing = await run(["--voices"]);
  const entries = parseVoiceList(listing);
  const defaults = defaultLocales(entries);
  if (defaults.size === 0) throw new Error(`${binary} --voices listed no usable languages`);
  const byLocale = new Map<string, EspeakVoiceEntry>();
  for (const entry of entries) if (!byLocale.has(entry.language)) byLocale.set(entry.language, entry);

  const variantDir = path.join(dataDir, "voices", "!v");
  let variants: Set<string>;
  try {
    variants = new Set(await readdir(variantDir));
  } catch (error) {
    throw new Error(`cannot list eSpeak NG voice variants in ${variantDir}: ${(error as Error).message}`, {
      cause: error,
    });
  }

  const info: EngineInfo = { id: "espeak-ng", version };
  const capabilities: TtsCapabilities = { languages: Object.freeze([...defaults.keys()]) };
  const workDir = await mkdtemp(path.join(tmpdir(), "espeak-ng-"));
  if (/\s/u.test(workDir)) throw new Error(`temporary directory ${workDir} contains whitespace`);
  const launchers = Array.from(
    { length: concurrency },
    () => new ProgramLauncher(binary, workDir, timeoutMs),
  );
  let closed = false;

  /** The voice file for `language`, honouring the voice's regional accent when eSpeak NG has it. */
  function voiceFile(request: SynthesisRequest): string {
    const fallback = defaults.get(request.language);
    if (!fallback) {
      throw new Error(
        `eSpeak NG cannot speak language "${request.language}" (it speaks: ${capabilities.languages.join(", ")})`,
      );
    }
    const accent = request.voice.timbre.accentLocales?.[request.language]?.toLowerCase();
    const accented = accent ? byLocale.get(accent) : undefined;
    // An accent locale must belong to the requested language (en-029 may stand in for en, not for fr).
    return accented && isoCodeOf(accented.language) === request.language ? accented.file : fallback.file;
  }

  async function synthesize(request: SynthesisRequest, signal?: AbortSignal): Promise<SynthesizedAudio> {
    if (closed) throw new Error("eSpeak NG engine is closed");
    const file = voiceFile(request);
    const { variant, pitch, pitchRange, rate } = request.voice.timbre;
    if (!variants.has(variant)) {
      throw new Error(
        `eSpeak NG voice variant "${variant}" (voice ${request.voice.id}) is not installed in ${variantDir}`,
      );
    }
    const text = request.text.replace(CONTROL_CHARACTERS, " ");
    if (text.trim() === "") return { samples: new Float32Array(0), sampleRate: NATIVE_RATE };

    const args = [
      ...pathArgs,
      "-b",
      "1",
      "-v",
      `${file}+${variant}`,
      "-p",
      String(clampInteger(pitch, 0, 99)),
      "-s",
      String(clampInteger(DEFAULT_WPM * rate, MIN_WPM, MAX_WPM)),
      "-a",
      String(amplitude),
    ];
    // The 1.51 CLI has no pitch-range option (-P is rejected); an embedded "R" command sets it.
    const input = `${EMBEDDED}${clampInteger(pitchRange, 0, 99)}R ${text}`;

    const launcher = launchers.reduce((best, candidate) =>
      candidate.pending < best.pending ? candidate : best,
    );
    const output = await launcher.run(args, input, signal);
    const audio = output.length > 0 ? decodeEspeakWav(output) : undefined;
    if (!audio || audio.samples.length === 0) {
      throw new Error(
        `eSpeak NG produced no audio for ${request.language} with voice ${request.voice.id} (${file}+${variant})`,
      );
    }
    return { samples: levelSpeech(audio.samples), sampleRate: audio.sampleRate };
  }

  async function close(): Promise<void> {
    closed = true;
    for (const launcher of launchers) launcher.close();
    await rm(workDir, { recursive: true, force: true });
  }

  return { info, capabilities, synthesize, close };
}

/** The WAV file eSpeak NG wrote (`-w`, so its RIFF and data sizes are filled in). */
function decodeEspeakWav(bytes: Buffer): MonoAudio {
  try {
    return decodeWav(bytes);
  } catch (error) {
    throw new Error(
      `eSpeak NG output is not a WAV file (${bytes.length} bytes): ${(error as Error).message}`,
      {
        cause: error,
      },
    );
  }
}

function clampInteger(value: number, min: number, max: number): number {
  if (!Number.isFinite(value)) return min;
  return Math.min(max, Math.max(min, Math.round(value)));
}
