import { existsSync } from "node:fs";
import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import {
  dubMedia,
  DUB_STAGES,
  MediaTooShortError,
  probe,
  runFfmpeg,
  UnsupportedFormatError,
  UnsupportedLanguageError,
  type DubResult,
  type DubStage,
} from "../../src/dubbing/index.js";
import { EngineRegistry } from "../../src/engines/routing/registry.js";
import { sharedMissing, sharedPath } from "../support/shared.js";

const CLIPS = "librivox-pocketsphinx";
const SPEECH_MISSING = sharedMissing("data", "speech", CLIPS);
const ANALYSIS_RATE = 16_000;
const TONE_HZ = 220;

/** Mono float samples of a file's first audio track at 16 kHz. */
async function decodeMono(file: string): Promise<Float32Array> {
  const { stdout } = await runFfmpeg(
    ["-i", file, "-map", "0:a:0", "-ac", "1", "-ar", String(ANALYSIS_RATE), "-f", "f32le", "pipe:1"],
    { timeoutMs: 60_000 },
  );
  const aligned = new Uint8Array(stdout.length & ~3);
  aligned.set(stdout.subarray(0, aligned.length));
  return new Float32Array(aligned.buffer);
}

/** MD5 of the first video stream's packets (what `-c copy` carries over byte for byte). */
async function videoPacketsMd5(file: string): Promise<string> {
  const { stdout } = await runFfmpeg(["-i", file, "-map", "0:v:0", "-c", "copy", "-f", "md5", "pipe:1"], {
    timeoutMs: 60_000,
  });
  return stdout.toString("utf8").trim();
}

const slice = (samples: Float32Array, startSec: number, endSec: number): Float32Array =>
  samples.subarray(Math.round(startSec * ANALYSIS_RATE), Math.round(endSec * ANALYSIS_RATE));

function rms(samples: Float32Array): number {
  let sum = 0;
  for (const s of samples) sum += s * s;
  return Math.sqrt(sum / Math.max(1, samples.length));
}

function difference(a: Float32Array, b: Float32Array): Float32Array {
  const out = new Float32Array(Math.min(a.length, b.length));
  for (let i = 0; i < out.length; i++) out[i] = a[i]! - b[i]!;
  return out;
}

/** Amplitude of one frequency (single-bin DFT): the background tone's level. */
function toneAmplitude(samples: Float32Array, frequency: number): number {
  let re = 0;
  let im = 0;
  for (let n = 0; n < samples.length; n++) {
    const phase = (2 * Math.PI * frequency * n) / ANALYSIS_RATE;
    re += samples[n]! * Math.cos(phase);
    im -= samples[n]! * Math.sin(phase);
  }
  return (2 * Math.hypot(re, im)) / Math.max(1, samples.length);
}

