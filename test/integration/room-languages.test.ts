/**
 * Rooms in several languages on the embedded room server, through the real service over HTTP and
 * WebSocket: who hears what. English is real speech through PocketSphinx and Apertium; Spanish and
 * German speakers are heard by the protocol-faithful OpenAI-compatible stand-in (no Spanish or
 * German recognizer runs offline here), which also translates into and out of German; eSpeak NG
 * speaks every language.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readWavAsPcm16 } from "../../src/audio/wav.js";
import type { RealtimeSocket, ServerMessage } from "../../src/cli/recording-socket.js";
import { multilingualEngines } from "../support/multilingual-engines.js";
import type { OpenAiTestServer } from "../support/openai-server.js";
import { joinRoom } from "../support/room-client.js";
import { API_KEY, startServer, type TestServer } from "../support/server.js";
import { sharedMissing, sharedPath } from "../support/shared.js";

const MISSING = sharedMissing("data/speech/librivox-pocketsphinx") ?? sharedMissing("data/speech/fleurs-dev");
let remote: OpenAiTestServer;
let server: TestServer;
let dir: string;
let enginesFile: string;
let english: Int16Array;
let spanish: Int16Array;

beforeAll(async () => {
  if (MISSING) return;
  dir = await mkdtemp(path.join(tmpdir(), "room-languages-"));
  ({ remote, enginesFile } = await multilingualEngines(dir));
  server = await startServer({
    ENGINES_FILE: enginesFile,
    ROOM_MAX_PARTICIPANTS: "4",
    RATE_LIMIT_PER_MINUTE: "1000",
  });
  english = await readWavAsPcm16(sharedPath("data/speech/librivox-pocketsphinx/goforward.wav"));
  spanish = await readWavAsPcm16(sharedPath("data/speech/fleurs-dev/fleurs-es-005.wav"));
  // Half of the clip is enough: the stand-in hears any audio as "speech of N ms".
  spanish = spanish.subarray(0, Math.min(spanish.length, 3 * 16_000));
});
afterAll(async () => {
  await server?.close();
  await remote?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function post(
  pathname: string,
  body: unknown,
): Promise<{
  status: number;
  body: Record<string, unknown> & { error?: { code: string; message: string } };
}> {
  const response = await fetch(new URL(pathname, server.baseUrl), {
    method: "POST",
    headers: { authorization: `Bearer ${API_KEY}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Record<string, never> };
}

interface Access {
  url: string;
  token: string;
  room_name: string;
  language?: string;
  languages?: string[];
  listen_only?: string[];
}

/** A room in `languages`: the creator speaks the first, one more participant per further language. */
async function meeting(languages: string[], extra: Record<string, unknown> = {}): Promise<Access[]> {
  const created = await post("/api/beta1/session", { languages, voice_type: "female", ...extra });
  expect(created.status, JSON.stringify(created.body)).toBe(200);
  const first = created.body as unknown as Access;
  const others: Access[] = [];
  for (const language of languages.slice(1)) {
    const added = await post(`/api/beta1/session/${first.room_name}/participants`, { language });
    expect(added.status, JSON.stringify(added.body)).toBe(200);
    others.push(added.body as unknown as Access);
  }
  return [first, ...others];
}

/** Speech followed by enough silence for the VAD to end the utterance (rooms have no `finalize`). */
function withTrailingSilence(pcm: Int16Array, seconds = 1.5): Int16Array {
  const padded = new Int16Array(pcm.length + seconds * 16_000);
  padded.set(pcm);
  return padded;
}

/** A translated transcript as a room sends it (src/wire/messages.ts). */
type Translation = ServerMessage & {
  readonly is_final: boolean;
  readonly translated_text: string;
  readonly participant: string;
  readonly language: string;
};
const translations = (socket: RealtimeSocket) =>
  socket.messages.filter((m): m is Translation => m.type === "translated_transcript");
const finalOriginals = (socket: RealtimeSocket) =>
  socket.messages.filter((m) => m.type === "original_transcript" && m.is_final);
const identityOf = (socket: RealtimeSocket) =>
  (socket.messages.find((m) => m.type === "joined") as unknown as { identity: string }).identity;

