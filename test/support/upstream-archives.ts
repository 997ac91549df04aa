/**
 * What upstream serves, built from stand-ins: the sherpa-onnx release assets `relay models pull`
 * downloads (a `.tar.bz2` per model, or a single `.onnx`), laid out exactly as
 * test/fixtures/upstream-layouts.json records the real ones (inner directory, file names, the fp32
 * and int8 copies, README, test_wavs, eSpeak NG's data as a real directory, no bpe.vocab in the
 * zipformer's), and a local server answering as GitHub's release downloads and Hugging Face's file
 * serving do (redirects, Range requests, the Hub's stated SHA-256).
 *
 * Archives are written entry by entry with node-tar's `Header` (and `Pax` for long names), so every
 * type, mode, owner and link target is exactly what a test asks for, hostile ones included (symbolic
 * and hard links, setuid bits, paths with `..`, a licence line with terminal escapes), and compressed
 * by python3's `bz2` module: nothing here needs a `bzip2` or `tar` program.
 *
 * The models are the stand-ins of test/support/stand-in-models/ (the right file formats and
 * metadata, made-up weights): an archive holds what the service loads, not what upstream's says.
 */
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { accessSync, constants, existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, symlink } from "node:fs/promises";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import path from "node:path";
import { Header, Pax, type HeaderData } from "tar";
import { encodeWav } from "../../src/audio/wav.js";
import { findMtModel } from "../../src/engines/transformers-js/catalogue.js";
import { findSherpaModel, type SherpaModelEntry } from "../../src/engines/sherpa-onnx/catalogue.js";
import { PROJECT_ROOT } from "./run-script.js";
import { SHARED_DIR } from "./shared.js";
import { writePunctuationStandIn } from "./stand-in-models/punctuation.js";
import { bpeModelForTokens } from "./stand-in-models/sentencepiece.js";
import { writeSpeakerEmbeddingStandIn } from "./stand-in-models/speaker-embedding.js";
import { writeStreamingTransducerStandIn } from "./stand-in-models/streaming-transducer.js";
import { installStandInTranslation } from "./stand-in-models/install.js";
import {
  buildVitsStandIn,
  findEspeakNgData,
  piperTokensText,
  type VitsStandInOptions,
} from "./stand-in-models/vits.js";

/** The fixture's record of one upstream sherpa-onnx download. */
interface SherpaLayout {
  readonly url: string;
  readonly archive: "tar.bz2" | "onnx";
  readonly innerDir: string | null;
  /** Paths in the inner directory; a trailing "/" marks a directory. */
  readonly files: readonly string[];
  readonly numSpeakers?: number;
  readonly sampleRate?: number;
  readonly noBpeVocab?: boolean;
  readonly licence?: { readonly stated?: string };
}

interface HuggingFaceLayout {
  readonly repo: string;
  readonly files: readonly string[];
}

interface Layouts {
  readonly sherpa: Readonly<Record<string, SherpaLayout>>;
  readonly huggingface: Readonly<Record<string, HuggingFaceLayout>>;
}

/** test/fixtures/upstream-layouts.json. */
export const UPSTREAM_LAYOUTS = JSON.parse(
  readFileSync(path.join(PROJECT_ROOT, "test/fixtures/upstream-layouts.json"), "utf8"),
) as Layouts;

/** One entry of a tar archive, as written. */
export interface ArchiveEntry {
  /** As it is written in the header: relative, absolute, with `..`: whatever the test needs. */
  readonly path: string;
  readonly type: "File" | "Directory" | "SymbolicLink" | "Link" | "FIFO" | "CharacterDevice";
  /** Default 0o644 for files, 0o755 for directories, 0o777 for links. */
  readonly mode?: number;
  readonly body?: Uint8Array | string;
  /** Target of a link, as written. */
  readonly linkpath?: string;
}

/** Ways to make an upstream archive differ from upstream's (all paths relative to the inner directory). */
export interface UpstreamArchiveOptions {
  /** Piper voices: the stand-in's options over the fixture's (speakers, eSpeak NG voice, language). */
  readonly voice?: Omit<VitsStandInOptions, "dir">;
  /** Replaces files of the layout (or, with null, leaves them out). */
  readonly files?: Readonly<Record<string, Uint8Array | string | null>>;
  /** The `License:` value of a Piper voice's MODEL_CARD, as it is (control characters included). */
  readonly licence?: string;
  /**
   * Symbolic-link entries → their targets. A link takes the place of what the layout has at its
   * path (the entries under it are left out); "" makes the inner directory itself a link, written
   * first, with the layout's entries after it (so an extractor that follows links writes them
   * through it).
   */
  readonly symlinks?: Readonly<Record<string, string>>;
  /** Hard-link entries → their link targets as written (another entry's archive path, or any path). */
  readonly hardLinks?: Readonly<Record<string, string>>;
  /** Modes of entries of the layout ("" is the inner directory), e.g. 0o4755 (setuid). */
  readonly modes?: Readonly<Record<string, number>>;
  /** Entries appended after the layout's, their paths as given (not under the inner directory). */
  readonly extraEntries?: readonly ArchiveEntry[];
}

