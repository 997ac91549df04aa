/**
 * `context` on the default stack (PocketSphinx, Apertium, eSpeak NG) through the real service: a
 * LJSpeech reading that PocketSphinx hears as "… not only in italy but in germany and france" is
 * translated with the context's names kept as it spells them (Italy, France) or replaced by their
 * given target (Germany => Deutschland), in a session, after `update_metadata`, in a room and in a
 * dubbing job; without context they pass through Apertium as PocketSphinx wrote them, lower case.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readWavAsPcm16 } from "../../src/audio/wav.js";
import type { RealtimeSocket, ServerMessage } from "../../src/cli/recording-socket.js";
import { MAX_GLOSSARY_TERMS } from "../../src/core/glossary.js";
import { dubbingClient } from "../support/dubbing-client.js";
import { createRoomSession, joinRoom, playToRoomTranslation } from "../support/room-client.js";
import { API_KEY, startServer, type TestServer } from "../support/server.js";
import { openSession, playToLastTranslation } from "../support/session-socket.js";
import { sharedMissing, sharedPath } from "../support/shared.js";

const CLIP = "data/speech/ljspeech/wavs/LJ001-0030.wav";
const SPEECH_MISSING = sharedMissing(CLIP);
const CONTEXT = "Italy, France\nGermany => Deutschland";

let server: TestServer;
let speech: Int16Array;

beforeAll(async () => {
  server = await startServer({ DUBBING_WORKERS: "1" });
  if (!SPEECH_MISSING) speech = await readWavAsPcm16(sharedPath(CLIP));
});
afterAll(async () => {
  await server?.close();
});

const isTranslation = (m: ServerMessage) => m.type === "translated_transcript" && m.is_final === true;

/** The utterance's translation: its last translated final (stable finals grow to the whole). */
async function translationOf(socket: RealtimeSocket): Promise<string> {
  await playToLastTranslation(socket, speech);
  return socket.messages.filter(isTranslation).at(-1)!.text as string;
}

