/**
 * Quality measured on real weights and real speech from ../shared/data (issue 49; docs/benchmarks.md,
 * "Quality on real weights"):
 * 1. Word error rate per recognizer: PocketSphinx (relay's engine, in process) and Whisper tiny.en
 *    and base (the real weights of scripts/setup-real-models.sh, through faster-whisper) on the
 *    English clips (LibriVox, LJSpeech LJ001-0001…0032, JFK, LibriSpeech), and base on the FLEURS
 *    de/es/fr/pt clips; scored after Whisper's own text normaliser, as the Whisper paper scores.
 * 2. Translation by Apertium (relay's embedded engine): FLORES dev sentences against FLORES's
 *    references (en→es, es→en, fr→es, pt→es); and recognition's share of the loss: the translation
 *    of what each recognizer heard (LJSpeech en→es; FLEURS es/fr/pt with base) against the
 *    translation of the clip's transcript (no real speech here has a human reference translation).
 * 3. Round trip of each voice: eSpeak NG, SVOX Pico and Piper en_US-joe-medium (imported from
 *    Piper's layout, as `relay models import piper` does, and spoken by relay's sherpa-onnx engine)
 *    speak English FLORES sentences; base recognizes them; WER against the text.
 *
 *   sh scripts/setup-real-models.sh && sh scripts/setup-python-clients.sh models
 *   npm run bench:quality
 */
import { execFile } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { readWavAsPcm16, writeWavFloat32 } from "../src/audio/wav.js";
import type { LanguageCode, TtsEngine } from "../src/core/contracts.js";
import { createApertiumEngine } from "../src/engines/apertium/index.js";
import { createEspeakEngine } from "../src/engines/espeak-ng/index.js";
import { createPocketSphinxEngine } from "../src/engines/pocketsphinx/index.js";
import { neuralVoiceModels } from "../src/engines/sherpa-onnx/models.js";
import { importPiperVoice } from "../src/engines/sherpa-onnx/piper-import.js";
import { createSherpaTtsEngine } from "../src/engines/sherpa-onnx/tts.js";
import { createSvoxPicoEngine } from "../src/engines/svox-pico/index.js";
import { defaultVoice } from "../src/voices/library.js";
import { pythonEnvDir, pythonEnvProblem } from "../test/support/python-clients.js";
import { realModelDir, realModelsProblem } from "../test/support/real-models.js";
import { SHARED_DIR } from "../test/support/shared.js";

const SPEECH = path.join(SHARED_DIR, "data/speech");
const FLORES = path.join(SHARED_DIR, "data/text/flores-dev");
/** English FLORES sentences the voices speak (the first of the dev set). */
const VOICE_SENTENCES = 10;
/** FLORES dev sentences translated as text. */
const MT_SENTENCES = 100;

interface Clip {
  readonly path: string;
  readonly reference: string;
}

function python<T>(request: object): Promise<T> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      path.join(pythonEnvDir("models"), "bin/python"),
      [path.join(import.meta.dirname, "bench-quality.py")],
      { maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) =>
        error ? reject(new Error(`${error.message}\n${stderr}`)) : resolve(JSON.parse(stdout) as T),
    );
    child.stdin!.end(JSON.stringify(request));
  });
}

