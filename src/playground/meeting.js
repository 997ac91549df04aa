// The translated-meeting page at /meeting: plain JavaScript, nothing to build. Without an
// invitation it makes a meeting (the API key stays in this page's memory, sent only in the
// Authorization header) and gives one share link per participant: #join=<invitation> in the
// fragment, which browsers never send to a server. An invitation holds for the meeting's life;
// joining turns it into a fresh room token (POST /api/beta1/invitation/join), and the page checks
// it while open (POST /api/beta1/invitation): to learn that the meeting ended and why, and, on the
// creator's page, to keep an empty meeting open. The creator's page keeps its meeting (never the
// API key) in sessionStorage, so a reload brings it back. A link made by hand from a room token
// (#room=…&token=…&language=…[&livekit=…]) works until the token expires. Joining: the embedded
// room server over a WebSocket at this page's own origin, or LiveKit through livekit-client
// (served by the service). The connections are meeting-room.js's, the pure logic meeting-logic.js's.
//
// Test surface (test/system/meeting*.test.ts): #status; #listen-only; body[data-state] (idle,
// joining, joined, left, ended, failed, disconnected); body[data-audio-samples] (translated speech
// samples played, embedded rooms); body[data-identity]; #participants
// li[data-identity][data-language][data-self]; #speaking[data-identities]; #captions
// .caption[data-kind=original|translated][data-participant][data-language][data-final]; #name;
// body[data-room] (once joining); buttons #join, #mute (aria-pressed), #leave, #end; #owner-key;
// #new-meeting; share links #links .share-link[data-language].
/* global window, sessionStorage, localStorage */
import {
  TRANSLATOR_IDENTITY,
  languageName,
  livekitUrlOf,
  parseInvite,
  participantLabel,
  participantOf,
} from "/playground/meeting-logic.js";
import { loadLanguages, post as postTo, shareLinkItem } from "/playground/meeting-create.js";
import { showCaption } from "/playground/meeting-captions.js";
import { joinRoom } from "/playground/meeting-room.js";

const $ = (id) => document.getElementById(id);
const post = (path, body, apiKey) => postTo(path, body, apiKey, nameOf);
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

/**
 * The meeting this page made: { room, languages, livekit, invitation (the creator's own), links:
 * [{ language, invitation, identity }] }, and its API key in memory only (undefined after a reload).
 */
let creator;
/** Where the creator's meeting is kept across reloads of this tab (never the API key). */
const KEPT = "relay.meeting";

function keepMeeting() {
  const { room, languages, invitation, listenOnly, links } = creator;
  sessionStorage.setItem(KEPT, JSON.stringify({ room, languages, invitation, listenOnly, links }));
}

/** The API key for the creator's requests: this page's memory, or typed again after a reload. */
function ownerKey() {
  const key = creator.apiKey ?? ($("owner-key").value.trim() || undefined);
  if (!key) throw new Error("type the API key again first (this page was reloaded)");
  return key;
}

async function addParticipantLink(language) {
  const access = await post(
    `/api/beta1/session/${encodeURIComponent(creator.room)}/participants`,
    { language },
    ownerKey(),
  );
  const link = {
    language: access.language ?? language,
    invitation: access.invitation,
    identity: access.identity,
  };
  creator.links.push(link);
  keepMeeting();
  $("links").append(shareLinkItem(link, nameOf));
}

/** The creator's view of their meeting: its links, End, and the meeting itself. */
function showCreatorMeeting() {
  $("create").hidden = true;
  $("invite").hidden = false;
  $("end").hidden = false;
  $("add-language").replaceChildren(...creator.languages.map((code) => new Option(nameOf(code), code)));
  $("links").replaceChildren();
  $("links").append(...creator.links.map((link) => shareLinkItem(link, nameOf)));
  $("owner-key-controls").hidden = creator.apiKey !== undefined;
  showMeeting({ invitation: creator.invitation });
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
    access = await post(
      "/api/beta1/session",
      { languages, voice_type: $("voice").value, language: languages[0] },
      apiKey,
    );
  } catch (error) {
    $("create-meeting").disabled = false;
    return setStatus(`Could not create the meeting: ${describe(error)}`, true);
  }
  creator = {
    apiKey,
    room: access.room_name,
    languages: access.languages ?? languages,
    invitation: access.invitation,
    listenOnly: access.listen_only ?? [],
    links: [],
  };
  keepMeeting();
  let linkError;
  for (const language of creator.languages.slice(1))
    await addParticipantLink(language).catch((error) => (linkError ??= error));
  showCreatorMeeting();
  if (linkError)
    setStatus(`The meeting is ready, but a link could not be made: ${describe(linkError)}`, true);
  else if (creator.listenOnly.length)
    setStatus(
      `The meeting is ready. ${creator.listenOnly.map(nameOf).join(", ")}: these participants hear the ` +
        "others but nobody hears them (this server cannot recognize their language).",
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
    ending = true;
    await post("/api/beta1/session/end", { session_id: creator.room }, ownerKey());
    meetingEnded("You ended the meeting.");
  } catch (error) {
    ending = false;
    void checkInvitation();
    $("end").disabled = false;
    setStatus(`Could not end the meeting: ${describe(error)}`, true);
  }
});

