import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { encodeWav, readWavAsPcm16 } from "../../src/audio/wav.js";
import { dubMedia } from "../../src/dubbing/index.js";
import { createSession, RealtimeSocket, type ServerMessage } from "../../src/cli/recording-socket.js";
import { sharedMissing, sharedPath } from "../support/shared.js";
import { wordEdits } from "../../src/engines/kit/models/check-metrics.js";
import { recordingsOf } from "../support/recordings.js";
import { API_KEY, startServer, type TestServer } from "../support/server.js";

/**
 * Level handling through the real server and the real engines (Silero VAD, PocketSphinx): a quiet
 * copy of a recording (peaks at -50 dBFS, what a laptop microphone often delivers) must be heard as
 * the recording itself is, and a loud copy (pushed 2 dB past full scale, so slightly clipped) must
 * still be heard utterance for utterance.
 *
 * Transcripts are judged against the reference text, with the full-level recording as the baseline,
 * not against the full-level transcript itself: PocketSphinx gets about 40 % of these words wrong at
 * full level and is level-sensitive on its own (the loud copy, which the level stage passes untouched,
 * already differs from the full-level transcript in about 30 % of its words), so a word-for-word
 * match with the full-level transcript would measure the recognizer, not the level stage.
 */
const LIBRIVOX = "data/speech/librivox-pocketsphinx";
const JFK = "data/speech/misc/jfk.wav";
const SPEECH_MISSING = sharedMissing(LIBRIVOX) || sharedMissing(JFK);

/**
 * The quiet copy may miss at most this many more reference words than the full-level recording: a
 * level change alone moves PocketSphinx by up to 3 words on these clips (measured on the loud copy).
 */
const EXTRA_WORD_ERRORS = 3;
/**
 * An utterance of a quiet copy may open this much later than at full level (the gain needs its first
 * syllables to rise; 160 ms measured): less than the 300 ms pre-roll, so its first phoneme is still
 * in what the recognizer gets.
 */
const ONSET_DELAY_MS = 250;

let server: TestServer;
let marker: Int16Array;
/** Reference words of each LibriVox clip (the shared `transcription` file, plus goforward.wav's). */
const references = new Map<string, string[]>([
  [`${LIBRIVOX}/goforward.wav`, ["go", "forward", "ten", "meters"]],
]);

beforeAll(async () => {
  server = await startServer({ MAX_SESSIONS: "8" });
  if (SPEECH_MISSING) return;
  marker = await readWavAsPcm16(sharedPath(`${LIBRIVOX}/goforward.wav`));
  for (const line of (await readFile(sharedPath(LIBRIVOX, "transcription"), "utf8")).trim().split("\n")) {
    const [, text, name] = /<s> (.*) <\/s> \((.*)\)/u.exec(line)!;
    references.set(`${LIBRIVOX}/${name}.wav`, text!.split(" "));
  }
});
afterAll(async () => {
  await server?.close();
});

/** The recording scaled so its peak sits at `peakDbfs`, as PCM16 (clamped: above 0 dBFS it clips). */
function atPeak(pcm: Int16Array, peakDbfs: number): Int16Array {
  const peak = pcm.reduce((max, s) => Math.max(max, Math.abs(s)), 0);
  const scale = (32_767 * 10 ** (peakDbfs / 20)) / peak;
  return Int16Array.from(pcm, (s) => Math.max(-32_768, Math.min(32_767, Math.round(s * scale))));
}

interface Utterance {
  readonly text: string;
  readonly startMs: number;
}

/**
 * The utterances one session hears in `pcm` (sentence mode: one final per utterance; relay-2 for
 * positions). A second of digital silence follows, so the VAD ends the last utterance, then a
 * full-level marker utterance: recognition is sequential, so once the marker's final is out, every
 * final of the recording is. The level stage is causal: the marker cannot change what came before.
 */
async function hear(pcm: Int16Array): Promise<Utterance[]> {
  const session = await createSession(server.baseUrl, API_KEY, {
    modelName: "relay-2",
    finalizeMode: "sentence",
    audioOutputEnabled: "false",
  });
  const socket = await RealtimeSocket.connect(session.ws_url);
  await socket.waitFor((m) => m.type === "ready");
  const markerAt = pcm.length + 16_000;
  const audio = new Int16Array(markerAt + marker.length);
  audio.set(pcm);
  audio.set(marker, markerAt);
  await socket.stream(audio, { chunkMs: 20, speed: 2 });
  socket.finalize();
  const isFinal = (m: ServerMessage): boolean => m.type === "original_transcript" && m.is_final === true;
  // The marker's utterance opens at most the 300 ms pre-roll before it.
  const markerMs = markerAt / 16 - 300;
  await socket.waitFor((m) => isFinal(m) && (m.start_ms as number) >= markerMs, 45_000);
  socket.close();
  return socket.messages
    .filter((m) => isFinal(m) && (m.start_ms as number) < markerMs)
    .map((m) => ({ text: m.text as string, startMs: m.start_ms as number }));
}

/** The recording, its quiet copy (peaks at -50 dBFS) and its loud one, each in its own session. */
async function hearCopies(pcm: Int16Array): Promise<Record<"full" | "quiet" | "loud", Utterance[]>> {
  const [full, quiet, loud] = await Promise.all([hear(pcm), hear(atPeak(pcm, -50)), hear(atPeak(pcm, 2))]);
  return { full, quiet, loud };
}

