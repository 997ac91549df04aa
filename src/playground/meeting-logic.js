// The meeting page's pure logic: links, URLs, names, the LiveKit track choice and audio framing.
// Plain JavaScript with no DOM access, so Node imports it too (test/unit/meeting-logic.test.ts);
// meeting-logic.d.ts declares its types for the tests.
/* global URL, URLSearchParams */

/** The translator's identity in every room, embedded or LiveKit. */
export const TRANSLATOR_IDENTITY = "translation-agent";
/** The track the translator speaks a spec room's target language on (Pinch's clients use it). */
export const SPEC_TRACK = "translated-audio";
export const INPUT_RATE = 16000;
/** The microphone as a meeting wants it: the browser's echo cancellation, noise suppression and level. */
export const MICROPHONE = Object.freeze({
  channelCount: 1,
  echoCancellation: true,
  noiseSuppression: true,
  autoGainControl: true,
});

/**
 * A share link: the meeting page with the participant's invitation in the fragment (never sent to
 * any server, and no API key in it). The invitation holds for the meeting's life: opening it asks
 * the service for a fresh room token (POST /api/beta1/invitation/join).
 */
export function inviteLink(origin, invitation) {
  return `${origin}/meeting#${new URLSearchParams({ join: invitation })}`;
}

/**
 * A link made by hand from a room token (`POST /api/beta1/session/{room}/participants`):
 * #room=…&token=…&language=…[&livekit=…]. It holds until the token expires.
 */
export function tokenLink(origin, { room, token, language, livekit }) {
  const fragment = new URLSearchParams({ room, token, language });
  if (livekit) fragment.set("livekit", livekit);
  return `${origin}/meeting#${fragment}`;
}

/** The URL schemes a LiveKit server is reached at (livekit-client takes http(s) for ws(s)). */
const LIVEKIT_SCHEMES = new Set(["ws:", "wss:", "http:", "https:"]);

/** `url` when it is a LiveKit server's address a page may connect to, else undefined. */
export function liveKitServerUrl(url) {
  try {
    return LIVEKIT_SCHEMES.has(new URL(url).protocol) ? url : undefined;
  } catch {
    return undefined;
  }
}

/**
 * What a link's fragment (`location.hash`) holds: { invitation } (a share link), { room, token,
 * language, livekit? } (a token link), { error } (a link the page refuses, saying why), or
 * undefined (no invitation: the page makes a meeting).
 */