function englishClips(): { readonly corpus: string; readonly clips: Clip[] }[] {
  const librivox = path.join(SPEECH, "librivox-pocketsphinx");
  const lines = readFileSync(path.join(librivox, "transcription"), "utf8").trim().split("\n");
  const ljspeech = readFileSync(path.join(SPEECH, "ljspeech/metadata.csv"), "utf8").trim().split("\n");
  const misc = readFileSync(path.join(SPEECH, "misc/transcripts.tsv"), "utf8").trim().split("\n").slice(1);
  return [
    {
      corpus: "LibriVox (7 clips)",
      clips: [
        ...lines.map((line) => {
          const [, text, id] = /^<s> (.*) <\/s> \((.+)\)$/u.exec(line.trim())!;
          return { path: path.join(librivox, `${id}.wav`), reference: text! };
        }),
        { path: path.join(librivox, "goforward.wav"), reference: "go forward ten meters" },
      ],
    },
    {
      corpus: "LJSpeech LJ001-0001…0032",
      clips: ljspeech.map((line) => {
        const [id, , normalized] = line.split("|");
        return { path: path.join(SPEECH, "ljspeech/wavs", `${id}.wav`), reference: normalized! };
      }),
    },
    {
      corpus: "JFK + LibriSpeech 1995-1837-0001",
      clips: misc
        .map((line) => line.split("\t"))
        .filter(([, lang]) => lang === "en")
        .map(([file, , text]) => ({ path: path.join(SPEECH, "misc", file!), reference: text! }))
        .concat([
          {
            path: path.join(SPEECH, "misc/jfk.wav"),
            reference:
              "And so my fellow Americans ask not what your country can do for you ask what you can do for your country",
          },
        ]),
    },
  ];
}

/** The FLEURS clips of a language, with FLEURS's transcripts. */
function fleursClips(language: string): Clip[] {
  const dir = path.join(SPEECH, "fleurs-dev");
  return readdirSync(dir)
    .filter((file) => file.startsWith(`fleurs-${language}-`) && file.endsWith(".wav"))
    .map((file) => ({
      path: path.join(dir, file),
      reference: readFileSync(path.join(dir, file.replace(/\.wav$/u, ".txt")), "utf8").trim(),
    }));
}

async function recognizerTable(): Promise<void> {
  const pocketsphinx = await createPocketSphinxEngine({ maxDecoders: 1 });
  console.log("## Word error rate (Whisper's normaliser; PocketSphinx is English only)\n");
  console.log("| clips | words | PocketSphinx | whisper tiny.en | whisper base |");
  console.log("| --- | --- | --- | --- | --- |");
  for (const { corpus, clips } of englishClips()) {
    const sphinx: string[] = [];
    for (const clip of clips) {
      const pcm = await readWavAsPcm16(clip.path);
      const stream = await pocketsphinx.createStream({ language: "en" });
      for (let i = 0; i < pcm.length; i += 512) await stream.write(pcm.subarray(i, i + 512));
      sphinx.push((await stream.finish()).text);
    }
    const spec = clips.map((clip) => ({ path: clip.path, language: "en" }));
    const tiny = await python<{ text: string }[]>({
      do: "transcribe",
      model: realModelDir("whisper-tiny.en"),
      clips: spec,
    });
    const base = await python<{ text: string }[]>({
      do: "transcribe",
      model: realModelDir("whisper-base"),
      clips: spec,
    });
    const score = async (texts: readonly string[]) => {
      const pairs = clips.map((clip, i) => [clip.reference, texts[i]!]);
      return python<{ wer: number; words: number }>({ do: "wer", normalizer: "english", pairs });
    };
    const [s, t, b] = [
      await score(sphinx),
      await score(tiny.map((r) => r.text)),
      await score(base.map((r) => r.text)),
    ];
    const pct = (wer: number) => `${(wer * 100).toFixed(1)} %`;
    console.log(`| ${corpus} | ${s.words} | ${pct(s.wer)} | ${pct(t.wer)} | ${pct(b.wer)} |`);
  }
  await pocketsphinx.close();
  console.log("\n| FLEURS dev (5 clips each) | words | whisper base, language given | language identified |");
  console.log("| --- | --- | --- | --- |");
  for (const language of ["de", "es", "fr", "pt"]) {
    const clips = fleursClips(language);
    const given = await python<{ text: string }[]>({
      do: "transcribe",
      model: realModelDir("whisper-base"),
      clips: clips.map((clip) => ({ path: clip.path, language })),
    });
    const identified = await python<{ language: string }[]>({
      do: "transcribe",
      model: realModelDir("whisper-base"),
      clips: clips.map((clip) => ({ path: clip.path, language: null })),
    });
    const score = await python<{ wer: number; words: number }>({
      do: "wer",
      normalizer: "basic",
      pairs: clips.map((clip, i) => [clip.reference, given[i]!.text]),
    });
    const right = identified.filter((r) => r.language === language).length;
    console.log(
      `| ${language} | ${score.words} | ${(score.wer * 100).toFixed(1)} % | ${right} / ${clips.length} |`,
    );
  }
}

