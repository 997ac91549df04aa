import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { chromium, type Browser } from "playwright-core";

/** Debian's Chromium (npm run setup installs it), driven by playwright-core. */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

export const chromiumMissing = (): string | undefined =>
  existsSync(CHROMIUM) ? undefined : `no Chromium at ${CHROMIUM} (npm run setup installs Debian's chromium)`;

/**
 * Headless Chromium whose (fake) microphone plays `microphoneWav` in a loop: the fake capture file
 * belongs to the browser process, so each simulated person needs a browser of their own. WebRTC may
 * use loopback addresses (Chromium gathers no loopback ICE candidates otherwise), so the page
 * reaches a LiveKit server that runs on loopback only, as the tests' does.
 */
export function launchWithMicrophone(microphoneWav: string): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--use-fake-ui-for-media-stream",
      "--use-fake-device-for-media-stream",
      `--use-file-for-fake-audio-capture=${microphoneWav}`,
      "--autoplay-policy=no-user-gesture-required",
      "--allow-loopback-in-peer-connection",
    ],
  });
}

/**
 * `seconds` of `source` (or all of it) as a 16 kHz mono PCM16 WAV in `dir`, followed by `pauseSec` of
 * silence, so that each loop of the fake microphone is one utterance ended by a pause.
 */
export async function microphoneClip(
  source: string,
  dir: string,
  { seconds, pauseSec = 3 }: { seconds?: number; pauseSec?: number } = {},
): Promise<string> {
  const out = path.join(dir, `${path.basename(source, path.extname(source))}-microphone.wav`);
  await promisify(execFile)("ffmpeg", [
    ...["-hide_banner", "-loglevel", "error", "-y", "-i", source],
    ...(seconds ? ["-t", String(seconds)] : []),
    ...["-af", `apad=pad_dur=${pauseSec}`, "-ac", "1", "-ar", "16000", "-c:a", "pcm_s16le", out],
  ]);
  return out;
}