/** A sherpa-onnx catalogue entry and its fixture record; throws for names the fixture lacks. */
function layoutOf(name: string): { entry: SherpaModelEntry; layout: SherpaLayout } {
  const entry = findSherpaModel(name);
  const layout = UPSTREAM_LAYOUTS.sherpa[name];
  if (!entry || !layout) throw new Error(`${name}: no sherpa-onnx catalogue entry or fixture layout`);
  if (layout.url !== entry.url) throw new Error(`${name}: the fixture's URL is not the catalogue's`);
  return { entry, layout };
}

/** Piper's language code ("en_US") → eSpeak NG voice, Piper's language name, eSpeak NG dictionary. */
const PIPER_LANGUAGES: Record<string, { voice: string; language: string; dict: string; english: string }> = {
  en_US: { voice: "en-us", language: "English", dict: "en", english: "English, United States" },
  en_GB: { voice: "en-gb", language: "English", dict: "en", english: "English, Great Britain" },
  es_ES: { voice: "es", language: "Spanish", dict: "es", english: "Spanish, Spain" },
  fr_FR: { voice: "fr", language: "French", dict: "fr", english: "French, France" },
  de_DE: { voice: "de", language: "German", dict: "de", english: "German, Germany" },
  it_IT: { voice: "it", language: "Italian", dict: "it", english: "Italian, Italy" },
  pt_BR: { voice: "pt-br", language: "Portuguese", dict: "pt", english: "Portuguese, Brazil" },
  ru_RU: { voice: "ru", language: "Russian", dict: "ru", english: "Russian, Russia" },
  zh_CN: { voice: "cmn", language: "Chinese", dict: "cmn", english: "Chinese, China" },
};

/**
 * Files of eSpeak NG's data a voice needs (Debian's copy): the phoneme tables, intonations, the
 * language definitions and the voice's dictionary. Upstream ships all 355 files (every dictionary);
 * the stand-ins need no more than these (about 1.5 MB instead of 13).
 */
function espeakNgFiles(dict: string): Map<string, Uint8Array> {
  const source = findEspeakNgData();
  const files = new Map<string, Uint8Array>();
  const add = (relative: string): void => {
    const full = path.join(source, relative);
    if (statSync(full).isDirectory()) {
      for (const name of readdirSync(full).sort()) add(path.posix.join(relative, name));
    } else {
      files.set(relative, readFileSync(full));
    }
  };
  for (const relative of ["phontab", "phonindex", "phondata", "phondata-manifest", "intonations"])
    add(relative);
  add(`${dict}_dict`);
  add("lang");
  return files;
}

/** Piper's MODEL_CARD, as rhasspy/piper-voices writes them. */
function piperModelCard(voice: string, speakers: number, sampleRate: number, stated: string): string {
  const [code, dataset, quality] = voice.split("-") as [string, string, string];
  const url = /https?:\/\/[^\s;]+/u.exec(stated)?.[0] ?? "https://example.org/dataset";
  const licenceText = /License:\s*([^;]+?)\s*(;|$)/u.exec(stated)?.[1] ?? "See URL";
  const training =
    /Training: '([^']+)'/u.exec(stated)?.[1] ?? "Finetuned from U.S. English lessac voice (medium quality).";
  return [
    `# Model card for ${dataset} (${quality})`,
    "",
    `* Language: ${code} (${PIPER_LANGUAGES[code]?.english ?? code})`,
    `* Speakers: ${speakers}`,
    `* Quality: ${quality}`,
    `* Samplerate: ${sampleRate.toLocaleString("en-US")}Hz`,
    "",
    "## Dataset",
    "",
    `* URL: ${url}`,
    `* License: ${licenceText}`,
    "",
    "## Training",
    "",
    training,
    "",
  ].join("\n");
}