describe.skipIf(SPEECH_MISSING)("dubbing pipeline (real engines and ffmpeg)", () => {
  let registry: EngineRegistry;
  let dir: string;
  const input = {
    wav: "",
    h264: "",
    mpeg4: "",
    text: "",
    silent: "",
    videoOnly: "",
  };
  let durationSec = 0;

  beforeAll(async () => {
    registry = await EngineRegistry.create(loadConfig({ LOG_LEVEL: "silent" }).engines);
    dir = await mkdtemp(path.join(tmpdir(), "dubbing-test-"));
    for (const key of Object.keys(input) as (keyof typeof input)[]) {
      input[key] = path.join(
        dir,
        {
          wav: "in.wav",
          h264: "h264.mp4",
          mpeg4: "mpeg4.mp4",
          text: "notes.mp4",
          silent: "silent.wav",
          videoOnly: "video-only.mp4",
        }[key],
      );
    }
    const ffmpeg = (args: string[]) => runFfmpeg(args, { timeoutMs: 60_000 });
    // 1 s pause, "go forward ten meters", 1 s pause, the Austen sentence, 1 s pause — over a quiet
    // 220 Hz tone standing in for background music (sine's amplitude is 1/8; × 0.25 ≈ -30 dBFS).
    await ffmpeg([
      "-i",
      sharedPath("data", "speech", CLIPS, "goforward.wav"),
      "-i",
      sharedPath("data", "speech", CLIPS, "sense_and_sensibility_01_austen_64kb-0870.wav"),
      "-filter_complex",
      [
        "anullsrc=r=44100:cl=mono,atrim=duration=1[lead]",
        "[0]aresample=44100,apad=pad_dur=1[first]",
        "[1]aresample=44100,apad=pad_dur=1[second]",
        "[lead][first][second]concat=n=3:v=0:a=1,aformat=sample_fmts=fltp:channel_layouts=mono[speech]",
        `sine=frequency=${TONE_HZ}:sample_rate=44100:duration=60,volume=0.25,aformat=sample_fmts=fltp:channel_layouts=mono[tone]`,
        "[speech][tone]amerge=inputs=2,pan=stereo|c0=c0+c1|c1=c0+c1[out]",
      ].join(";"),
      "-map",
      "[out]",
      "-c:a",
      "pcm_s16le",
      input.wav,
    ]);
    durationSec = (await probe(input.wav)).durationSec;
    const video = (codec: string[], output: string) =>
      ffmpeg([
        "-f",
        "lavfi",
        "-i",
        `testsrc=size=320x240:rate=25:duration=${durationSec.toFixed(2)}`,
        "-i",
        input.wav,
        "-map",
        "0:v",
        "-map",
        "1:a",
        ...codec,
        "-c:a",
        "aac",
        "-b:a",
        "128k",
        output,
      ]);
    await video(["-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p"], input.h264);
    await video(["-c:v", "mpeg4", "-q:v", "5"], input.mpeg4);
    await ffmpeg(["-f", "lavfi", "-i", "anullsrc=r=16000:cl=mono", "-t", "0.5", input.silent]);
    await ffmpeg([
      "-f",
      "lavfi",
      "-i",
      "testsrc=size=160x120:rate=25:duration=2",
      "-c:v",
      "libx264",
      input.videoOnly,
    ]);
    await writeFile(input.text, "These are meeting notes, not a video.\n".repeat(200));
  });

  afterAll(async () => {
    await registry?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  async function dub(file: string, name: string, sourceLang = "en") {
    const events: { stage: DubStage; fraction: number }[] = [];
    const result = await dubMedia({
      inputPath: file,
      outputDir: path.join(dir, `out-${name}`),
      registry,
      sourceLang,
      targetLang: "es",
      onProgress: (stage, fraction) => events.push({ stage, fraction }),
    });
    return { result, events };
  }

  function expectSegments(result: DubResult): void {
    const forward = result.segments.find((s) => s.text.includes("go forward ten meters"));
    expect(forward, JSON.stringify(result.segments)).toBeDefined();
    expect(forward!.translatedText.toLowerCase()).toContain("metros");
    expect(result.segments.some((s) => s.text.includes("dashwood"))).toBe(true);
    for (const [i, segment] of result.segments.entries()) {
      expect(segment.endSec).toBeGreaterThan(segment.startSec);
      expect(segment.translatedText).not.toBe("");
      const next = result.segments[i + 1];
      if (next) expect(segment.endSec).toBeLessThanOrEqual(next.startSec);
    }
  }

  /**
   * The dubbed audio differs from the original under the "go forward" segment, while in the pause
   * after it (outside every ducked span) the output matches the original: the 220 Hz background
   * tone is still there at its level.
   */
  async function expectDucking(result: DubResult): Promise<void> {
    const original = await decodeMono(input.wav);
    const dubbed = await decodeMono(result.outputPath);
    const index = result.segments.findIndex((s) => s.text.includes("go forward"));
    const segment = result.segments[index]!;
    const placement = result.timeline[index]!;
    const next = result.segments[index + 1]!;

    const under = [segment.startSec, segment.endSec] as const;
    const changed = rms(difference(slice(dubbed, ...under), slice(original, ...under)));
    expect(changed).toBeGreaterThan(0.5 * rms(slice(original, ...under)));

    // 80 ms ramps plus margin on both sides of the pause.
    const gapStart = Math.max(segment.endSec, placement.startSec + placement.durationSec) + 0.15;
    const gapEnd = next.startSec - 0.15;
    expect(gapEnd - gapStart).toBeGreaterThan(0.3);
    const gapOriginal = slice(original, gapStart, gapEnd);
    const gapDubbed = slice(dubbed, gapStart, gapEnd);
    const toneOriginal = toneAmplitude(gapOriginal, TONE_HZ);
    expect(toneOriginal).toBeGreaterThan(0.01);
    expect(toneAmplitude(gapDubbed, TONE_HZ) / toneOriginal).toBeGreaterThan(0.89); // within 1 dB
    expect(toneAmplitude(gapDubbed, TONE_HZ) / toneOriginal).toBeLessThan(1.12);
    // Sample-aligned and otherwise unchanged there (only lossy coding noise remains).
    expect(rms(difference(gapDubbed, gapOriginal))).toBeLessThan(0.1 * rms(gapOriginal));
  }

  function expectProgress(events: { stage: DubStage; fraction: number }[]): void {
    const order = DUB_STAGES.map((s) => s.stage);
    let stageIndex = -1;
    let last = -1;
    for (const { stage, fraction } of events) {
      const index = order.indexOf(stage);
      expect(index).toBeGreaterThanOrEqual(stageIndex);
      if (index > stageIndex) {
        stageIndex = index;
        last = -1;
      }
      expect(fraction).toBeGreaterThan(last);
      expect(fraction).toBeLessThanOrEqual(1);
      last = fraction;
    }
    for (const stage of order) {
      expect(events.filter((e) => e.stage === stage).at(-1)?.fraction, stage).toBe(1);
    }
  }

  it("dubs an H.264 MP4: video packets copied, AAC audio, same duration, Spanish segments", async () => {
    const { result, events } = await dub(input.h264, "h264");
    expect(result.outputKind).toBe("video");
    expect(path.extname(result.outputPath)).toBe(".mp4");
    expect(result.detectedSourceLang).toBe("en");
    const [inInfo, outInfo] = await Promise.all([probe(input.h264), probe(result.outputPath)]);
    expect(result.inputDurationSec).toBeCloseTo(inInfo.durationSec, 6);
    expect(outInfo.videoCodec).toBe("h264");
    expect(outInfo.audioCodec).toBe("aac");
    expect(Math.abs(outInfo.durationSec - inInfo.durationSec)).toBeLessThanOrEqual(0.2);
    expect(await videoPacketsMd5(result.outputPath)).toBe(await videoPacketsMd5(input.h264));
    expectSegments(result);
    await expectDucking(result);
    expectProgress(events);
    // Nothing but the output is left in the output directory.
    expect(await readdir(path.dirname(result.outputPath))).toEqual(["dubbed.mp4"]);
  });

  it("re-encodes MPEG-4 Part 2 video to H.264", async () => {
    const { result } = await dub(input.mpeg4, "mpeg4");
    const outInfo = await probe(result.outputPath);
    expect(result.outputKind).toBe("video");
    expect(outInfo.videoCodec).toBe("h264");
    expect(outInfo.audioCodec).toBe("aac");
    expect(Math.abs(outInfo.durationSec - result.inputDurationSec)).toBeLessThanOrEqual(0.2);
    expectSegments(result);
  });

  it("dubs an audio-only WAV to MP3, detecting the source language", async () => {
    const { result, events } = await dub(input.wav, "wav", "auto");
    expect(result.outputKind).toBe("audio");
    expect(path.extname(result.outputPath)).toBe(".mp3");
    expect(result.detectedSourceLang).toBe("en");
    const outInfo = await probe(result.outputPath);
    expect(outInfo.hasVideo).toBe(false);
    expect(outInfo.audioCodec).toBe("mp3");
    expect(Math.abs(outInfo.durationSec - durationSec)).toBeLessThanOrEqual(0.2);
    expectSegments(result);
    await expectDucking(result);
    expectProgress(events);
  });

  it("rejects a file that is not media, a too short input, a video without audio and a playlist", async () => {
    await expect(probe(input.text)).rejects.toBeInstanceOf(UnsupportedFormatError);
    await expect(dub(input.text, "text")).rejects.toBeInstanceOf(UnsupportedFormatError);
    await expect(dub(input.silent, "silent")).rejects.toBeInstanceOf(MediaTooShortError);
    const noAudio = dub(input.videoOnly, "video-only");
    await expect(noAudio).rejects.toBeInstanceOf(UnsupportedFormatError);
    await expect(noAudio).rejects.toThrow(/no audio track/);
    // A list pointing at other files is refused even though they are perfectly good audio.
    const playlist = path.join(dir, "list.txt");
    await writeFile(playlist, `ffconcat version 1.0\nfile ${path.basename(input.wav)}\n`);
    await expect(dub(playlist, "playlist")).rejects.toBeInstanceOf(UnsupportedFormatError);
    for (const name of ["text", "silent", "video-only", "playlist"]) {
      expect(existsSync(path.join(dir, `out-${name}`, "dubbed.mp4"))).toBe(false);
    }
  });

  it("refuses languages the engines cannot serve before touching the media", async () => {
    const attempt = (sourceLang: string, targetLang: string) =>
      dubMedia({
        inputPath: input.wav,
        outputDir: path.join(dir, "out-lang"),
        registry,
        sourceLang,
        targetLang,
      });
    await expect(attempt("en", "xx")).rejects.toBeInstanceOf(UnsupportedLanguageError);
    await expect(attempt("xx", "es")).rejects.toBeInstanceOf(UnsupportedLanguageError);
    expect(existsSync(path.join(dir, "out-lang"))).toBe(false);
  });

  it("stops when aborted and leaves no files behind", async () => {
    const controller = new AbortController();
    const outputDir = path.join(dir, "out-aborted");
    const run = dubMedia({
      inputPath: input.h264,
      outputDir,
      registry,
      sourceLang: "en",
      targetLang: "es",
      signal: controller.signal,
      onProgress: (stage) => {
        if (stage === "recognizing") controller.abort();
      },
    });
    await expect(run).rejects.toThrow(/abort/i);
    expect(await readdir(outputDir)).toEqual([]);
  });
});
