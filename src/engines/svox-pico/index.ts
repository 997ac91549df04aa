/**
 * SVOX Pico speech synthesis (WASM, in-process; code and lingware are Apache-2.0).
 *
 * Pico has one (female) speaker per locale, so a library voice's eSpeak variant and pitch range
 * cannot be rendered; its pitch and rate are, through Pico's `<pitch level>` / `<speed level>`
 * markup. Languages are those whose lingware pair is present in `lingwareDir`; English defaults to
 * en-US and uses en-GB for voices whose English accent is British (en-gb, en-gb-scotland, …).
 */
import { createRequire } from "node:module";
import type { SynthesisRequest, SynthesizedAudio, TtsEngine } from "../../core/contracts.js";
import { int16ToFloat32 } from "../../audio/pcm.js";
import { throwIfAborted } from "../../core/cancellation.js";
import { levelSpeech } from "../../audio/loudness.js";
import { findLingware, type LingwarePair } from "./lingware.js";
import { loadPicoModule, PICO_SAMPLE_RATE, PicoSynth } from "./pico.js";
import { picoMarkup } from "./markup.js";

export interface SvoxPicoEngineOptions {
  /** Directory holding `<locale>_ta.bin` and `<locale>_<speaker>_sg.bin` files. */
  readonly lingwareDir: string;
  /** Receives the WASM module's own console output (normally none); default: discarded. */
  readonly log?: (line: string) => void;
}

/** Locale used for a language when the voice asks for no particular accent. */
const DEFAULT_LOCALE: Readonly<Record<string, string>> = { en: "en-US" };

export async function createSvoxPicoEngine(options: SvoxPicoEngineOptions): Promise<TtsEngine> {
  const lingware = await findLingware(options.lingwareDir);
  const wasm = await loadPicoModule(options.log ?? (() => undefined));

  // Every locale is opened now, so corrupt lingware fails at start-up rather than mid-session.
  const synths = new Map<string, PicoSynth>();
  try {
    for (const pair of lingware)
      synths.set(pair.locale, await PicoSynth.open(wasm, pair.locale, pair.taPath, pair.sgPath));
  } catch (error) {
    for (const synth of synths.values()) synth.close();
    throw error;
  }

  const byLanguage = new Map<string, LingwarePair[]>();
  for (const pair of lingware)
    byLanguage.set(pair.language, [...(byLanguage.get(pair.language) ?? []), pair]);
  const languages = Object.freeze([...byLanguage.keys()].sort());
  // One utterance at a time: the WASM instance is single-threaded and Pico's RTF is only ~0.02-0.07.
  let queue: Promise<unknown> = Promise.resolve();
  let closed = false;

  function localeFor(request: SynthesisRequest): string {
    const pairs = byLanguage.get(request.language);
    if (!pairs) {
      throw new Error(
        `SVOX Pico cannot speak language "${request.language}" (it speaks: ${languages.join(", ")})`,
      );
    }
    const accent = request.voice.timbre.accentLocales?.[request.language]?.toLowerCase();
    // Pico locales are language-REGION; an eSpeak accent such as en-gb-scotland picks en-GB.
    const accented = accent ? pairs.find((p) => accent.startsWith(p.locale.toLowerCase())) : undefined;
    const preferred = pairs.find((p) => p.locale === DEFAULT_LOCALE[request.language]);
    return (accented ?? preferred ?? pairs[0]!).locale;
  }

  /** `signal` drops a request still waiting for its turn; a running synthesis is not interrupted. */
  async function synthesize(request: SynthesisRequest, signal?: AbortSignal): Promise<SynthesizedAudio> {
    if (closed) throw new Error("SVOX Pico engine is closed");
    const synth = synths.get(localeFor(request))!;
    const markup = picoMarkup(request.text, request.voice.timbre);
    if (markup === undefined) return { samples: new Float32Array(0), sampleRate: PICO_SAMPLE_RATE };
    const run = queue.then(async () => {
      if (closed) throw new Error("SVOX Pico engine is closed");
      throwIfAborted(signal, "SVOX Pico synthesis");
      return synth.synthesize(markup);
    });
    queue = run.catch(() => undefined);
    const pcm = await run;
    if (pcm.length === 0) throw new Error(`SVOX Pico produced no audio for ${request.language}`);
    return { samples: levelSpeech(int16ToFloat32(pcm)), sampleRate: PICO_SAMPLE_RATE };
  }

  async function close(): Promise<void> {
    if (closed) return;
    closed = true;
    await queue;
    for (const synth of synths.values()) synth.close();
    synths.clear();
  }

  const { version: wasmVersion } = createRequire(import.meta.url)(
    "@echogarden/svoxpico-wasm/package.json",
  ) as {
    version: string;
  };
  const version = `${wasmVersion}+${lingware.map((p) => p.locale).join("+")}`;
  return { info: { id: "svox-pico", version }, capabilities: { languages }, synthesize, close };
}