/** Piper's `<voice>.onnx.json`: the config piper-phonemize and Piper read (sherpa-onnx does not). */
function piperConfig(voice: string, espeakVoice: string, speakers: number, sampleRate: number): string {
  const [code, dataset, quality] = voice.split("-") as [string, string, string];
  const phonemeIdMap: Record<string, number[]> = {};
  for (const line of piperTokensText().split("\n")) {
    if (line === "") continue;
    const space = line.lastIndexOf(" ");
    phonemeIdMap[line.slice(0, space)] ??= [Number(line.slice(space + 1))];
  }
  const [family, region] = code.split("_") as [string, string];
  return `${JSON.stringify(
    {
      dataset,
      audio: { sample_rate: sampleRate, quality },
      espeak: { voice: espeakVoice },
      language: { code, family, region },
      inference: { noise_scale: 0.667, length_scale: 1, noise_w: 0.8 },
      phoneme_type: "espeak",
      phoneme_map: {},
      phoneme_id_map: phonemeIdMap,
      num_symbols: 256,
      num_speakers: speakers,
      speaker_id_map:
        speakers > 1 ? Object.fromEntries(Array.from({ length: speakers }, (_, i) => [`${i}`, i])) : {},
      piper_version: "1.0.0",
    },
    null,
    4,
  )}\n`;
}

/** Short 16-bit WAVs cut from a real recording (JFK's), or a tone when the shared data is absent. */
function testWav(index: number, sampleRate: number): Uint8Array {
  const jfk = path.join(SHARED_DIR, "data/speech/misc/jfk.wav");
  const seconds = 1.5;
  const length = Math.round(seconds * sampleRate);
  const pcm = new Int16Array(length);
  if (existsSync(jfk)) {
    const bytes = readFileSync(jfk);
    // jfk.wav: 16 kHz mono PCM16, a 44-byte header.
    const source = new Int16Array(bytes.buffer, bytes.byteOffset + 44, (bytes.length - 44) >> 1);
    const step = 16_000 / sampleRate;
    const start = Math.round(index * seconds * 16_000);
    for (let i = 0; i < length; i++) pcm[i] = source[start + Math.floor(i * step)] ?? 0;
  } else {
    for (let i = 0; i < length; i++)
      pcm[i] = Math.round(8000 * Math.sin((2 * Math.PI * 220 * i) / sampleRate));
  }
  return encodeWav(pcm, sampleRate);
}

const README_ZIPFORMER =
  "# Introduction\n\nThis model is converted from\n" +
  "https://huggingface.co/Zengwei/icefall-asr-librispeech-streaming-zipformer-2023-05-17\n\n" +
  "See https://github.com/k2-fsa/icefall/pull/1058\n";
const README_PUNCT =
  "# Introduction\n\nModels in this directory are converted from\n" +
  "https://github.com/frankyoujian/Edge-Punct-Casing\n\n" +
  "You only need model.onnx + bpe.vocab, or model.int8.onnx + bpe.vocab.\n";
const EXPORT_SCRIPT =
  "#!/usr/bin/env bash\n\n# stand-in of upstream's export script\n" +
  "./zipformer/export-onnx-streaming.py --tokens ./data/lang_bpe_500/tokens.txt --use-averaged-model 0 \\\n" +
  "  --epoch 99 --avg 1 --exp-dir ./zipformer/exp --decode-chunk-len 32 --num-encoder-layers 2,2,3,4,3,2\n";

