/**
 * The meeting page's pure logic (src/playground/meeting-logic.js, the module browsers load, imported
 * here as it is): share links, where to join, which LiveKit track a listener subscribes to, names,
 * how a closed connection reads, and the audio framing.
 */
import { describe, expect, it } from "vitest";
import {
  Framer,
  closeMessage,
  fromFloat32Le,
  inviteLink,
  languageName,
  liveKitServerUrl,
  isEmbeddedRoomUrl,
  livekitCloseMessage,
  livekitUrlOf,
  parseInvite,
  participantLabel,
  participantOf,
  peoplesMessage,
  roomSocketUrl,
  toPcm16Le,
  trackLanguagesOf,
  tokenLink,
  translatorTrackFor,
} from "../../src/playground/meeting-logic.js";

describe("share links", () => {
  it("carry the participant's invitation in the fragment, never sent to a server", () => {
    const link = inviteLink("http://localhost:8080", "AQFx9Jb3_-abcdefghijklmnopqrstuvwxyz0123");
    expect(link).toBe("http://localhost:8080/meeting#join=AQFx9Jb3_-abcdefghijklmnopqrstuvwxyz0123");
    expect(new URL(link).search).toBe("");
    expect(parseInvite(new URL(link).hash)).toEqual({
      invitation: "AQFx9Jb3_-abcdefghijklmnopqrstuvwxyz0123",
    });
    // Cut short or mangled when pasted: said so, not sent.
    expect(parseInvite("#join=AQFx")).toEqual({ error: expect.stringMatching(/incomplete or damaged/u) });
    expect(parseInvite("#join=<script>alert(1)</script>xxxxxxxxxxxx")).toHaveProperty("error");
  });

  it("made by hand from a room token carry the room, token and language (and LiveKit's URL)", () => {
    const link = tokenLink("http://localhost:8080", { room: "api-0123", token: "a.b-c_d", language: "es" });
    expect(link).toBe("http://localhost:8080/meeting#room=api-0123&token=a.b-c_d&language=es");
    expect(parseInvite(new URL(link).hash)).toEqual({ room: "api-0123", token: "a.b-c_d", language: "es" });

    const livekit = tokenLink("https://relay.example", {
      room: "api-1",
      token: "t",
      language: "de",
      livekit: "wss://livekit.example:7880",
    });
    expect(parseInvite(new URL(livekit).hash)).toEqual({
      room: "api-1",
      token: "t",
      language: "de",
      livekit: "wss://livekit.example:7880",
    });
  });

  it("refuse a LiveKit server that is not a web address (javascript:, data:, file:)", () => {
    for (const url of ["javascript:alert(1)", "data:text/html,x", "file:///etc/passwd", "not a url"]) {
      const hash = `#${new URLSearchParams({ room: "api-1", token: "t", language: "es", livekit: url })}`;
      expect(parseInvite(hash), url).toEqual({ error: expect.stringMatching(/not a web address/u) });
      expect(liveKitServerUrl(url), url).toBeUndefined();
    }
    for (const url of ["ws://localhost:7880", "wss://lk.example", "https://lk.example"])
      expect(liveKitServerUrl(url)).toBe(url);
  });

  it("are no invitation without a room and a token", () => {
    expect(parseInvite("")).toBeUndefined();
    expect(parseInvite(undefined)).toBeUndefined();
    expect(parseInvite("#room=api-1")).toBeUndefined();
    expect(parseInvite("#token=t")).toBeUndefined();
    expect(parseInvite("#room=api-1&token=t")).toEqual({ room: "api-1", token: "t", language: undefined });
  });

  it("name LiveKit only when the room's url is not the service's own room server", () => {
    const embedded = { url: "ws://127.0.0.1:8080/rooms/api-0a", room_name: "api-0a" };
    expect(isEmbeddedRoomUrl(embedded.url, embedded.room_name)).toBe(true);
    expect(livekitUrlOf(embedded)).toBeUndefined();
    // Behind a proxy, PUBLIC_BASE_URL's host: still the embedded server.
    expect(livekitUrlOf({ url: "wss://relay.example/rooms/api-0a", room_name: "api-0a" })).toBeUndefined();
    expect(livekitUrlOf({ url: "wss://livekit.example", room_name: "api-0a" })).toBe("wss://livekit.example");
    expect(livekitUrlOf({ url: "not a url", room_name: "api-0a" })).toBe("not a url");
  });
});

describe("joining the embedded room server", () => {
  it("follows the page's origin (http→ws, https→wss), whatever the service's PUBLIC_BASE_URL", () => {
    expect(roomSocketUrl("http://localhost:8080", "api-1", "x.y+z")).toBe(
      "ws://localhost:8080/rooms/api-1?access_token=x.y%2Bz",
    );
    expect(roomSocketUrl("https://relay.example", "api-1", "t")).toBe(
      "wss://relay.example/rooms/api-1?access_token=t",
    );
  });

  it("says why the connection closed", () => {
    expect(closeMessage(1000, "room closed")).toEqual({ state: "ended", text: "The meeting has ended." });
    expect(closeMessage(1000, "left", { leaving: true }).state).toBe("left");
    expect(closeMessage(1000, "replaced by a new connection with the same identity").state).toBe("left");
    expect(closeMessage(1006, "", { joined: false }).state).toBe("failed");
    expect(closeMessage(1011, "boom")).toEqual({
      state: "disconnected",
      text: "Disconnected from the meeting (1011 boom).",
    });
  });
});

