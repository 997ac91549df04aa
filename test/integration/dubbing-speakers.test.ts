/**
 * Dubbing follows the speakers of the source, through the real server (upload, job, worker, real
 * engines and ffmpeg): a two-person conversation built from real speech is dubbed with each
 * person's lines labelled with one speaker and voiced in one library voice of their gender
 * (`voice=auto`, the default); `voice=female` dubs every line in one voice; a bad `voice` is refused.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { encodeWav } from "../../src/audio/wav.js";
import { defaultVoice, findVoice } from "../../src/voices/library.js";
import { buildConversation, speakerOf, SPEAKERS, type Conversation } from "../support/conversations.js";
import { dubbingClient } from "../support/dubbing-client.js";
import { API_KEY, startServer, type TestServer } from "../support/server.js";
import { sharedMissing } from "../support/shared.js";

const SPEECH_MISSING =
  sharedMissing("data/speech/ljspeech/wavs") || sharedMissing("data/speech/librivox-pocketsphinx");
let server: TestServer;
let dir: string;
let conversation: Conversation;
let sourceUrl: string;

beforeAll(async () => {
  server = await startServer({ DUBBING_WORKERS: "1", RATE_LIMIT_PER_MINUTE: "1000" });
  if (SPEECH_MISSING) return;
  dir = await mkdtemp(path.join(tmpdir(), "relay-dub-speakers-"));
  // A man and a woman, three turns each (about 35 s).
  conversation = await buildConversation("librivox", "lj", { seed: 2, maxTurns: 3 });
  const wav = path.join(dir, "conversation.wav");
  await writeFile(wav, encodeWav(conversation.pcm));
  sourceUrl = await dubbingClient(server.baseUrl, API_KEY).upload(wav, "audio/wav");
});
afterAll(async () => {
  await server?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

interface Segment {
  start: number;
  end: number;
  speaker?: string;
  text: string;
  translated_text: string;
  voice_id?: number;
}

/** The person speaking most of a segment, from the conversation's truth. */
const personOf = (segment: Segment): string =>
  speakerOf(conversation, segment.start * 16_000, segment.end * 16_000) ?? "";

async function dub(body: Record<string, unknown>): Promise<Record<string, unknown>> {
  const client = dubbingClient(server.baseUrl, API_KEY);
  const created = await client.request("POST", "/api/dubbing/jobs", { source_url: sourceUrl, ...body });
  expect(created.status).toBe(201);
  const job = await client.finished(created.body.job_id as string);
  expect(job.status).toBe("completed");
  return job;
}

describe.skipIf(SPEECH_MISSING)("dubbing follows the speakers", () => {
  it("labels each person's lines with one speaker and dubs them in one voice of their gender", async () => {
    const job = await dub({ source_lang: "en", target_lang: "es" });
    expect(job.voice).toBe("auto");
    const segments = (job.segments as Segment[]).filter((s) => s.text !== "");
    expect(segments.length).toBeGreaterThanOrEqual(6);

    const labelOf = new Map<string, Set<string>>();
    const voiceOf = new Map<string, Set<number>>();
    for (const segment of segments) {
      expect(segment.speaker).toMatch(/^[1-9][0-9]*$/);
      const person = personOf(segment);
      labelOf.set(person, (labelOf.get(person) ?? new Set()).add(segment.speaker!));
      voiceOf.set(segment.speaker!, (voiceOf.get(segment.speaker!) ?? new Set()).add(segment.voice_id!));
    }
    // One label per person, different people different labels.
    expect([...labelOf.values()].map((labels) => labels.size)).toEqual([1, 1]);
    const [first, second] = [...labelOf.values()].map((labels) => [...labels][0]);
    expect(first).not.toBe(second);
    // One voice per speaker, of the person's gender, never a strong-accent voice.
    for (const [person, labels] of labelOf) {
      const voices = voiceOf.get([...labels][0]!)!;
      expect(voices.size).toBe(1);
      const voice = findVoice([...voices][0]!)!;
      expect(voice.gender).toBe(SPEAKERS[person as keyof typeof SPEAKERS].gender);
      expect(voice.strongAccent).toBe(false);
    }

    // The subtitles can name the speakers.
    const vtt = await fetch(
      new URL(
        `/api/dubbing/jobs/${job.job_id as string}/subtitles?track=translated&format=vtt&speakers=true`,
        server.baseUrl,
      ),
      { headers: { authorization: `Bearer ${API_KEY}` } },
    ).then((response) => response.text());
    expect(vtt).toMatch(new RegExp(`<v ${first}>`));
    expect(vtt).toMatch(new RegExp(`<v ${second}>`));
    const plain = await fetch(
      new URL(
        `/api/dubbing/jobs/${job.job_id as string}/subtitles?track=translated&format=srt`,
        server.baseUrl,
      ),
      { headers: { authorization: `Bearer ${API_KEY}` } },
    ).then((response) => response.text());
    expect(plain).not.toMatch(/^\d+: /mu);
  });

  it("voice=female dubs every line in the library's default female voice", async () => {
    const job = await dub({ source_lang: "en", target_lang: "es", voice: "female" });
    expect(job.voice).toBe("female");
    const ids = new Set((job.segments as Segment[]).filter((s) => s.text !== "").map((s) => s.voice_id));
    expect([...ids]).toEqual([defaultVoice("female").id]);
  });

  it("refuses a voice that is not auto, female, male or a library id", async () => {
    const client = dubbingClient(server.baseUrl, API_KEY);
    for (const voice of ["robot", 999, "0"]) {
      const { status, body } = await client.request("POST", "/api/dubbing/jobs", {
        source_url: sourceUrl,
        target_lang: "es",
        voice,
      });
      expect(status).toBe(400);
      expect((body.error as { code: string; message: string }).code).toBe("invalid_request");
      expect((body.error as { message: string }).message).toMatch(/voice/);
    }
  });
});