/** The layout's files and their contents (directories as null), by path in the inner directory. */
async function contentsOf(
  name: string,
  workDir: string,
  options: UpstreamArchiveOptions,
): Promise<Map<string, Uint8Array | null>> {
  const { entry, layout } = layoutOf(name);
  const contents = new Map<string, Uint8Array | null>();
  const scratch = await mkdtemp(path.join(workDir, "stand-in-"));
  try {
    switch (entry.kind) {
      case "streaming-asr": {
        const written = writeStreamingTransducerStandIn({ dir: scratch });
        const tokens = readFileSync(written.tokens, "utf8");
        const bytes = {
          encoder: readFileSync(written.encoder),
          decoder: readFileSync(written.decoder),
          joiner: readFileSync(written.joiner),
        };
        for (const file of layout.files) {
          const model = /^(encoder|decoder|joiner)-.*\.onnx$/u.exec(file);
          // The fp32 and int8 files: the same stand-in.
          if (model) contents.set(file, bytes[model[1] as keyof typeof bytes]);
          else if (file === "tokens.txt") contents.set(file, Buffer.from(tokens));
          else if (file === "bpe.model") contents.set(file, bpeModelForTokens(tokens));
          else if (file === "README.md") contents.set(file, Buffer.from(README_ZIPFORMER));
          else if (file.endsWith(".sh")) contents.set(file, Buffer.from(EXPORT_SCRIPT));
          else if (file.endsWith("/")) contents.set(file.slice(0, -1), null);
          else if (/^test_wavs\/.*\.wav$/u.test(file)) {
            const base = path.posix.basename(file, ".wav");
            contents.set(file, testWav(base === "8k" ? 2 : Number(base) || 0, base === "8k" ? 8000 : 16_000));
          } else throw new Error(`${name}: no stand-in for ${file}`);
        }
        if (layout.noBpeVocab && contents.has(entry.asr.bpeVocab))
          throw new Error(`${name}: the fixture says upstream ships no bpe.vocab`);
        break;
      }
      case "punctuation": {
        const written = writePunctuationStandIn({ dir: scratch });
        for (const file of layout.files) {
          if (file.endsWith(".onnx")) contents.set(file, readFileSync(written.model));
          else if (file === "bpe.vocab") contents.set(file, readFileSync(written.bpeVocab));
          else if (file === "README.md") contents.set(file, Buffer.from(README_PUNCT));
          else throw new Error(`${name}: no stand-in for ${file}`);
        }
        break;
      }
      case "tts": {
        if (entry.tts.kind !== "vits") throw new Error(`${name}: only Piper voices have stand-in archives`);
        const voice = entry.tts.model.replace(/\.onnx$/u, "");
        const language = PIPER_LANGUAGES[voice.split("-")[0]!];
        if (!language) throw new Error(`${name}: no eSpeak NG voice known for ${voice}`);
        const sampleRate = options.voice?.sampleRate ?? layout.sampleRate ?? 22_050;
        const speakers = options.voice?.speakers ?? layout.numSpeakers ?? 1;
        for (const file of layout.files) {
          if (file === entry.tts.model)
            contents.set(
              file,
              buildVitsStandIn({
                voice: language.voice,
                language: language.language,
                ...options.voice,
                sampleRate,
                speakers,
              }),
            );
          else if (file === `${entry.tts.model}.json`)
            contents.set(file, Buffer.from(piperConfig(voice, language.voice, speakers, sampleRate)));
          else if (file === entry.tts.tokens) contents.set(file, Buffer.from(piperTokensText()));
          else if (file === "MODEL_CARD")
            contents.set(
              file,
              Buffer.from(piperModelCard(voice, speakers, sampleRate, layout.licence?.stated ?? "")),
            );
          else if (file === "espeak-ng-data/") {
            contents.set("espeak-ng-data", null);
            for (const [relative, bytes] of espeakNgFiles(language.dict)) {
              // Its subdirectories (lang/…) as entries of their own, as tar writes them.
              const parts = relative.split("/");
              for (let depth = 1; depth < parts.length; depth++)
                if (!contents.has(`espeak-ng-data/${parts.slice(0, depth).join("/")}`))
                  contents.set(`espeak-ng-data/${parts.slice(0, depth).join("/")}`, null);
              contents.set(`espeak-ng-data/${relative}`, bytes);
            }
          } else throw new Error(`${name}: no stand-in for ${file}`);
        }
        break;
      }
      case "speaker":
        throw new Error(`${name} is a single .onnx upstream: use buildUpstreamFile`);
    }
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
  return contents;
}

/** Layout contents by name (and voice options): stand-ins are built once per process. */
const contentsCache = new Map<string, Promise<Map<string, Uint8Array | null>>>();

/**
 * The `.tar.bz2` upstream publishes for sherpa-onnx catalogue model `name`, holding stand-ins, laid
 * out as the fixture records it (`options` make it differ, for hostile-archive tests); `workDir`
 * takes scratch files. For a model upstream publishes as a single file (speaker-campplus-en) that
 * file: see `buildUpstreamFile`.
 */
export async function buildUpstreamArchive(
  name: string,
  workDir: string,
  options: UpstreamArchiveOptions = {},
): Promise<Buffer> {
  const { entry, layout } = layoutOf(name);
  if (layout.archive !== "tar.bz2") return buildUpstreamFile(name, workDir);
  if (!entry.file.endsWith(".tar.bz2") || layout.innerDir !== entry.dir)
    throw new Error(`${name}: the catalogue's file or directory is not the fixture's`);
  const key = `${name} ${JSON.stringify(options.voice ?? {})}`;
  if (!contentsCache.has(key)) contentsCache.set(key, contentsOf(name, workDir, options));
  const contents = new Map(await contentsCache.get(key)!);
  if (options.licence !== undefined && contents.has("MODEL_CARD")) {
    const card = Buffer.from(contents.get("MODEL_CARD")!).toString("utf8");
    contents.set(
      "MODEL_CARD",
      Buffer.from(card.replace(/^\* License: .*$/mu, () => `* License: ${options.licence}`)),
    );
  }
  for (const [file, body] of Object.entries(options.files ?? {})) {
    if (body === null) contents.delete(file);
    else contents.set(file, typeof body === "string" ? Buffer.from(body) : body);
  }
  const inner = layout.innerDir;
  const at = (relative: string) => (relative === "" ? `${inner}/` : `${inner}/${relative}`);
  const replaced = { ...options.symlinks, ...options.hardLinks };
  const under = (relative: string, top: string) =>
    top !== "" && (relative === top || relative.startsWith(`${top}/`));
  const entries: ArchiveEntry[] = [];
  if (options.symlinks?.[""] !== undefined)
    entries.push({ path: inner, type: "SymbolicLink", linkpath: options.symlinks[""] });
  else entries.push({ path: at(""), type: "Directory", mode: options.modes?.[""] ?? 0o755 });
  const placed = new Set<string>();
  const placeLinks = (relative: string): void => {
    for (const top of Object.keys(replaced)) {
      if (top === "" || placed.has(top) || !under(relative, top)) continue;
      placed.add(top);
      const symlinkTarget = options.symlinks?.[top];
      entries.push(
        symlinkTarget !== undefined
          ? { path: at(top), type: "SymbolicLink", linkpath: symlinkTarget }
          : { path: at(top), type: "Link", linkpath: options.hardLinks![top]! },
      );
    }
  };
  for (const [relative, body] of contents) {
    placeLinks(relative);
    if (Object.keys(replaced).some((top) => under(relative, top))) continue;
    const mode = options.modes?.[relative];
    entries.push(
      body === null
        ? { path: `${at(relative)}/`, type: "Directory", mode: mode ?? 0o755 }
        : {
            path: at(relative),
            type: "File",
            body,
            mode: mode ?? (relative.endsWith(".sh") ? 0o755 : 0o644),
          },
    );
  }
  // Links at paths the layout does not have go last, with the extra entries.
  for (const top of Object.keys(replaced)) if (top !== "" && !placed.has(top)) placeLinks(top);
  entries.push(...(options.extraEntries ?? []));
  return bzip2(tarOf(entries));
}

/** A model upstream publishes as a single file (speaker-campplus-en's `.onnx`): its stand-in. */
export async function buildUpstreamFile(name: string, workDir: string): Promise<Buffer> {
  const { entry, layout } = layoutOf(name);
  if (layout.archive !== "onnx" || entry.kind !== "speaker")
    throw new Error(`${name}: upstream publishes an archive, not a single file`);
  if (layout.files.length !== 1 || layout.files[0] !== entry.file)
    throw new Error(`${name}: the fixture's file is not the catalogue's`);
  const scratch = await mkdtemp(path.join(workDir, "stand-in-"));
  try {
    const { model } = writeSpeakerEmbeddingStandIn({ dir: scratch, framework: "3d-speaker" });
    if (path.basename(model) !== entry.file) throw new Error(`${name}: the stand-in's file name is ${model}`);
    return await readFile(model);
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

/** 2001-09-09: a fixed time, so equal archives are equal bytes. */
const MTIME = new Date(1_000_000_000_000);

/** A tar archive (ustar, pax records where a name does not fit) of `entries`, as GitHub's runners write it. */
export function tarOf(entries: readonly ArchiveEntry[]): Buffer {
  const blocks: Buffer[] = [];
  for (const entry of entries) {
    const body = entry.body === undefined ? Buffer.alloc(0) : Buffer.from(entry.body);
    const defaultMode = entry.type === "Directory" ? 0o755 : entry.type === "File" ? 0o644 : 0o777;
    const data: HeaderData = {
      path: entry.path,
      type: entry.type,
      mode: entry.mode ?? defaultMode,
      // Whoever packed it upstream (GitHub's runner): never kept on unpacking.
      uid: 1001,
      gid: 127,
      uname: "runner",
      gname: "docker",
      size: entry.type === "File" ? body.length : 0,
      mtime: MTIME,
      ...(entry.linkpath !== undefined ? { linkpath: entry.linkpath } : {}),
    };
    const block = Buffer.alloc(512);
    if (new Header(data).encode(block, 0)) {
      blocks.push(
        new Pax({
          path: entry.path,
          ...(entry.linkpath ? { linkpath: entry.linkpath } : {}),
          mtime: MTIME,
        }).encode(),
      );
    }
    blocks.push(block);
    if (entry.type === "File" && body.length > 0) {
      blocks.push(body, Buffer.alloc((512 - (body.length % 512)) % 512));
    }
  }
  // The end of the archive: two zero blocks (GNU tar pads to its 10 KiB record).
  blocks.push(Buffer.alloc(1024));
  const tar = Buffer.concat(blocks);
  return Buffer.concat([tar, Buffer.alloc((10_240 - (tar.length % 10_240)) % 10_240)]);
}

/** bzip2 by python3's bz2 module (level 9, as `bzip2` and `tar -cj` write). */
export function bzip2(data: Uint8Array): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      "python3",
      ["-c", "import bz2, sys; sys.stdout.buffer.write(bz2.compress(sys.stdin.buffer.read(), 9))"],
      { stdio: ["pipe", "pipe", "pipe"] },
    );
    const out: Buffer[] = [];
    let err = "";
    child.stdout.on("data", (chunk: Buffer) => out.push(chunk));
    child.stderr.on("data", (chunk: Buffer) => (err += chunk.toString()));
    child.on("error", reject);
    child.on("close", (code) =>
      code === 0 ? resolve(Buffer.concat(out)) : reject(new Error(`python3 bz2 failed (${code}): ${err}`)),
    );
    child.stdin.end(Buffer.from(data.buffer, data.byteOffset, data.byteLength));
  });
}

