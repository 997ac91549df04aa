/**
 * The audio files `relay live` reads: WAV in any PCM or float encoding decoded here, anything else
 * (MP3, Ogg, FLAC, M4A, a compressed WAV, a video's sound track) through ffmpeg, as `relay dub`
 * reads its input. What neither can decode is refused with what it is.
 */
import { open } from "node:fs/promises";
import { INPUT_SAMPLE_RATE } from "@relay-translate/client/protocol";
import { isWav, readWavAsPcm16, UnsupportedWavError } from "../audio/wav.js";
import { inputArgs, runFfmpeg } from "../dubbing/media/ffmpeg.js";
import { CliError } from "./network.js";

/** ffmpeg's decode of a file of up to this length (an hour of audio takes a few seconds). */
const DECODE_TIMEOUT_MS = 120_000;

/** `file` as PCM16 mono at `sampleRate`. */
export async function readAudioInput(file: string, sampleRate = INPUT_SAMPLE_RATE): Promise<Int16Array> {
  const head = new Uint8Array(12);
  const cannotRead = (error: NodeJS.ErrnoException): never => {
    throw new CliError(`cannot read ${file} (${error.code ?? error.message})`);
  };
  const handle = await open(file, "r").catch(cannotRead);
  try {
    // A directory opens like a file; reading it is what fails.
    if ((await handle.stat()).isDirectory()) throw new CliError(`${file} is a directory; pass an audio file`);
    await handle.read(head, 0, head.length, 0).catch(cannotRead);
  } finally {
    await handle.close();
  }
  let what = "not a WAV file";
  if (isWav(head)) {
    try {
      return await readWavAsPcm16(file, sampleRate);
    } catch (error) {
      if (!(error instanceof UnsupportedWavError))
        throw new CliError(`${file} is a damaged WAV file (${(error as Error).message})`);
      what = error.message;
    }
  }
  return decodeWithFfmpeg(file, sampleRate, what);
}

async function decodeWithFfmpeg(file: string, sampleRate: number, what: string): Promise<Int16Array> {
  let stdout: Buffer;
  try {
    ({ stdout } = await runFfmpeg(
      [...inputArgs(file), "-vn", "-ac", "1", "-ar", String(sampleRate), "-f", "s16le", "pipe:1"],
      { timeoutMs: DECODE_TIMEOUT_MS },
    ));
  } catch (error) {
    const reason = (error as Error).message.split("\n").at(-1) ?? "";
    if ((error as NodeJS.ErrnoException).code === "ENOENT" || /ENOENT/u.test(reason))
      throw new CliError(
        `${file} is ${what}: install ffmpeg to read it (\`apt-get install ffmpeg\`), or convert it to WAV`,
      );
    throw new CliError(`${file} is ${what}, and ffmpeg cannot decode it either (${reason})`);
  }
  if (stdout.length < 2) throw new CliError(`${file} has no audio that ffmpeg can decode`);
  return new Int16Array(stdout.buffer.slice(stdout.byteOffset, stdout.byteOffset + (stdout.length & ~1)));
}
