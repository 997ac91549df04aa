import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_WAITING_SPEAKS } from "@relay-translate/client";
import { startServer, type TestServer } from "../support/server.js";
import { joinFrames, openTtsSession, speakLine } from "../support/tts-session.js";

let server: TestServer;

beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server?.close();
});

const openTts = (params: Record<string, string> = {}) => openTtsSession(server.baseUrl, params);

describe("mode=tts", () => {
  it("sends two ready frames, then speak_ack, 24 kHz float32 frames and speech_end per speak", async () => {
    const socket = await openTts({ targetLanguage: "es" });
    expect(socket.messages.slice(0, 2)).toEqual([
      { type: "ready", session_id: expect.any(String), worker_id: expect.any(String) },
      { type: "ready", mode: "tts" },
    ]);
    const frames = await speakLine(socket, { text: "Buenos días a todos.", correlation_id: "line-1" });
    const types = socket.received.slice(2).map((r) => (r.audio ? "audio" : r.message!.type));
    expect(types[0]).toBe("speak_ack");
    expect(types.at(-1)).toBe("speech_end");
    expect(new Set(types.slice(1, -1))).toEqual(new Set(["audio"]));
    expect(socket.messages.find((m) => m.type === "speak_ack")).toEqual({
      type: "speak_ack",
      correlation_id: "line-1",
    });
    expect(frames.slice(0, -1).every((f) => f.length === 1920)).toBe(true);
    const seconds = joinFrames(frames).length / 24_000;
    expect(seconds).toBeGreaterThan(0.7);
    expect(seconds).toBeLessThan(5);
    socket.close();
  });

  it("sends no speak_ack without a correlation_id", async () => {
    const socket = await openTts();
    await speakLine(socket, { text: "Hola." });
    expect(socket.messages.some((m) => m.type === "speak_ack")).toBe(false);
    socket.close();
  });

  it("voiceId and language are sticky for the following lines", async () => {
    const socket = await openTts({ targetLanguage: "es" });
    const explicit = joinFrames(
      await speakLine(socket, { text: "Bonjour tout le monde.", voiceId: "12", language: "fr" }),
    );
    const sticky = joinFrames(await speakLine(socket, { text: "Bonjour tout le monde." }));
    expect(Array.from(sticky)).toEqual(Array.from(explicit));
    const otherVoice = joinFrames(await speakLine(socket, { text: "Bonjour tout le monde.", voiceId: "3" }));
    expect(Array.from(otherVoice)).not.toEqual(Array.from(explicit));
    socket.close();

    // the same line in a fresh session with the default voice and Spanish sounds different
    const fresh = await openTts({ targetLanguage: "es" });
    const spanishDefault = joinFrames(await speakLine(fresh, { text: "Bonjour tout le monde." }));
    expect(Array.from(spanishDefault)).not.toEqual(Array.from(explicit));
    fresh.close();
  });

  it("update_metadata applies voiceId and targetLanguage live and refuses other keys", async () => {
    const socket = await openTts({ targetLanguage: "es", voiceId: "5" });
    const before = joinFrames(await speakLine(socket, { text: "Guten Morgen.", language: "de" }));
    socket.send({ type: "update_metadata", metadata: { voiceId: 40, targetLanguage: "de", context: "x" } });
    expect(await socket.waitFor((m) => m.type === "metadata_ack")).toEqual({
      type: "metadata_ack",
      applied: { voiceId: true, targetLanguage: true },
    });
    expect((await socket.waitFor((m) => m.type === "error")).error).toMatch(/not applied: context/);
    const after = joinFrames(await speakLine(socket, { text: "Guten Morgen." }));
    expect(Array.from(after)).not.toEqual(Array.from(before));

    socket.send({ type: "update_metadata", metadata: { voiceId: "7000" } });
    await expect.poll(() => socket.messages.filter((m) => m.type === "error").length).toBe(2);
    expect(socket.messages.filter((m) => m.type === "error")[1]!.error).toMatch(
      /voiceId "7000" does not exist/,
    );
    socket.close();
  });

  it(`refuses speak requests beyond ${MAX_WAITING_SPEAKS} waiting, each by name; the socket stays open and later speaks work`, async () => {
    const socket = await openTts({ targetLanguage: "es" });
    const lines = 400;
    for (let i = 0; i < lines; i++)
      socket.send({ type: "speak", text: "Hola.", correlation_id: `line-${i}` });
    const named = (type: string) =>
      socket.messages.filter((m) => m.type === type).map((m) => m.correlation_id as string);
    // every speak is either accepted (speak_ack when its turn comes) or refused with an error naming it
    await expect.poll(() => named("speak_ack").length + named("error").length).toBe(lines);
    const accepted = named("speak_ack");
    const refused = named("error");
    expect(refused.length).toBeGreaterThan(0);
    expect(new Set([...accepted, ...refused]).size).toBe(lines);
    // the first ones are always accepted: the bound counts speaks waiting, not speaks sent
    expect(accepted.slice(0, MAX_WAITING_SPEAKS)).toEqual(
      Array.from({ length: MAX_WAITING_SPEAKS }, (_, i) => `line-${i}`),
    );
    for (const error of socket.messages.filter((m) => m.type === "error"))
      expect(error.error).toMatch(new RegExp(`${MAX_WAITING_SPEAKS} speak requests are already waiting`));
    await expect
      .poll(() => socket.messages.filter((m) => m.type === "speech_end").length)
      .toBe(accepted.length);
    expect(socket.isOpen).toBe(true);
    expect(
      (await speakLine(socket, { text: "Todavía aquí.", correlation_id: "after" })).length,
    ).toBeGreaterThan(0);
    expect(socket.messages.filter((m) => m.type === "error")).toHaveLength(refused.length);
    socket.close();
  });

  it("rejects bad speak requests with an error frame and keeps the socket open", async () => {
    const socket = await openTts();
    const bad: [Record<string, unknown>, RegExp][] = [
      [{ type: "speak" }, /needs "text"/],
      [{ type: "speak", text: 42 }, /needs "text"/],
      [{ type: "speak", text: "   " }, /needs "text"/],
      [{ type: "speak", text: "x".repeat(5001) }, /5001 characters/],
      [{ type: "speak", text: "hi", voiceId: "0" }, /voiceId "0" does not exist/],
      [{ type: "speak", text: "hi", voiceId: { id: 1 } }, /voiceId must be a string or number/],
      [{ type: "speak", text: "hi", language: "xh" }, /language="xh" has no voice output/],
      [{ type: "speak", text: "hi", correlation_id: 7 }, /correlation_id must be a string/],
      [{ type: "finalize" }, /finalize applies to speech sessions/],
    ];
    for (const [message, pattern] of bad) {
      const count = socket.messages.filter((m) => m.type === "error").length;
      socket.send(message);
      const error = await socket.waitFor(
        (m) => m.type === "error" && socket.messages.filter((e) => e.type === "error").indexOf(m) === count,
      );
      expect(error.error).toMatch(pattern);
    }
    socket.sendAudio(new Int16Array(320));
    expect(
      (await socket.waitFor((m) => m.type === "error" && /binary audio frames/.test(m.error as string)))
        .error,
    ).toMatch(/not accepted in a mode=tts session/);
    expect((await speakLine(socket, { text: "Still here." })).length).toBeGreaterThan(0);
    socket.close();
  });
});