/** Lower case without punctuation: what PocketSphinx writes and FLEURS's transcripts are. */
const plain = (text: string) =>
  text
    .toLowerCase()
    .replace(/[^\p{L}\p{N}' ]/gu, " ")
    .replace(/\s+/gu, " ")
    .trim();

async function translationTable(): Promise<void> {
  const apertium = await createApertiumEngine();
  const f = (n: number) => n.toFixed(1);
  console.log(
    `\n## Translation by Apertium of FLORES dev (first ${MT_SENTENCES} sentences) against its references\n`,
  );
  console.log("| direction | BLEU | chrF |");
  console.log("| --- | --- | --- |");
  const directions: [LanguageCode, LanguageCode][] = [
    ["en", "es"],
    ["es", "en"],
    ["fr", "es"],
    ["pt", "es"],
  ];
  for (const [from, to] of directions) {
    const sources = readFileSync(path.join(FLORES, `${from}.txt`), "utf8")
      .split("\n")
      .slice(0, MT_SENTENCES);
    const references = readFileSync(path.join(FLORES, `${to}.txt`), "utf8")
      .split("\n")
      .slice(0, MT_SENTENCES);
    const hypotheses: string[] = [];
    for (const text of sources) hypotheses.push(await apertium.translate({ text, from, to }));
    const score = await python<{ bleu: number; chrf: number }>({ do: "mt", references, hypotheses });
    console.log(`| ${from}→${to} | ${f(score.bleu)} | ${f(score.chrf)} |`);
  }

  // No real speech here has a human reference translation (the FLEURS clips read FLORES devtest
  // sentences, which ../shared lacks), so recognition's share of the loss is measured against the
  // translation of the reference transcript: how far a recognizer's errors move the translation.
  console.log(
    "\n## Recognition's share: translation of what was recognized, against the translation of the transcript\n",
  );
  console.log("| speech | direction | recognizer | BLEU | chrF |");
  console.log("| --- | --- | --- | --- | --- |");
  const lj = englishClips().find(({ corpus }) => corpus.startsWith("LJSpeech"))!.clips;
  const pocketsphinx = await createPocketSphinxEngine({ maxDecoders: 1 });
  const sphinx: string[] = [];
  for (const clip of lj) {
    const pcm = await readWavAsPcm16(clip.path);
    const stream = await pocketsphinx.createStream({ language: "en" });
    for (let i = 0; i < pcm.length; i += 512) await stream.write(pcm.subarray(i, i + 512));
    sphinx.push((await stream.finish()).text);
  }
  await pocketsphinx.close();
  const cases: {
    speech: string;
    from: LanguageCode;
    to: LanguageCode;
    clips: Clip[];
    heard: [string, string[]][];
  }[] = [];
  const spec = (clips: Clip[], language: string) => clips.map((clip) => ({ path: clip.path, language }));
  const texts = async (model: "whisper-tiny.en" | "whisper-base", clips: Clip[], language: string) =>
    (
      await python<{ text: string }[]>({
        do: "transcribe",
        model: realModelDir(model),
        clips: spec(clips, language),
      })
    ).map((r) => r.text);
  cases.push({
    speech: "LJSpeech (32 clips)",
    from: "en",
    to: "es",
    clips: lj,
    heard: [
      ["PocketSphinx", sphinx],
      ["whisper tiny.en", await texts("whisper-tiny.en", lj, "en")],
      ["whisper base", await texts("whisper-base", lj, "en")],
    ],
  });
  for (const [from, to] of directions.slice(1)) {
    const clips = fleursClips(from);
    cases.push({
      speech: `FLEURS ${from} (5 clips)`,
      from,
      to,
      clips,
      heard: [["whisper base", await texts("whisper-base", clips, from)]],
    });
  }
  for (const { speech, from, to, clips, heard } of cases) {
    const translate = async (inputs: readonly string[]) => {
      const out: string[] = [];
      for (const text of inputs) out.push(await apertium.translate({ text: plain(text), from, to }));
      return out;
    };
    const references = await translate(clips.map((clip) => clip.reference));
    for (const [recognizer, recognized] of heard) {
      const score = await python<{ bleu: number; chrf: number }>({
        do: "mt",
        references,
        hypotheses: await translate(recognized),
      });
      console.log(`| ${speech} | ${from}→${to} | ${recognizer} | ${f(score.bleu)} | ${f(score.chrf)} |`);
    }
  }
  await apertium.close();
}

async function voiceTable(): Promise<void> {
  const texts = readFileSync(path.join(FLORES, "en.txt"), "utf8").split("\n").slice(0, VOICE_SENTENCES);
  const dir = await mkdtemp(path.join(tmpdir(), "relay-quality-"));
  const models = path.join(dir, "models");
  // Piper's joe as a user installs it: imported from Piper's own layout, spoken by relay's sherpa-onnx engine.
  const joe = await importPiperVoice(
    path.join(realModelDir("piper-en_US-joe-medium"), "en_US-joe-medium.onnx"),
    models,
  );
  const pico = path.join(SHARED_DIR, "models/svox-pico");
  const voices: [string, TtsEngine][] = [
    ["eSpeak NG (en, relay's default female voice)", await createEspeakEngine()],
    ...(existsSync(pico)
      ? [["SVOX Pico (en-US)", await createSvoxPicoEngine({ lingwareDir: pico })] as [string, TtsEngine]]
      : []),
    [
      "Piper en_US-joe-medium (imported, sherpa-onnx)",
      await createSherpaTtsEngine({ models: neuralVoiceModels([joe.name], models) }),
    ],
  ];
  const speak = async (name: string, engine: TtsEngine) => {
    const paths: string[] = [];
    for (const [i, text] of texts.entries()) {
      const audio = await engine.synthesize({ text, language: "en", voice: defaultVoice("female") });
      const file = path.join(dir, `${name.split(" ")[0]}-${i}.wav`);
      await writeWavFloat32(file, audio);
      paths.push(file);
    }
    return paths;
  };
  console.log(
    `\n## Round trip of each voice: ${texts.length} English FLORES sentences, recognized by whisper base\n`,
  );
  console.log("| voice | words | WER |");
  console.log("| --- | --- | --- |");
  for (const [name, engine] of voices) {
    const files = await speak(name, engine);
    const heard = await python<{ text: string }[]>({
      do: "transcribe",
      model: realModelDir("whisper-base"),
      clips: files.map((file) => ({ path: file, language: "en" })),
    });
    const score = await python<{ wer: number; words: number }>({
      do: "wer",
      normalizer: "english",
      pairs: texts.map((text, i) => [text, heard[i]!.text]),
    });
    console.log(`| ${name} | ${score.words} | ${(score.wer * 100).toFixed(1)} % |`);
  }
  // Every engine closed, or its processes keep the script alive.
  await Promise.all(voices.map(([, engine]) => engine.close()));
  await rm(dir, { recursive: true, force: true });
}

const missing = realModelsProblem() ?? pythonEnvProblem("models");
if (missing) {
  console.error(`bench:quality: ${missing}`);
  process.exit(1);
}
const only = process.argv[2];
if (!only || only === "asr") await recognizerTable();
if (!only || only === "mt") await translationTable();
if (!only || only === "tts") await voiceTable();