/**
 * A directory holding only a link to this node, for PATH: a process run with it finds `node` and
 * nothing else (no `bzip2`, no `tar`). Returns the directory.
 */
export async function nodeOnlyBin(dir: string): Promise<string> {
  const bin = path.join(dir, "node-only-bin");
  await mkdir(bin, { recursive: true });
  if (!existsSync(path.join(bin, "node"))) await symlink(process.execPath, path.join(bin, "node"));
  return bin;
}

/** Where `command` is found on `searchPath` (a PATH value), as a shell would find it; undefined if nowhere. */
export function whichOn(command: string, searchPath: string): string | undefined {
  for (const dir of searchPath.split(path.delimiter)) {
    if (dir === "") continue;
    const file = path.join(dir, command);
    try {
      accessSync(file, constants.X_OK);
      if (statSync(file).isFile()) return file;
    } catch {
      // not there
    }
  }
  return undefined;
}

/* ------------------------------------------------------------------------------------------------
 * The stand-in release server.
 * --------------------------------------------------------------------------------------------- */

/** A file upstream serves, by its official URL (a catalogue entry's `url`, or a Hub `resolve` URL). */
export interface ServedFile {
  readonly url: string;
  readonly body: Uint8Array;
}

/** A request the server answered. */
export interface ServedRequest {
  readonly method: string;
  /** "release" (github.com's path), "mirror" (`/<file>`), "asset" (the release's storage), "hub", "cdn", "unknown". */
  readonly kind: "release" | "mirror" | "asset" | "hub" | "cdn" | "unknown";
  readonly path: string;
  readonly range: string | undefined;
  readonly status: number;
}

