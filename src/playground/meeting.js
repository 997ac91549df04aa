// The translated-meeting page at /meeting: plain JavaScript, nothing to build. Without an
// invitation it makes a meeting (the API key stays in this page's memory, sent only in the
// Authorization header) and gives one share link per participant; a share link carries the room,
// a join token and a language in its fragment (#room=…&token=…&language=…[&livekit=…]), which
// browsers never send to a server. Joining: the embedded room server over a WebSocket at this
// page's own origin, or LiveKit through livekit-client (served by the service) when the link
// names a LiveKit server. The connections are meeting-room.js's, the pure logic meeting-logic.js's.
//
// Test surface (test/system/meeting.test.ts): #status; body[data-state] (idle, joining, joined,
// left, ended, failed, disconnected); body[data-audio-samples] (translated speech samples played,
// embedded rooms); body[data-identity]; #participants li[data-identity][data-language][data-self];
// #speaking[data-identities]; #captions .caption[data-kind=original|translated][data-participant]
// [data-language][data-final]; buttons #join, #mute (aria-pressed), #leave, #end; share links
// #links .share-link[data-language].
/* global window */
import {
  TRANSLATOR_IDENTITY,
  inviteLink,
  languageName,
  livekitUrlOf,
  parseInvite,
  participantLabel,
  participantOf,
} from "/playground/meeting-logic.js";
import { joinRoom } from "/playground/meeting-room.js";

const $ = (id) => document.getElementById(id);
const locales = [navigator.language, "en"];
const nameOf = (code) => languageName(code, locales);

function setStatus(text, isError = false) {
  $("status").textContent = text;
  $("status").classList.toggle("error", isError);
}

function setState(state) {
  document.body.dataset.state = state;
}

function describe(error) {
  return error instanceof Error ? error.message : String(error);
}

// ---------------------------------------------------------------- making a meeting (creator)

/** The meeting this page made: its API key (memory only), room and languages. */
let creator;