describe.skipIf(SPEECH_MISSING)("context on PocketSphinx and Apertium", () => {
  it("without context, the names come through as PocketSphinx wrote them (lower case, unknown to Apertium)", async () => {
    const socket = await openSession(server.baseUrl, { targetLanguage: "es", audioOutputEnabled: "false" });
    const translated = await translationOf(socket);
    socket.close();
    expect(translated).toMatch(/no sólo en italy pero en germany y france/u);
  });

  it("a session's context keeps the names verbatim or as their given target, the grammar around them intact", async () => {
    const socket = await openSession(server.baseUrl, {
      targetLanguage: "es",
      audioOutputEnabled: "false",
      context: CONTEXT,
    });
    const translated = await translationOf(socket);
    socket.close();
    // The names as the context spells them, the target for Germany, and the rest still translated.
    expect(translated).toMatch(/no sólo en Italy pero en Deutschland y France/u);
  });

  it("update_metadata applies a context to the next utterance; too many terms are announced, not fatal", async () => {
    const socket = await openSession(server.baseUrl, { targetLanguage: "es", audioOutputEnabled: "false" });
    const many = Array.from({ length: MAX_GLOSSARY_TERMS + 3 }, (_, i) => `Name${i}x`).join(", ");
    socket.send({ type: "update_metadata", metadata: { context: `Germany => Deutschland\n${many}` } });
    const ack = await socket.waitFor((m) => m.type === "metadata_ack");
    expect(ack).toMatchObject({
      applied: { context: true },
      notices: [
        { code: "context_terms_ignored", message: expect.stringMatching(/context: 4 terms past the first/u) },
      ],
    });
    const translated = await translationOf(socket);
    socket.close();
    expect(translated).toMatch(/Deutschland/u);
    expect(socket.messages.filter((m) => m.type === "error")).toEqual([]);
  });

  it("a 200-term context runs a whole session with a notice and no error frame", async () => {
    const terms = Array.from({ length: 200 }, (_, i) => `N${i}`).join(", ");
    const socket = await openSession(server.baseUrl, {
      targetLanguage: "es",
      audioOutputEnabled: "false",
      context: `Italy, France\n${terms}`,
    });
    const translated = await translationOf(socket);
    socket.close();
    expect(translated).toMatch(/Italy/u);
    expect(socket.messages.filter((m) => m.type === "error")).toEqual([]);
    // Right after ready, where an error would have meant the session was refused.
    expect(socket.messages[1]).toMatchObject({
      type: "notice",
      code: "context_terms_ignored",
      message: expect.stringMatching(/context: 152 terms past the first 50/u),
    });
  });

  it("PocketSphinx hears names it lacks once the context names them, and Apertium keeps them", async () => {
    // "In fourteen sixty-five Sweynheim and Pannartz began printing in the monastery of Subiaco near
    // Rome": neither name is in PocketSphinx's dictionary.
    const reading = await readWavAsPcm16(sharedPath("data/speech/ljspeech/wavs/LJ001-0031.wav"));
    const heard = async (context?: string) => {
      const socket = await openSession(server.baseUrl, {
        targetLanguage: "es",
        audioOutputEnabled: "false",
        ...(context ? { context } : {}),
      });
      await playToLastTranslation(socket, reading);
      socket.close();
      const last = (type: string) =>
        socket.messages.filter((m) => m.type === type && m.is_final).at(-1)!.text;
      return {
        original: last("original_transcript") as string,
        translated: last("translated_transcript") as string,
      };
    };
    const without = await heard();
    expect(without.original).not.toMatch(/sweynheim|pannartz/iu);
    const named = await heard("Sweynheim, Pannartz, Subiaco");
    expect(named.original).toMatch(/Sweynheim and Pannartz/u);
    expect(named.translated).toMatch(/Sweynheim y Pannartz/u);
  });

  it("a room's context reaches its translator", async () => {
    const room = await createRoomSession(server.baseUrl, API_KEY, {
      source_language: "en-US",
      target_language: "es-ES",
      context: CONTEXT,
    });
    const socket = await joinRoom(room);
    await playToRoomTranslation(socket, speech);
    // Stable finals grow to the whole: the one reaching the clip's last word, "France".
    const last = await socket.waitFor((m) => isTranslation(m) && /france/iu.test(m.text as string), 150_000);
    const translated = last.text as string;
    socket.close();
    expect(translated).toMatch(/Deutschland/u);
    expect(translated).toMatch(/Italy/u);
  });

  it("a room refuses a context over the limit with a clear error", async () => {
    const response = await fetch(new URL("/api/beta1/session", server.baseUrl), {
      method: "POST",
      headers: { authorization: `Bearer ${API_KEY}`, "content-type": "application/json" },
      body: JSON.stringify({ source_language: "en-US", target_language: "es-ES", context: "x".repeat(2001) }),
    });
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({
      error: {
        code: "invalid_request",
        message: expect.stringMatching(/context is 2001 characters long; the limit is 2000/u),
      },
    });
  });

  it("a dubbing job's context reaches its translation and subtitles", async () => {
    const client = dubbingClient(server.baseUrl, API_KEY);
    const sourceUrl = await client.upload(sharedPath(CLIP), "audio/wav");
    const created = await client.request("POST", "/api/dubbing/jobs", {
      source_url: sourceUrl,
      target_lang: "es",
      source_lang: "en",
      context: CONTEXT,
    });
    expect(created.status).toBe(201);
    const job = await client.finished(created.body.job_id as string);
    expect(job.status).toBe("completed");
    const segments = job.segments as { translated_text: string }[];
    expect(segments.map((segment) => segment.translated_text).join(" ")).toMatch(/Italy.*Deutschland/su);
    const subtitles = await fetch(
      new URL(
        `/api/dubbing/jobs/${created.body.job_id as string}/subtitles?track=translated&format=srt`,
        server.baseUrl,
      ),
      { headers: { authorization: `Bearer ${API_KEY}` } },
    );
    expect(await subtitles.text()).toMatch(/Deutschland/u);
  });
});