export function parseInvite(hash) {
  const fragment = new URLSearchParams(String(hash ?? "").replace(/^#/u, ""));
  const invitation = fragment.get("join");
  if (invitation !== null)
    return /^[A-Za-z0-9_-]{20,128}$/u.test(invitation)
      ? { invitation }
      : { error: "This link is incomplete or damaged: ask for the link again." };
  const [room, token, language] = ["room", "token", "language"].map((name) => fragment.get(name) ?? "");
  if (!room || !token) return undefined;
  const livekit = fragment.get("livekit");
  if (livekit !== null && !liveKitServerUrl(livekit))
    return { error: "This link names a meeting server that is not a web address (ws, wss, http or https)." };
  return { room, token, language: language || undefined, ...(livekit ? { livekit } : {}) };
}

/**
 * Whether a room's `url` (from POST /api/beta1/session) is the service's own embedded room
 * server (`ws(s)://<service>/rooms/<room_name>`) rather than a LiveKit server.
 */
export function isEmbeddedRoomUrl(url, room) {
  try {
    return new URL(url).pathname.endsWith(`/rooms/${encodeURIComponent(room)}`);
  } catch {
    return false;
  }
}

/** The LiveKit URL to put in share links: undefined for the embedded room server. */
export function livekitUrlOf(access) {
  return isEmbeddedRoomUrl(access.url, access.room_name) ? undefined : access.url;
}

/**
 * Where to join an embedded room from a page at `origin`: the page's own origin (http→ws), so it
 * works at localhost and behind a proxy whatever PUBLIC_BASE_URL says.
 */
export function roomSocketUrl(origin, room, token) {
  const base = origin.replace(/^http/u, "ws");
  return `${base}/rooms/${encodeURIComponent(room)}?access_token=${encodeURIComponent(token)}`;
}

/**
 * Which of the translator's audio tracks a listener of `language` subscribes to (LiveKit): the
 * track the translator's attributes say carries that language (`track:<name>`: language, in
 * `trackLanguages`); else by name, `translated-audio-<language>`; `translated-audio` (a spec room's
 * target) only when the translator publishes no language-named track at all; otherwise none yet
 * (the translator publishes a language's track once someone hears it).
 */
export function translatorTrackFor(trackNames, language, trackLanguages = {}) {
  const names = [...trackNames];
  const wanted = language ? String(language).toLowerCase() : undefined;
  if (wanted) {
    const declared = names.find((name) => String(trackLanguages[name] ?? "").toLowerCase() === wanted);
    if (declared) return declared;
    const own = names.find((name) => name.toLowerCase() === `${SPEC_TRACK}-${wanted}`);
    if (own) return own;
  }
  const languageNamed = names.some((name) => name.startsWith(`${SPEC_TRACK}-`));
  if (!languageNamed && names.includes(SPEC_TRACK)) return SPEC_TRACK;
  return undefined;
}

/** The languages of the translator's tracks, from its attributes (`track:<name>`: language). */
export function trackLanguagesOf(attributes = {}) {
  return Object.fromEntries(
    Object.entries(attributes)
      .filter(([key]) => key.startsWith("track:"))
      .map(([key, value]) => [key.slice("track:".length), value]),
  );
}

/** "English (en)" in the reader's language, or the code when the runtime does not know it. */
export function languageName(code, locales = ["en"]) {
  try {
    const name = new Intl.DisplayNames(locales, { type: "language" }).of(code);
    return name && name !== code ? `${name} (${code})` : code;
  } catch {
    return code;
  }
}

/**
 * How the page names a participant: "You" for itself; others by the name they gave, else
 * "Participant 3fa2" from their identity (`client-<hex>`, the same on every page); with their
 * language: "Ana (es)". Shown as text, never markup.
 */
export function participantLabel(identity, language, self, name) {
  if (identity === self) return "You";
  const id = String(identity ?? "");
  const short = (/^client-([0-9a-z]+)/iu.exec(id)?.[1] ?? id).slice(0, 4);
  return `${name || `Participant ${short}`}${language ? ` (${language})` : ""}`;
}

/** The identity, language and name of an entry of `joined.participant_info` (or an identity alone). */
export function participantOf(entry) {
  if (typeof entry === "string") return { identity: entry, language: undefined, name: undefined };
  return {
    identity: String(entry?.identity ?? ""),
    language: entry?.language || undefined,
    name: entry?.name || undefined,
  };
}

/**
 * A service's error message in people's words: the request fields it names (`languages[1] "de"`,
 * `language "de"`) become the language's name ("German (de)").
 */
export function peoplesMessage(message, nameOf) {
  return String(message).replace(/\blanguages?(?:\[\d+\])? "([^"]*)"/gu, (_, code) => nameOf(code));
}

/** What the page says when the room's connection closes (embedded: WebSocket close code and reason). */
export function closeMessage(code, reason, { leaving = false, joined = true } = {}) {
  if (leaving) return { state: "left", text: "You left the meeting." };
  if (code === 1000 && reason === "room closed") return { state: "ended", text: "The meeting has ended." };
  if (/replaced/u.test(reason ?? ""))
    return { state: "left", text: "You joined this meeting from another tab or device." };
  if (!joined)
    return {
      state: "failed",
      text: "Could not join: the meeting may have ended, or the link expired (ask for a new one).",
    };
  return {
    state: "disconnected",
    text: `Disconnected from the meeting (${code}${reason ? ` ${reason}` : ""}).`,
  };
}

/** Float samples in [-1, 1] as PCM16 little-endian bytes. */
export function toPcm16Le(samples) {
  const bytes = new ArrayBuffer(samples.length * 2);
  const view = new DataView(bytes);
  for (let i = 0; i < samples.length; i++) {
    const value = Math.max(-1, Math.min(1, samples[i]));
    view.setInt16(i * 2, Math.round(value * 32767), true);
  }
  return bytes;
}

/** Float32 little-endian bytes (the translator's speech) as samples. */
export function fromFloat32Le(bytes) {
  const view = new DataView(bytes);
  const samples = new Float32Array(Math.floor(bytes.byteLength / 4));
  for (let i = 0; i < samples.length; i++) samples[i] = view.getFloat32(i * 4, true);
  return samples;
}

/** Cuts blocks of samples, as the microphone delivers them, into frames of `size` samples. */
export class Framer {
  constructor(size) {
    this.size = size;
    this.pending = new Float32Array(0);
  }

  /** The whole frames `block` completes (the rest waits for the next block). */
  push(block) {
    const joined = new Float32Array(this.pending.length + block.length);
    joined.set(this.pending);
    joined.set(block, this.pending.length);
    const frames = [];
    let offset = 0;
    for (; offset + this.size <= joined.length; offset += this.size)
      frames.push(joined.subarray(offset, offset + this.size));
    this.pending = joined.slice(offset);
    return frames;
  }
}

/** What the page says when it leaves a LiveKit room, from the DisconnectReason's name. */
export function livekitCloseMessage(reason, { leaving = false } = {}) {
  if (leaving || reason === "CLIENT_INITIATED") return { state: "left", text: "You left the meeting." };
  if (reason === "ROOM_DELETED" || reason === "ROOM_CLOSED")
    return { state: "ended", text: "The meeting has ended." };
  if (reason === "DUPLICATE_IDENTITY")
    return { state: "left", text: "You joined this meeting from another tab or device." };
  return { state: "disconnected", text: `Disconnected from the meeting (${reason ?? "unknown reason"}).` };
}