/** Words as the reference spells them ("mr" is "mister" there; PocketSphinx writes "s." for a letter). */
function wordsOf(utterances: readonly Utterance[]): string[] {
  return utterances
    .flatMap((u) => u.text.split(/\s+/u))
    .map((word) => word.replace(/^mr$/u, "mister").replace(/\./gu, ""))
    .filter(Boolean);
}

/** Same number of utterances, each opening where (or just after) the full-level one does. */
function expectSameUtterances(heard: readonly Utterance[], full: readonly Utterance[], copy: string): void {
  const summary = JSON.stringify({ full, [copy]: heard });
  expect(heard.length, `${copy} copy: utterances ${summary}`).toBe(full.length);
  heard.forEach((utterance, i) => {
    const delay = utterance.startMs - full[i]!.startMs;
    // Two 32 ms VAD windows earlier at most: a boosted onset can cross the threshold sooner.
    expect(delay, `${copy} onset ${summary}`).toBeGreaterThanOrEqual(-64);
    expect(delay, `${copy} onset ${summary}`).toBeLessThanOrEqual(ONSET_DELAY_MS);
  });
}

const ALL_CLIPS = [
  "goforward.wav",
  "sense_and_sensibility_01_austen_64kb-0870.wav",
  "sense_and_sensibility_01_austen_64kb-0880.wav",
  "sense_and_sensibility_01_austen_64kb-0890.wav",
  "sense_and_sensibility_01_austen_64kb-0920.wav",
  "sense_and_sensibility_01_austen_64kb-0930.wav",
].map((name) => `${LIBRIVOX}/${name}`);
/**
 * By default a short command and a long reading (the one with most utterances); RELAY_TEST_FULL=1
 * replays all six (test/support/recordings.ts).
 */
const CLIPS = recordingsOf(ALL_CLIPS, [ALL_CLIPS[0]!, ALL_CLIPS[2]!]);

describe.skipIf(SPEECH_MISSING)("quiet (-50 dBFS peak) and loud (clipped) microphones", () => {
  it.each(CLIPS)(
    "%s: the same utterances, and the quiet copy's words as accurate as at full level",
    async (clip) => {
      const pcm = await readWavAsPcm16(sharedPath(clip));
      const { full, quiet, loud } = await hearCopies(pcm);
      expect(full.length).toBeGreaterThan(0);
      expectSameUtterances(quiet, full, "quiet");
      expectSameUtterances(loud, full, "loud");
      const reference = references.get(clip)!;
      const fullErrors = wordEdits(reference, wordsOf(full));
      expect(
        wordEdits(reference, wordsOf(quiet)),
        `reference "${reference.join(" ")}", full level "${wordsOf(full).join(" ")}" (${fullErrors} errors), quiet "${wordsOf(quiet).join(" ")}"`,
      ).toBeLessThanOrEqual(fullErrors + EXTRA_WORD_ERRORS);
    },
  );

  // Crowd noise and reverberation: PocketSphinx's words are unreliable here at any level, but the
  // four utterances must all be heard.
  it("jfk.wav: the same four utterances", async () => {
    const pcm = await readWavAsPcm16(sharedPath(JFK));
    const { full, quiet, loud } = await hearCopies(pcm);
    expect(full.length).toBe(4);
    expectSameUtterances(quiet, full, "quiet");
    expectSameUtterances(loud, full, "loud");
  });

  // Dubbing levels the whole speech track before its VAD and recognizer (src/dubbing/media/speech-audio.ts).
  it("dubbing: a quiet recording is segmented and recognized as the full-level one", async () => {
    const clips = [ALL_CLIPS[0]!, ALL_CLIPS[1]!];
    const recordings = await Promise.all(clips.map((clip) => readWavAsPcm16(sharedPath(clip))));
    const reference = clips.flatMap((clip) => references.get(clip)!);
    /** A second of silence, then each recording followed by a second of silence. */
    const program = (parts: Int16Array[]): Int16Array => {
      const pause = 16_000;
      const out = new Int16Array(pause + parts.reduce((sum, part) => sum + part.length + pause, 0));
      let offset = pause;
      for (const part of parts) {
        out.set(part, offset);
        offset += part.length + pause;
      }
      return out;
    };
    const dir = await mkdtemp(path.join(tmpdir(), "quiet-dub-"));
    try {
      const dub = async (name: string, pcm: Int16Array) => {
        const inputPath = path.join(dir, `${name}.wav`);
        await writeFile(inputPath, encodeWav(pcm));
        const result = await dubMedia({
          inputPath,
          outputDir: path.join(dir, name),
          registry: server.registry,
          sourceLang: "en",
          targetLang: "es",
        });
        // Segments are the spans the recognizer heard words in, tightened to the words.
        return result.segments.map((s) => ({ text: s.text, startMs: Math.round(s.startSec * 1000) }));
      };
      const full = await dub("full", program(recordings));
      const quiet = await dub("quiet", program(recordings.map((pcm) => atPeak(pcm, -50))));
      expectSameUtterances(quiet, full, "quiet");
      const fullErrors = wordEdits(reference, wordsOf(full));
      expect(
        wordEdits(reference, wordsOf(quiet)),
        `full level "${wordsOf(full).join(" ")}" (${fullErrors} errors), quiet "${wordsOf(quiet).join(" ")}"`,
      ).toBeLessThanOrEqual(fullErrors + EXTRA_WORD_ERRORS);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