$("new-meeting").addEventListener("click", () => sessionStorage.removeItem(KEPT));

// ---------------------------------------------------------------- the meeting view

/** What this page joins with: { invitation } (a share link) or a token link's { room, token, language, livekit? }. */
let invite;
/** The connection while in the meeting: { setMuted(muted), leave() }. */
let call;
let self;
/** This page's participant cannot be heard (no recognizer for their language here). */
let listenOnly = false;
/** Set once the meeting has ended: nothing more is offered but a new meeting. */
let over = false;
/**
 * The creator asked to end the meeting: its connection closing, or a check of the link, says so
 * before the answer comes; the page waits for the answer ("You ended the meeting.").
 */
let ending = false;
/** identity → { language, name } (each undefined until known) of everyone in the meeting, this page included. */
const present = new Map();
/** identity → timer clearing their "speaking" mark. */
const speaking = new Map();
/** `${participant} ${correlation_id}` → the caption item of one utterance. */
const utterances = new Map();

function showMeeting(access) {
  invite = access;
  $("meeting").hidden = false;
  $("name-controls").hidden = access.invitation === undefined;
  $("name").value = localStorage.getItem("relay.name") ?? "";
  if (access.language) describeLanguage(access.language);
  if (access.invitation) void checkInvitation();
  else if (!creator) setStatus("Press “Join the meeting” and allow the microphone.");
}

function describeLanguage(language) {
  $("meeting-info").textContent = `You speak ${nameOf(language)} and hear everyone else in it.`;
}

/** Says plainly, before and after joining, when nobody will hear this participant. */
function showListenOnly(language) {
  listenOnly = true;
  $("listen-only").hidden = false;
  $("listen-only").textContent =
    `Nobody will hear you: this server cannot recognize ${nameOf(language)} speech. ` +
    `You will hear everyone else translated into ${nameOf(language)}, with captions.`;
}

/** The link's meeting as the service sees it now; checked again while the page is open. */
let checkTimer;
async function checkInvitation() {
  clearTimeout(checkTimer);
  if (over || ending) return;
  let status;
  try {
    status = await post("/api/beta1/invitation", { invitation: invite.invitation });
  } catch (error) {
    if (error.code === "not_found")
      return meetingEnded(`This link does not open a meeting: ${describe(error)}`);
    // The service is unreachable for now (restarting, a network blip): try again later.
    checkTimer = setTimeout(checkInvitation, 15_000);
    return;
  }
  // The creator ended it meanwhile: their answer says so.
  if (ending) return;
  if (status.status === "ended") return meetingEnded(status.message);
  if (status.language) describeLanguage(status.language);
  if (status.listen_only) showListenOnly(status.language);
  if (document.body.dataset.state === "idle" && !creator)
    setStatus("Type your name, press “Join the meeting” and allow the microphone.");
  checkTimer = setTimeout(checkInvitation, status.check_after_sec * 1000);
}

/** The meeting is over: the page says why and offers only a new meeting. */
function meetingEnded(text) {
  if (over) return;
  over = true;
  clearTimeout(checkTimer);
  if (creator) sessionStorage.removeItem(KEPT);
  call?.leave();
  call = undefined;
  setState("ended");
  setStatus(text, false);
  for (const timer of speaking.values()) clearTimeout(timer);
  speaking.clear();
  present.clear();
  renderParticipants();
  renderSpeaking();
  for (const id of ["invite", "create", "meeting", "listen-only", "operator"]) $(id).hidden = true;
  $("after-end").hidden = false;
}