describe("LiveKit", () => {
  it("subscribes to the translator's track of the listener's language only", () => {
    const tracks = ["translated-audio-en", "translated-audio-es", "translated-audio-de"];
    expect(translatorTrackFor(tracks, "es")).toBe("translated-audio-es");
    expect(translatorTrackFor(tracks, "de")).toBe("translated-audio-de");
    expect(translatorTrackFor(tracks, "ES")).toBe("translated-audio-es");
  });

  it("waits for its language's track rather than take another language's", () => {
    expect(translatorTrackFor(["translated-audio-en"], "es")).toBeUndefined();
    expect(translatorTrackFor([], "es")).toBeUndefined();
    // A two-way spec room's target (translated-audio) is another language once a -<lang> track exists.
    expect(translatorTrackFor(["translated-audio", "translated-audio-en"], "es")).toBeUndefined();
    expect(translatorTrackFor(["translated-audio", "translated-audio-en"], "en")).toBe("translated-audio-en");
  });

  it("follows the translator's track:<name> attributes first (a spec room's target is translated-audio)", () => {
    const languages = trackLanguagesOf({
      role: "translator",
      "track:translated-audio": "es",
      "track:translated-audio-en": "en",
    });
    expect(languages).toEqual({ "translated-audio": "es", "translated-audio-en": "en" });
    const tracks = ["translated-audio", "translated-audio-en"];
    expect(translatorTrackFor(tracks, "es", languages)).toBe("translated-audio");
    expect(translatorTrackFor(tracks, "en", languages)).toBe("translated-audio-en");
  });

  it("takes translated-audio only in a room with no language-named track (a spec room)", () => {
    expect(translatorTrackFor(["translated-audio"], "es")).toBe("translated-audio");
    expect(translatorTrackFor(["translated-audio"], undefined)).toBe("translated-audio");
    expect(translatorTrackFor(["translated-audio-es"], undefined)).toBeUndefined();
    expect(translatorTrackFor(["microphone"], "es")).toBeUndefined();
  });

  it("says why the room was left, from the DisconnectReason's name", () => {
    expect(livekitCloseMessage("ROOM_DELETED").state).toBe("ended");
    expect(livekitCloseMessage("ROOM_CLOSED").text).toBe("The meeting has ended.");
    expect(livekitCloseMessage("CLIENT_INITIATED").state).toBe("left");
    expect(livekitCloseMessage(undefined, { leaving: true }).state).toBe("left");
    expect(livekitCloseMessage("SIGNAL_CLOSE").state).toBe("disconnected");
  });
});

describe("names", () => {
  it("calls the page's own participant You and the others by their identity and language", () => {
    expect(participantLabel("client-3fa29c1d", "es", "client-3fa29c1d")).toBe("You");
    expect(participantLabel("client-3fa29c1d", "es", "client-0000")).toBe("Participant 3fa2 (es)");
    expect(participantLabel("client-3fa29c1d", undefined, "client-0000")).toBe("Participant 3fa2");
    expect(participantLabel("someone", "de", undefined)).toBe("Participant some (de)");
    // The name they typed when joining, when they gave one.
    expect(participantLabel("client-3fa29c1d", "es", "client-0000", "Ana")).toBe("Ana (es)");
    expect(participantLabel("client-3fa29c1d", "es", "client-0000", "")).toBe("Participant 3fa2 (es)");
  });

  it("reads joined.participants as identities, and participant_info as {identity, language, name}", () => {
    expect(participantOf("client-1")).toEqual({ identity: "client-1", language: undefined, name: undefined });
    expect(participantOf({ identity: "client-1", language: "es", name: "Ana" })).toEqual({
      identity: "client-1",
      language: "es",
      name: "Ana",
    });
  });
});

describe("audio", () => {
  it("sends PCM16 little-endian, clipped, and reads float32 little-endian", () => {
    const bytes = new DataView(toPcm16Le([0, 0.5, -1, 2, -2]));
    expect([0, 1, 2, 3, 4].map((i) => bytes.getInt16(i * 2, true))).toEqual([
      0, 16384, -32767, 32767, -32767,
    ]);
    const float = new ArrayBuffer(8);
    new DataView(float).setFloat32(0, 0.25, true);
    new DataView(float).setFloat32(4, -1, true);
    expect([...fromFloat32Le(float)]).toEqual([0.25, -1]);
  });

  it("cuts the microphone's blocks into whole frames, keeping the rest for the next block", () => {
    const framer = new Framer(4);
    expect(framer.push(new Float32Array([1, 2, 3]))).toEqual([]);
    const frames = framer.push(new Float32Array([4, 5, 6, 7, 8, 9]));
    expect(frames.map((frame) => [...frame])).toEqual([
      [1, 2, 3, 4],
      [5, 6, 7, 8],
    ]);
    expect(framer.push(new Float32Array([10, 11, 12])).map((frame) => [...frame])).toEqual([[9, 10, 11, 12]]);
  });
});

describe("the service's messages on the page", () => {
  it("name languages as people do, not as request fields", () => {
    const nameOf = (code: string) => languageName(code, ["en"]);
    expect(peoplesMessage('languages[1] "de" has no voice output with the configured engines', nameOf)).toBe(
      "German (de) has no voice output with the configured engines",
    );
    expect(peoplesMessage('language "xx" is not one of the room\'s languages', nameOf)).toBe(
      "xx is not one of the room's languages",
    );
    expect(peoplesMessage("no room capacity right now", nameOf)).toBe("no room capacity right now");
  });
});