export interface ReleaseServer {
  /** The base to set as RELAY_MODELS_BASE_URL (no trailing slash). */
  readonly url: string;
  readonly requests: ServedRequest[];
  /** Adds or replaces a file. */
  set(file: ServedFile): void;
  /** The next GET of this file's bytes sends about half of them, then the connection drops. */
  cutNext(url: string): void;
  close(): Promise<void>;
}

const GITHUB_RELEASE = /^\/k2-fsa\/sherpa-onnx\/releases\/download\/([^/]+)\/([^/]+)$/u;
const HUB_RESOLVE = /^\/(.+?\/.+?)\/resolve\/main\/(.+)$/u;
const ASSET = /^\/github-production-release-asset-2e65be\/(\d+)\/[0-9a-f-]+$/u;
const CDN = /^\/cdn\/([0-9a-f]{64})$/u;

interface Stored {
  readonly body: Buffer;
  readonly sha256: string;
  readonly gitSha1: string;
  /** Release asset id (GitHub), for the storage path. */
  readonly asset: number;
}

/**
 * A local stand-in of the two places models come from, for `RELAY_MODELS_BASE_URL`:
 *
 * - GitHub releases: `GET /k2-fsa/sherpa-onnx/releases/download/<tag>/<file>` answers 302 to the
 *   asset's storage (as github.com redirects to objects.githubusercontent.com, signed query and
 *   all), which serves the bytes with `Accept-Ranges`, honours `Range: bytes=N-` (206 with
 *   `Content-Range`, 416 past the end) and answers HEAD. Unknown files: 404.
 * - The mirror layout relay builds from RELAY_MODELS_BASE_URL (`<base>/<file>`: the base URL cannot
 *   say a release tag): `GET /<file>` answers 302 to the GitHub path above, so a pull through it
 *   follows both redirects as one from github.com does.
 * - Hugging Face: `/<repo>/resolve/main/<path>` serves a small (git) file directly with its git blob
 *   SHA-1 as ETag, and redirects an LFS file (`.onnx`) to `/cdn/<sha256>` stating its SHA-256 and
 *   size in `X-Linked-Etag` / `X-Linked-Size`, as the Hub does; the storage honours Range requests.
 */