/** Streams one utterance of `speaker` and waits until every listener has its final translation and speech. */
async function speak(speaker: RealtimeSocket, pcm: Int16Array, listeners: RealtimeSocket[]): Promise<void> {
  const before = listeners.map((socket) => translations(socket).filter((m) => m.is_final).length);
  await speaker.stream(withTrailingSilence(pcm), { chunkMs: 20, speed: 4 });
  await Promise.all(
    listeners.map((socket, i) =>
      expect.poll(() => translations(socket).filter((m) => m.is_final).length).toBeGreaterThan(before[i]!),
    ),
  );
  await Promise.all([speaker, ...listeners].map((socket) => socket.settle(1500)));
}

describe.skipIf(MISSING)("a room in several languages (embedded)", () => {
  it("two languages: each hears the other in their own language, never their own speech", async () => {
    const [en, es] = await meeting(["en", "es"]);
    expect(en!.language).toBe("en");
    expect(es!.language).toBe("es");
    const alice = await joinRoom(en!);
    const bruno = await joinRoom(es!);
    const joined = bruno.messages.find((m) => m.type === "joined") as Record<string, unknown>;
    expect(joined).toMatchObject({
      language: "es",
      languages: ["en", "es"],
      translator: { audio_track: "translated-audio-es" },
    });
    try {
      await speak(alice, english, [bruno]);
      // Bruno: Alice's words in Spanish, labelled with her, and her translated speech. (Rooms have
      // no `finalized`: the growing finals of her utterance are waited for, not a quiet spell.)
      await expect
        .poll(() =>
          translations(bruno)
            .filter((m) => m.is_final)
            .map((m) => m.translated_text)
            .join(" "),
        )
        .toMatch(/adelante|diez|metros/iu);
      const toBruno = translations(bruno).filter((m) => m.is_final);
      expect(toBruno.length).toBeGreaterThan(0);
      for (const message of toBruno)
        expect(message).toMatchObject({ participant: identityOf(alice), language: "es" });
      expect(bruno.audioFrames.length).toBeGreaterThan(0);
      // Alice sees her own words as captions, but hears nothing of them back.
      expect(finalOriginals(alice).length).toBeGreaterThan(0);
      expect(finalOriginals(bruno).map((m) => m.participant)).toContain(identityOf(alice));
      expect(translations(alice)).toEqual([]);
      expect(alice.audioFrames).toEqual([]);

      // Alice's translated speech may still be arriving (a loaded machine speaks it late): counted
      // once it has stopped coming, so what comes after is of Bruno's own speech or nothing.
      let brunoFramesBefore = -1;
      while (brunoFramesBefore !== bruno.audioFrames.length) {
        brunoFramesBefore = bruno.audioFrames.length;
        await new Promise((resolve) => setTimeout(resolve, 3000));
      }
      await speak(bruno, spanish, [alice]);
      const toAlice = translations(alice).filter((m) => m.is_final);
      expect(toAlice.length).toBeGreaterThan(0);
      for (const message of toAlice)
        expect(message).toMatchObject({ participant: identityOf(bruno), language: "en" });
      expect(alice.audioFrames.length).toBeGreaterThan(0);
      // Bruno's own speech never comes back to him, in words or audio.
      expect(translations(bruno).filter((m) => m.participant === identityOf(bruno))).toEqual([]);
      expect(bruno.audioFrames.length).toBe(brunoFramesBefore);
    } finally {
      alice.close();
      bruno.close();
    }
  });

  it("three languages: each listener gets their language only; a language nobody hears is not translated", async () => {
    const [en, es, de] = await meeting(["en", "es", "de"]);
    const alice = await joinRoom(en!);
    const bruno = await joinRoom(es!);
    try {
      // Nobody hears German yet: Alice's speech goes into Spanish only.
      const chatsBefore = remote.ofEndpoint("chat").length;
      await speak(alice, english, [bruno]);
      const asked = remote
        .ofEndpoint("chat")
        .slice(chatsBefore)
        .map((r) => JSON.stringify(r.json));
      expect(asked.filter((body) => /German/u.test(body))).toEqual([]);
      expect(translations(bruno).every((m) => m.language === "es")).toBe(true);

      const clara = await joinRoom(de!);
      try {
        await speak(alice, english, [bruno, clara]);
        const toClara = translations(clara).filter((m) => m.is_final);
        expect(toClara.length).toBeGreaterThan(0);
        for (const message of toClara)
          expect(message).toMatchObject({ participant: identityOf(alice), language: "de" });
        expect(toClara.map((m) => m.translated_text).join(" ")).toMatch(/\[German\]/u);
        expect(clara.audioFrames.length).toBeGreaterThan(0);
        // Bruno still only Spanish; Alice nothing.
        expect(translations(bruno).every((m) => m.language === "es")).toBe(true);
        expect(translations(alice)).toEqual([]);
        expect(alice.audioFrames).toEqual([]);

        // Bruno speaks: Alice hears English, Clara German, Bruno nothing of his own.
        await speak(bruno, spanish, [alice, clara]);
        expect(translations(alice).every((m) => m.language === "en")).toBe(true);
        expect(translations(alice).length).toBeGreaterThan(0);
        expect(translations(clara).filter((m) => m.participant === identityOf(bruno)).length).toBeGreaterThan(
          0,
        );
        expect(translations(clara).every((m) => m.language === "de")).toBe(true);
        expect(translations(bruno).filter((m) => m.participant === identityOf(bruno))).toEqual([]);
      } finally {
        clara.close();
      }
    } finally {
      alice.close();
      bruno.close();
    }
  });

  it("a spec room's participant hears translated-audio in the target, as before", async () => {
    const created = await post("/api/beta1/session", {
      sourceLanguage: "en-US",
      targetLanguage: "es-ES",
      voiceType: "female",
    });
    expect(created.status).toBe(200);
    expect(Object.keys(created.body).sort()).toEqual(["room_name", "token", "url"]);
    const socket = await joinRoom(created.body as unknown as Access);
    try {
      expect(socket.messages.find((m) => m.type === "joined")).toMatchObject({
        language: null,
        translator: { audio_track: "translated-audio" },
      });
      await speak(socket, english, [socket]);
      expect(translations(socket).every((m) => m.language === "es")).toBe(true);
      expect(socket.audioFrames.length).toBeGreaterThan(0);
    } finally {
      socket.close();
    }
  });

  it("two_way in Pinch's request shape: either side speaks; translated-audio is the target", async () => {
    // Two-way needs a recognizer that identifies languages: the stand-in does, as told.
    const created = await post("/api/beta1/session", {
      sourceLanguage: "en-US",
      targetLanguage: "es-ES",
      twoWay: true,
      voiceType: "male",
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const access = created.body as unknown as Access;
    const pinch = await joinRoom(access);
    // A second participant hears the source side: they say so on the join URL.
    const englishSide = new URL(access.url);
    englishSide.searchParams.set("language", "en");
    const added = await post(`/api/beta1/session/${access.room_name}/participants`, {});
    const listener = await joinRoom({
      url: englishSide.toString(),
      token: (added.body as unknown as Access).token,
    });
    const identified = remote.detectedLanguage;
    try {
      expect(pinch.messages.find((m) => m.type === "joined")).toMatchObject({
        language: null,
        translator: { audio_track: "translated-audio" },
      });
      expect(listener.messages.find((m) => m.type === "joined")).toMatchObject({
        language: "en",
        translator: { audio_track: "translated-audio-en" },
      });
      remote.detectedLanguage = "english";
      await speak(pinch, english, [pinch]);
      expect(translations(pinch).length).toBeGreaterThan(0);
      expect(translations(pinch).every((m) => m.language === "es")).toBe(true);
      expect(pinch.audioFrames.length).toBeGreaterThan(0);
      // The English side is not sent its own language back.
      expect(translations(listener)).toEqual([]);
      expect(listener.audioFrames).toEqual([]);

      remote.detectedLanguage = "spanish";
      const pinchHeard = translations(pinch).length;
      await speak(pinch, spanish, [listener]);
      expect(translations(listener).every((m) => m.language === "en")).toBe(true);
      expect(listener.audioFrames.length).toBeGreaterThan(0);
      // Spanish speech is not translated into Spanish for the target side.
      expect(translations(pinch).length).toBe(pinchHeard);
    } finally {
      remote.detectedLanguage = identified;
      pinch.close();
      listener.close();
      await post("/api/beta1/session/end", { session_id: access.room_name });
    }
  });
});

describe.skipIf(MISSING)("a language no engine recognizes", () => {
  it("is listen-only: its participant hears the others and is told, once, that they are not heard", async () => {
    // French: translated into (Apertium through Spanish) and spoken, but recognized by no engine here.
    const [en, fr] = await meeting(["en", "fr"]);
    expect(en).toMatchObject({ languages: ["en", "fr"], listen_only: ["fr"] });
    const alice = await joinRoom(en!);
    const marie = await joinRoom(fr!);
    try {
      await marie.stream(withTrailingSilence(spanish), { chunkMs: 20, speed: 4 });
      await marie.stream(withTrailingSilence(spanish), { chunkMs: 20, speed: 4 });
      const told = await marie.waitFor((m) => m.type === "error");
      expect(told.error).toMatch(/speech in fr is not recognized/u);
      await speak(alice, english, [marie]);
      expect(translations(marie).every((m) => m.language === "fr")).toBe(true);
      expect(marie.audioFrames.length).toBeGreaterThan(0);
      // Said once, to Marie alone; Alice hears nothing of Marie's speech.
      expect(marie.messages.filter((m) => m.type === "error")).toHaveLength(1);
      expect(alice.messages.filter((m) => m.type === "error")).toEqual([]);
      expect(translations(alice)).toEqual([]);
    } finally {
      alice.close();
      marie.close();
      await post("/api/beta1/session/end", { session_id: en!.room_name });
    }
  });
});

describe.skipIf(MISSING)("bounds and bad requests", () => {
  it("refuses more than 4 languages, repeated ones, a pair with languages, and a language the room lacks", async () => {
    const cases: [unknown, number, string, RegExp][] = [
      [{ languages: ["en", "es", "de", "fr", "it"] }, 400, "invalid_request", /at most 4/u],
      [{ languages: ["en"] }, 400, "invalid_request", /2 to 4/u],
      [{ languages: ["en", "en-US"] }, 400, "invalid_language", /twice/u],
      [{ languages: ["en", "es"], source_language: "en" }, 400, "invalid_request", /do not go together/u],
      [{ languages: ["en", "es"], language: "de" }, 400, "invalid_language", /not one of the room's/u],
      [{ languages: ["en", "xx-not-a-tag"] }, 400, "invalid_language", /not a language code/u],
      [{ languages: ["en", "ja"] }, 400, "invalid_language", /ja/u],
      [{ languages: "en,es" }, 400, "invalid_request", /array/u],
    ];
    for (const [body, status, code, message] of cases) {
      const answer = await post("/api/beta1/session", body);
      expect(answer.status, JSON.stringify(body)).toBe(status);
      expect(answer.body.error?.code, JSON.stringify(body)).toBe(code);
      expect(answer.body.error?.message, JSON.stringify(body)).toMatch(message);
    }
  });

  it("gives a room no more participants than its languages allow, and checks each one's language", async () => {
    const created = await post("/api/beta1/session", { languages: ["en", "es"] });
    const room = created.body.room_name as string;
    try {
      const wrong = await post(`/api/beta1/session/${room}/participants`, { language: "de" });
      expect(wrong.status).toBe(400);
      expect(wrong.body.error?.code).toBe("invalid_language");
      const malformed = await post(`/api/beta1/session/${room}/participants`, { language: 12 });
      expect(malformed.status).toBe(400);
      // ROOM_MAX_PARTICIPANTS is 4 here: the creator and three more.
      for (let i = 0; i < 3; i++)
        expect((await post(`/api/beta1/session/${room}/participants`, { language: "es" })).status).toBe(200);
      const full = await post(`/api/beta1/session/${room}/participants`, { language: "es" });
      expect(full.status).toBe(400);
      expect(full.body.error).toMatchObject({ code: "room_full" });
      expect(full.body.error?.message).toMatch(/4 participants/u);
    } finally {
      await post("/api/beta1/session/end", { session_id: room });
    }
  });

  it("refuses a join URL naming a language the room does not have, at the handshake", async () => {
    const [en] = await meeting(["en", "es"]);
    try {
      const url = new URL(en!.url.replace(/^ws/u, "http"));
      url.searchParams.set("access_token", en!.token);
      url.searchParams.set("language", "de");
      const answer = await fetch(url);
      expect(answer.status).toBe(400);
      expect(((await answer.json()) as { error: { code: string } }).error.code).toBe("invalid_language");
      // The join URL may switch to another of the room's languages.
      const switched = new URL(en!.url);
      switched.searchParams.set("language", "es");
      const socket = await joinRoom({ url: switched.toString(), token: en!.token });
      expect(socket.messages.find((m) => m.type === "joined")).toMatchObject({ language: "es" });
      socket.close();
    } finally {
      await post("/api/beta1/session/end", { session_id: en!.room_name });
    }
  });
});