const labelOf = (identity) => {
  const { language, name } = present.get(identity) ?? {};
  return participantLabel(identity, language, self, name);
};

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
    ...[...present].map(([identity, { language }]) => {
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

function relabel(identity) {
  renderParticipants();
  for (const label of document.querySelectorAll(`#captions .who[data-participant="${CSS.escape(identity)}"]`))
    label.textContent = labelOf(identity);
}

function learnLanguage(identity, language) {
  if (!identity || identity === TRANSLATOR_IDENTITY || !language) return;
  const known = present.get(identity);
  if (!known || known.language === language) return;
  present.set(identity, { ...known, language });
  relabel(identity);
}

/** A transcript: a caption line (meeting-captions.js); an original also says who is speaking. */
function showTranscript(message) {
  const { kind, participant, language } = showCaption($("captions"), utterances, message, labelOf);
  if (kind !== "original") return;
  learnLanguage(participant, language);
  if (participant !== self) markSpeaking(participant, message.is_final ? 1000 : 2500);
}

/** What a connection reports, embedded or LiveKit, in the embedded server's message shapes. */
function onRoomMessage(message) {
  switch (message.type) {
    case "joined": {
      self = message.identity;
      document.body.dataset.identity = self;
      present.clear();
      present.set(self, { language: message.language ?? invite.language, name: undefined });
      for (const entry of message.participant_info ?? message.participants ?? []) {
        const { identity, language, name } = participantOf(entry);
        if (identity && identity !== TRANSLATOR_IDENTITY) present.set(identity, { language, name });
      }
      roomLanguages = message.languages;
      setState("joined");
      renderParticipants();
      break;
    }
    case "participant_joined": {
      if (message.identity === TRANSLATOR_IDENTITY) break;
      const known = present.get(message.identity) ?? {};
      present.set(message.identity, {
        language: message.language ?? known.language,
        name: message.name ?? known.name,
      });
      relabel(message.identity);
      break;
    }
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
  if (over || ending) return;
  // Ended while in it: a share link's page asks the service why.
  if (outcome.state === "ended" && invite.invitation) return void checkInvitation();
  if (outcome.state === "ended") return meetingEnded(outcome.text);
  setState(outcome.state);
  setStatus(outcome.text, outcome.state !== "left");
  for (const timer of speaking.values()) clearTimeout(timer);
  speaking.clear();
  renderSpeaking();
  $("mute").disabled = true;
  $("mute").setAttribute("aria-pressed", "false");
  $("mute").textContent = "Mute";
  $("leave").disabled = true;
  $("join").disabled = false;
  $("join").textContent = "Join again";
}

// ---------------------------------------------------------------- controls

/** The room access to join with: a fresh token for a share link, or a token link's own. */
async function accessOf(invitation) {
  if (!invitation.invitation) return invitation;
  const name = $("name").value.trim();
  localStorage.setItem("relay.name", name);
  const access = await post("/api/beta1/invitation/join", { invitation: invitation.invitation, name });
  const livekit = livekitUrlOf(access);
  return {
    room: access.room_name,
    token: access.token,
    language: access.language,
    ...(livekit ? { livekit } : {}),
  };
}

$("join").addEventListener("click", async () => {
  if (!invite || call || over) return;
  $("join").disabled = true;
  setState("joining");
  setStatus("Joining…");
  $("captions").replaceChildren();
  note = "";
  utterances.clear();
  try {
    const access = await accessOf(invite);
    document.body.dataset.room = access.room;
    call = await joinRoom(access, {
      message: onRoomMessage,
      closed: meetingOver,
      speaking: setSpeaking,
      language: learnLanguage,
      // Nobody hears a listen-only participant: the page does not say they are speaking.
      loud: () => !listenOnly && markSpeaking(self, 600),
      note(text) {
        note = text;
        renderParticipants();
      },
    });
    $("mute").disabled = false;
    $("leave").disabled = false;
  } catch (error) {
    if (error.code === "not_found") return void checkInvitation();
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
const kept = sessionStorage.getItem(KEPT);
if (linked?.error) {
  setStatus(linked.error, true);
} else if (linked) {
  showMeeting(linked);
} else if (kept) {
  // This tab made a meeting and was reloaded: back to it, without the API key.
  creator = { ...JSON.parse(kept), apiKey: undefined };
  showCreatorMeeting();
  setStatus("Back in your meeting: the links below still work.");
} else {
  $("create").hidden = false;
  setStatus("");
  loadLanguages({ nameOf, setStatus }).catch((error) =>
    setStatus(`Cannot read the server's languages: ${describe(error)}`, true),
  );
}