export async function startReleaseServer(files: readonly ServedFile[]): Promise<ReleaseServer> {
  /** `gh:<tag>/<file>`, `mirror:<file>` (→ its tag), `hf:<repo>/<path>` → stored. */
  const byKey = new Map<string, Stored>();
  const mirrorTags = new Map<string, string>();
  const byAsset = new Map<number, Stored>();
  const bySha = new Map<string, Stored>();
  const cut = new Set<Buffer>();
  const requests: ServedRequest[] = [];
  let assets = 4_000_000;

  const set = ({ url, body }: ServedFile): void => {
    const parsed = new URL(url);
    const bytes = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
    const stored: Stored = {
      body: bytes,
      sha256: createHash("sha256").update(bytes).digest("hex"),
      gitSha1: createHash("sha1")
        .update(Buffer.concat([Buffer.from(`blob ${bytes.length}\0`), bytes]))
        .digest("hex"),
      asset: ++assets,
    };
    byAsset.set(stored.asset, stored);
    bySha.set(stored.sha256, stored);
    const release = parsed.hostname === "github.com" && GITHUB_RELEASE.exec(parsed.pathname);
    const hub = parsed.hostname === "huggingface.co" && HUB_RESOLVE.exec(parsed.pathname);
    if (release) {
      byKey.set(`gh:${release[1]}/${release[2]}`, stored);
      mirrorTags.set(release[2]!, release[1]!);
    } else if (hub) {
      byKey.set(`hf:${hub[1]}/${decodeURIComponent(hub[2]!)}`, stored);
    } else {
      throw new Error(`${url} is neither a sherpa-onnx release asset nor a Hugging Face file`);
    }
  };
  for (const file of files) set(file);

  let base = "";
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    const url = new URL(request.url ?? "/", "http://stand-in");
    const method = request.method ?? "GET";
    const log = (kind: ServedRequest["kind"], status: number) =>
      requests.push({ method, kind, path: url.pathname, range: request.headers.range, status });
    const notFound = (kind: ServedRequest["kind"]) => {
      log(kind, 404);
      response
        .writeHead(404, { "content-type": "text/plain" })
        .end(method === "HEAD" ? undefined : "Not Found");
    };
    const redirect = (
      kind: ServedRequest["kind"],
      location: string,
      headers: Record<string, string | number> = {},
    ) => {
      log(kind, 302);
      response
        .writeHead(302, { location, ...headers })
        .end(method === "HEAD" ? undefined : `Found. Redirecting to ${location}`);
    };
    const bytes = (kind: ServedRequest["kind"], stored: Stored, etag: string) => {
      const headers = {
        "accept-ranges": "bytes",
        "content-type": "application/octet-stream",
        "last-modified": MTIME.toUTCString(),
        etag,
      };
      if (method === "GET" && cut.delete(stored.body)) {
        // The connection drops mid-transfer: half the bytes arrive, then the socket closes (after a
        // pause, so the client has read them).
        log(kind, 200);
        response.writeHead(200, { ...headers, "content-length": stored.body.length });
        response.write(stored.body.subarray(0, Math.floor(stored.body.length / 2)), () =>
          setTimeout(() => response.destroy(), 250),
        );
        return;
      }
      const range = /^bytes=(\d+)-(\d*)$/u.exec(request.headers.range ?? "");
      const start = Number(range?.[1] ?? 0);
      const end = range?.[2] ? Math.min(Number(range[2]), stored.body.length - 1) : stored.body.length - 1;
      if (range && start >= stored.body.length) {
        log(kind, 416);
        response.writeHead(416, { ...headers, "content-range": `bytes */${stored.body.length}` }).end();
        return;
      }
      const part = stored.body.subarray(start, end + 1);
      log(kind, range ? 206 : 200);
      response.writeHead(range ? 206 : 200, {
        ...headers,
        "content-length": part.length,
        ...(range ? { "content-range": `bytes ${start}-${end}/${stored.body.length}` } : {}),
      });
      response.end(method === "HEAD" ? undefined : part);
    };

    const release = GITHUB_RELEASE.exec(url.pathname);
    if (release) {
      const stored = byKey.get(`gh:${release[1]}/${release[2]}`);
      if (!stored) return notFound("release");
      const file = encodeURIComponent(release[2]!);
      // As objects.githubusercontent.com's signed URLs look (the signature is not checked).
      const query =
        "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=STAND-IN%2F20260101%2Fus-east-1%2Fs3%2Faws4_request" +
        `&X-Amz-Date=20260101T000000Z&X-Amz-Expires=300&X-Amz-Signature=${stored.sha256}` +
        `&X-Amz-SignedHeaders=host&actor_id=0&key_id=0&repo_id=0` +
        `&response-content-disposition=attachment%3B%20filename%3D${file}&response-content-type=application%2Foctet-stream`;
      const uuid = `${stored.sha256.slice(0, 8)}-${stored.sha256.slice(8, 12)}-${stored.sha256.slice(12, 16)}-${stored.sha256.slice(16, 20)}-${stored.sha256.slice(20, 32)}`;
      return redirect(
        "release",
        `${base}/github-production-release-asset-2e65be/${stored.asset}/${uuid}?${query}`,
      );
    }
    const asset = ASSET.exec(url.pathname);
    if (asset) {
      const stored = byAsset.get(Number(asset[1]));
      if (!stored) return notFound("asset");
      return bytes("asset", stored, `"0x${stored.sha256.slice(0, 15).toUpperCase()}"`);
    }
    const cdn = CDN.exec(url.pathname);
    if (cdn) {
      const stored = bySha.get(cdn[1]!);
      if (!stored) return notFound("cdn");
      return bytes("cdn", stored, `"${stored.sha256}"`);
    }
    const hub = HUB_RESOLVE.exec(url.pathname);
    if (hub) {
      const file = decodeURIComponent(hub[2]!);
      const stored = byKey.get(`hf:${hub[1]}/${file}`);
      if (!stored) {
        log("hub", 404);
        response
          .writeHead(404, { "x-error-code": "EntryNotFound", "x-error-message": "Entry not found" })
          .end(method === "HEAD" ? undefined : "Entry not found");
        return;
      }
      const commit = { "x-repo-commit": "0123456789abcdef0123456789abcdef01234567" };
      if (!file.endsWith(".onnx")) {
        response.setHeader("x-repo-commit", commit["x-repo-commit"]);
        return bytes("hub", stored, `"${stored.gitSha1}"`);
      }
      // An LFS file: a redirect to its storage, stating its SHA-256 and size.
      return redirect("hub", `${base}/cdn/${stored.sha256}`, {
        "x-linked-etag": `"${stored.sha256}"`,
        "x-linked-size": stored.body.length,
        etag: `"${stored.sha256}"`,
        ...commit,
      });
    }
    const mirror = /^\/([^/]+)$/u.exec(url.pathname);
    const tag = mirror && mirrorTags.get(decodeURIComponent(mirror[1]!));
    if (mirror && tag) {
      return redirect("mirror", `${base}/k2-fsa/sherpa-onnx/releases/download/${tag}/${mirror[1]}`);
    }
    return notFound(mirror ? "mirror" : "unknown");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  return {
    url: base,
    requests,
    set,
    cutNext(url: string) {
      const parsed = new URL(url);
      const release = GITHUB_RELEASE.exec(parsed.pathname);
      const hub = HUB_RESOLVE.exec(parsed.pathname);
      const stored = release
        ? byKey.get(`gh:${release[1]}/${release[2]}`)
        : hub
          ? byKey.get(`hf:${hub[1]}/${decodeURIComponent(hub[2]!)}`)
          : undefined;
      if (!stored) throw new Error(`${url} is not served`);
      cut.add(stored.body);
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** The served file of a sherpa-onnx catalogue model: its archive (or single file) at its release URL. */
export async function sherpaReleaseFile(
  name: string,
  workDir: string,
  options: UpstreamArchiveOptions = {},
): Promise<ServedFile> {
  const { entry } = layoutOf(name);
  return { url: entry.url, body: await buildUpstreamArchive(name, workDir, options) };
}

/**
 * The Hub's files of translation catalogue model `name` (`<repo>/resolve/main/<file>`), holding its
 * stand-in (test/support/stand-in-models/translation.ts); each must be a file the fixture records in
 * the real repository.
 */
export async function huggingFaceFiles(name: string, workDir: string): Promise<ServedFile[]> {
  const entry = findMtModel(name);
  const layout = UPSTREAM_LAYOUTS.huggingface[name];
  if (!entry || !layout) throw new Error(`${name}: no translation catalogue entry or fixture layout`);
  if (layout.repo !== entry.repo) throw new Error(`${name}: the fixture's repository is not the catalogue's`);
  const dir = installStandInTranslation(await mkdtemp(path.join(workDir, "hub-")), name);
  const served: ServedFile[] = [];
  for (const file of entry.files) {
    if (!layout.files.includes(file)) throw new Error(`${name}: the fixture's ${entry.repo} has no ${file}`);
    if (!existsSync(path.join(dir, file))) continue;
    served.push({
      url: `https://huggingface.co/${entry.repo}/resolve/main/${file}`,
      body: await readFile(path.join(dir, file)),
    });
  }
  return served;
}