async function post(path, body) {
  const response = await fetch(path, {
    method: "POST",
    headers: { authorization: `Bearer ${creator.apiKey}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const answer = await response.json().catch(() => ({}));
  if (!response.ok) {
    const { code, message } = answer.error ?? {};
    throw new Error(code ? `${code}: ${message}` : `HTTP ${response.status}`);
  }
  return answer;
}

/**
 * The languages a meeting can use here: spoken by the configured engines (voice output) and either
 * recognized, or reached by translation from a recognized language: those are listen-only (their
 * participants hear the others and are not heard), as the server decides too.
 */
async function loadLanguages() {
  const report = await fetch("/v1/languages").then((response) => response.json());
  const recognized = new Set(report.recognition.map((entry) => entry.language));
  const voiced = new Set(report.voice_output.map((entry) => entry.language));
  const reached = new Set(
    report.translation.filter((pair) => recognized.has(pair.from)).map((pair) => pair.to),
  );
  const usable = [...voiced].filter((code) => recognized.has(code) || reached.has(code));
  const label = (code) => (recognized.has(code) ? nameOf(code) : `${nameOf(code)} (listens only)`);
  const options = usable.map((code) => [code, label(code)]).sort(([, a], [, b]) => a.localeCompare(b));
  const preferred = [navigator.language.split("-")[0], "en", "es", "de", "fr"].filter((code) =>
    usable.includes(code),
  );
  // A recognized language first, so the creator can speak.
  const defaults = [
    ...new Set([...preferred.filter((code) => recognized.has(code)), ...preferred, ...usable]),
  ];
  const tier = report.recognition_tier;
  if (usable.length < 2 || !usable.some((code) => recognized.has(code)))
    setStatus(
      `A meeting needs two languages this server speaks, one of them recognized; it has ${usable.map(nameOf).join(", ") || "none"}.` +
        (tier?.upgrade ? ` ${tier.summary} — ${tier.upgrade}` : ""),
      true,
    );
  else if (tier?.upgrade) setStatus(`${tier.summary}: the other languages listen only — ${tier.upgrade}`);
  document.querySelectorAll("#languages select").forEach((select, index) => {
    const none = index === 0 ? [] : [["", "—"]];
    const selected = index < 2 ? (defaults[index] ?? "") : "";
    select.replaceChildren(
      ...[...none, ...options].map(([value, label]) => {
        const option = new Option(label, value);
        option.selected = value === selected;
        return option;
      }),
    );
  });
}

function addShareLink(access, language) {
  const link = inviteLink(location.origin, {
    room: creator.room,
    token: access.token,
    language,
    livekit: creator.livekit,
  });
  const item = document.createElement("li");
  item.dataset.language = language;
  const anchor = Object.assign(document.createElement("a"), {
    className: "share-link",
    href: link,
    target: "_blank",
    rel: "noopener noreferrer",
    textContent: link,
  });
  anchor.dataset.language = language;
  anchor.dataset.identity = access.identity ?? "";
  const copy = Object.assign(document.createElement("button"), { textContent: "Copy" });
  // Without the clipboard (a plain-HTTP page not at localhost), the link is selected to copy by hand.
  const select = () => window.getSelection()?.selectAllChildren(anchor);
  copy.addEventListener("click", () => {
    if (!navigator.clipboard) return select();
    navigator.clipboard.writeText(link).then(() => (copy.textContent = "Copied"), select);
  });
  item.append(`${nameOf(language)}: `, anchor, copy);
  $("links").append(item);
}

async function addParticipantLink(language) {
  const access = await post(`/api/beta1/session/${encodeURIComponent(creator.room)}/participants`, {
    language,
  });
  addShareLink(access, access.language ?? language);
}

$("create-meeting").addEventListener("click", async () => {
  const apiKey = $("api-key").value.trim();
  if (!apiKey) return setStatus("Enter an API key first.", true);
  const languages = [
    ...new Set([...document.querySelectorAll("#languages select")].map((s) => s.value).filter(Boolean)),
  ];
  if (languages.length < 2) return setStatus("Choose at least two different languages.", true);
  $("create-meeting").disabled = true;
  setStatus("Creating the meeting…");
  let access;
  try {
    creator = { apiKey };
    access = await post("/api/beta1/session", {
      languages,
      voice_type: $("voice").value,
      language: languages[0],
    });
  } catch (error) {
    creator = undefined;
    $("create-meeting").disabled = false;
    return setStatus(`Could not create the meeting: ${describe(error)}`, true);
  }
  creator.room = access.room_name;
  creator.languages = access.languages ?? languages;
  creator.livekit = livekitUrlOf(access);
  let linkError;
  for (const language of creator.languages.slice(1))
    await addParticipantLink(language).catch((error) => (linkError ??= error));
  $("add-language").replaceChildren(...creator.languages.map((code) => new Option(nameOf(code), code)));
  $("create").hidden = true;
  $("invite").hidden = false;
  $("end").hidden = false;
  showMeeting({
    room: access.room_name,
    token: access.token,
    language: access.language ?? languages[0],
    ...(creator.livekit ? { livekit: creator.livekit } : {}),
  });
  if (linkError)
    setStatus(`The meeting is ready, but a link could not be made: ${describe(linkError)}`, true);
  else if (access.listen_only?.length)
    setStatus(
      `The meeting is ready. ${access.listen_only.map(nameOf).join(", ")}: these participants hear the ` +
        "others but are not heard (no recognizer for their language here).",
    );
  else setStatus("The meeting is ready: send the links, then join.");
});

$("add-link").addEventListener("click", async () => {
  $("add-link").disabled = true;
  try {
    await addParticipantLink($("add-language").value);
  } catch (error) {
    setStatus(`Could not add a participant: ${describe(error)}`, true);
  } finally {
    $("add-link").disabled = false;
  }
});

$("end").addEventListener("click", async () => {
  $("end").disabled = true;
  try {
    await post("/api/beta1/session/end", { session_id: creator.room });
    // A page in the meeting learns it from its connection closing; one not in it, here.
    if (!call) meetingOver({ state: "ended", text: "The meeting has ended." });
  } catch (error) {
    $("end").disabled = false;
    setStatus(`Could not end the meeting: ${describe(error)}`, true);
  }
});

// ---------------------------------------------------------------- the meeting view

/** The invitation this page joins with: from its link, or the creator's own. */
let invite;
/** The connection while in the meeting: { setMuted(muted), leave() }. */
let call;
let self;
/** identity → language (undefined until known) of everyone in the meeting, this page included. */
const present = new Map();
/** identity → timer clearing their "speaking" mark. */
const speaking = new Map();
/** `${participant} ${correlation_id}` → the caption item of one utterance. */
const utterances = new Map();

function showMeeting(access) {
  invite = access;
  $("meeting").hidden = false;
  $("meeting-info").textContent = `You speak ${nameOf(access.language ?? "")} and hear everyone else in it.`;
  if (!creator) setStatus("Press “Join the meeting” and allow the microphone.");
}

const labelOf = (identity) => participantLabel(identity, present.get(identity), self);

/** The room's languages, as `joined` said them. */
let roomLanguages;
/** Said after the meeting's status while in it (no microphone). */
let note = "";

function renderParticipants() {
  if (document.body.dataset.state === "joined") {
    const others = present.size - 1;
    setStatus(
      `In the meeting${roomLanguages ? ` (${roomLanguages.map(nameOf).join(", ")})` : ""}: ` +
        `${others === 0 ? "nobody else yet" : others === 1 ? "1 other participant" : `${others} other participants`}.` +
        note,
      note !== "",
    );
  }
  $("participants").replaceChildren(
    ...[...present].map(([identity, language]) => {
      const item = document.createElement("li");
      Object.assign(item.dataset, { identity, language: language ?? "", self: String(identity === self) });
      item.textContent = labelOf(identity);
      item.classList.toggle("speaking", speaking.has(identity));
      return item;
    }),
  );
}

function renderSpeaking() {
  const who = [...speaking.keys()].filter((identity) => present.has(identity));
  $("speaking").dataset.identities = who.join(" ");
  $("speaking").textContent = who.length ? `Speaking: ${who.map(labelOf).join(", ")}` : "";
  for (const item of $("participants").children)
    item.classList.toggle("speaking", speaking.has(item.dataset.identity));
}

/** Marks `identity` as speaking for `ms` more milliseconds. */
function markSpeaking(identity, ms) {
  if (!identity) return;
  const known = speaking.has(identity);
  clearTimeout(speaking.get(identity));
  speaking.set(
    identity,
    setTimeout(() => {
      speaking.delete(identity);
      renderSpeaking();
    }, ms),
  );
  if (!known) renderSpeaking();
}

/** Who is speaking right now, when the room says so (LiveKit's active speakers). */
function setSpeaking(identities) {
  for (const [identity, timer] of speaking) {
    if (identities.includes(identity)) continue;
    clearTimeout(timer);
    speaking.delete(identity);
  }
  for (const identity of identities) if (!speaking.has(identity)) speaking.set(identity, undefined);
  renderSpeaking();
}

function learnLanguage(identity, language) {
  if (!identity || identity === TRANSLATOR_IDENTITY || !language || present.get(identity) === language)
    return;
  if (!present.has(identity) && identity !== self) return;
  present.set(identity, language);
  renderParticipants();
  for (const label of document.querySelectorAll(`#captions .who[data-participant="${CSS.escape(identity)}"]`))
    label.textContent = labelOf(identity);
}

/**
 * A caption line: one item per utterance (speaker and correlation id), holding its original and
 * the translation this page received. Every translation received is shown, whatever its language:
 * the server decides who hears what.
 */
function showTranscript(message) {
  const kind = message.type === "original_transcript" ? "original" : "translated";
  const participant = message.participant ?? "";
  const language =
    message.language ??
    (kind === "original"
      ? (message.detected_language ?? message.source_language)
      : message.target_language) ??
    "";
  const text = kind === "translated" ? (message.translated_text ?? message.text) : message.text;
  if (kind === "original") {
    learnLanguage(participant, language);
    if (participant !== self) markSpeaking(participant, message.is_final ? 1000 : 2500);
  }
  const key = `${participant} ${message.correlation_id}`;
  let item = utterances.get(key);
  if (!item) {
    item = document.createElement("li");
    Object.assign(item.dataset, { participant, correlationId: message.correlation_id ?? "" });
    const who = Object.assign(document.createElement("span"), {
      className: "who",
      textContent: labelOf(participant),
    });
    who.dataset.participant = participant;
    item.append(who);
    utterances.set(key, item);
    const list = $("captions");
    const follow =
      list.lastElementChild === null ||
      window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
    list.append(item);
    if (follow) item.scrollIntoView({ block: "end" });
  }
  let line = [...item.querySelectorAll(".caption")].find(
    (candidate) => candidate.dataset.kind === kind && candidate.dataset.language === language,
  );
  if (!line) {
    line = Object.assign(document.createElement("p"), { className: "caption" });
    Object.assign(line.dataset, { kind, participant, language });
    item.append(line);
  }
  line.dataset.final = String(message.is_final === true);
  line.textContent = `[${language}] ${text}`;
}

/** What a connection reports, embedded or LiveKit, in the embedded server's message shapes. */
function onRoomMessage(message) {
  switch (message.type) {
    case "joined": {
      self = message.identity;
      document.body.dataset.identity = self;
      present.clear();
      present.set(self, message.language ?? invite.language);
      for (const entry of message.participants ?? []) {
        const { identity, language } = participantOf(entry);
        if (identity && identity !== TRANSLATOR_IDENTITY) present.set(identity, language);
      }
      roomLanguages = message.languages;
      setState("joined");
      renderParticipants();
      break;
    }
    case "participant_joined":
      if (message.identity === TRANSLATOR_IDENTITY) break;
      present.set(message.identity, message.language ?? present.get(message.identity));
      renderParticipants();
      break;
    case "participant_left":
      present.delete(message.identity);
      clearTimeout(speaking.get(message.identity));
      speaking.delete(message.identity);
      renderParticipants();
      renderSpeaking();
      break;
    case "original_transcript":
    case "translated_transcript":
      showTranscript(message);
      break;
    case "error":
      setStatus(message.error ?? message.message ?? "error", true);
      break;
  }
}

/** The connection closed: `outcome` is { state, text } (meeting-logic.js's closeMessage). */
function meetingOver(outcome) {
  call = undefined;
  setState(outcome.state);
  setStatus(outcome.text, outcome.state !== "left");
  for (const timer of speaking.values()) clearTimeout(timer);
  speaking.clear();
  renderSpeaking();
  $("mute").disabled = true;
  $("mute").setAttribute("aria-pressed", "false");
  $("mute").textContent = "Mute";
  $("leave").disabled = true;
  if (outcome.state === "ended") {
    present.clear();
    renderParticipants();
    $("join").disabled = true;
    for (const id of ["end", "add-link"]) $(id).disabled = true;
  } else {
    $("join").disabled = false;
    $("join").textContent = "Join again";
  }
}

// ---------------------------------------------------------------- controls

$("join").addEventListener("click", async () => {
  if (!invite || call) return;
  $("join").disabled = true;
  setState("joining");
  setStatus("Joining…");
  $("captions").replaceChildren();
  note = "";
  utterances.clear();
  try {
    call = await joinRoom(invite, {
      message: onRoomMessage,
      closed: meetingOver,
      speaking: setSpeaking,
      language: learnLanguage,
      loud: () => markSpeaking(self, 600),
      note(text) {
        note = text;
        renderParticipants();
      },
    });
    $("mute").disabled = false;
    $("leave").disabled = false;
  } catch (error) {
    meetingOver({ state: "failed", text: `Could not join: ${describe(error)}` });
  }
});

$("mute").addEventListener("click", () => {
  const muted = $("mute").getAttribute("aria-pressed") !== "true";
  call?.setMuted(muted);
  $("mute").setAttribute("aria-pressed", String(muted));
  $("mute").textContent = muted ? "Unmute" : "Mute";
  if (muted) {
    clearTimeout(speaking.get(self));
    speaking.delete(self);
    renderSpeaking();
  }
});

$("leave").addEventListener("click", () => call?.leave());

// Closing the tab leaves the meeting (the server would notice the connection drop anyway).
window.addEventListener("pagehide", () => call?.leave());

const linked = parseInvite(location.hash);
if (linked) {
  showMeeting(linked);
} else {
  $("create").hidden = false;
  setStatus("");
  loadLanguages().catch((error) => setStatus(`Cannot read the server's languages: ${describe(error)}`, true));
}
