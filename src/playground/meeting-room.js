// The meeting page's connections to a room: the embedded room server over a WebSocket at the
// page's own origin, or LiveKit through livekit-client (served by the service at /vendor/), loaded
// only when a link names a LiveKit server. Both report in the embedded server's message shapes to
// `events` (see joinRoom); the page (meeting.js) shows them.
/* global WebSocket, TextDecoder */
import {
  Framer,
  INPUT_RATE,
  MICROPHONE,
  TRANSLATOR_IDENTITY,
  closeMessage,
  fromFloat32Le,
  livekitCloseMessage,
  roomSocketUrl,
  toPcm16Le,
  trackLanguagesOf,
  translatorTrackFor,
} from "/playground/meeting-logic.js";
import { SpeechPlayer } from "/playground/speech-player.js";

/** 40 ms of microphone audio per frame sent. */
const FRAME_SAMPLES = 640;
/** A frame this loud (RMS) means the local participant is speaking. */
const SPEAKING_RMS = 0.02;

const describe = (error) => (error instanceof Error ? error.message : String(error));

/**
 * Joins the room of `access` ({ room, token, language, livekit? }). `events`: message(message)
 * (joined, participant_joined/left, transcripts, error), closed({ state, text }), speaking(identities)
 * (who the room says is speaking), language(identity, language), loud() (the microphone hears
 * speech), note(text) (said after the status: no microphone). Resolves to { setMuted(muted), leave() }.
 */
export function joinRoom(access, events) {
  return access.livekit ? joinLiveKit(access, events) : joinEmbedded(access, events);
}

/**
 * The microphone at 16 kHz mono, with the browser's echo cancellation, noise suppression and level.
 * Muted, the track is disabled: it then gives silence, so an utterance in progress ends as after a
 * pause and nothing more is heard.
 */
async function openMicrophone(loud) {
  const stream = await navigator.mediaDevices.getUserMedia({ audio: { ...MICROPHONE } });
  const [track] = stream.getAudioTracks();
  // The browser resamples the microphone to 16 kHz for this context.
  const context = new AudioContext({ sampleRate: INPUT_RATE });
  await context.audioWorklet.addModule("/playground/capture-worklet.js");
  const capture = new AudioWorkletNode(context, "capture");
  const framer = new Framer(FRAME_SAMPLES);
  let send;
  capture.port.onmessage = ({ data }) => {
    for (const frame of framer.push(data)) {
      let energy = 0;
      for (const sample of frame) energy += sample * sample;
      if (track.enabled && Math.sqrt(energy / frame.length) > SPEAKING_RMS) loud();
      send?.(frame);
    }
  };
  context.createMediaStreamSource(stream).connect(capture);
  return {
    start(sender) {
      send = sender;
    },
    setMuted(muted) {
      track.enabled = !muted;
    },
    stop() {
      for (const each of stream.getTracks()) each.stop();
      void context.close();
    },
  };
}

// ---------------------------------------------------------------- joining: embedded room server

async function joinEmbedded(access, events) {
  // The samples played are counted on body[data-audio-samples] (the page's tests read them).
  const speaker = new SpeechPlayer((samples) => {
    document.body.dataset.audioSamples = String(Number(document.body.dataset.audioSamples) + samples);
  });
  const microphone = await openMicrophone(events.loud).catch((error) => {
    events.note(` No microphone (${describe(error)}): you can listen but not speak.`);
    return undefined;
  });
  const url = roomSocketUrl(location.origin, access.room, access.token);
  const socket = new WebSocket(url);
  socket.binaryType = "arraybuffer";
  let joined = false;
  let leaving = false;
  socket.onmessage = ({ data }) => {
    if (typeof data !== "string") return speaker.play(fromFloat32Le(data));
    const message = JSON.parse(data);
    events.message(message);
    if (message.type === "joined") {
      joined = true;
      microphone?.start((frame) => {
        if (socket.readyState === WebSocket.OPEN) socket.send(toPcm16Le(frame));
      });
    }
  };
  socket.onclose = async ({ code, reason }) => {
    microphone?.stop();
    speaker.close();
    const outcome = closeMessage(code, reason, { leaving, joined });
    // A refused handshake shows no reason to the page: the same request over HTTP says why.
    if (outcome.state === "failed") outcome.text = (await refusal(url)) ?? outcome.text;
    events.closed(outcome);
  };
  return {
    setMuted: (muted) => microphone?.setMuted(muted),
    leave() {
      leaving = true;
      socket.close(1000, "left");
    },
  };
}

/** Why the server refused to let this page join (an expired or forged link, an ended or full room). */
async function refusal(url) {
  const advice = { unauthorized: " Ask for a new link.", not_found: "", room_full: "", invalid_language: "" };
  try {
    const { error } = await fetch(url.replace(/^ws/u, "http")).then((response) => response.json());
    if (!Object.hasOwn(advice, error?.code)) return undefined;
    return `Could not join: ${error.message}.${advice[error.code]}`;
  } catch {
    return undefined;
  }
}

// ---------------------------------------------------------------- joining: LiveKit

/**
 * LiveKit: publish the microphone, subscribe only to the translator's track of this participant's
 * language (translatorTrackFor), read transcripts from data messages on the topic `transcript`.
 */
async function joinLiveKit(access, events) {
  const lk = await import("/vendor/livekit-client.esm.mjs");
  const room = new lk.Room({
    audioCaptureDefaults: { ...MICROPHONE },
    adaptiveStream: false,
    dynacast: false,
  });
  const decoder = new TextDecoder();
  let leaving = false;
  const subscribe = () => {
    const translator = room.remoteParticipants.get(TRANSLATOR_IDENTITY);
    const tracks = translator
      ? [...translator.trackPublications.values()].filter(
          (publication) => publication.kind === lk.Track.Kind.Audio,
        )
      : [];
    const chosen = translatorTrackFor(
      tracks.map((publication) => publication.trackName),
      access.language,
      trackLanguagesOf(translator?.attributes),
    );
    for (const publication of tracks) publication.setSubscribed(publication.trackName === chosen);
    document.body.dataset.audioTrack = chosen ?? "";
  };
  const languageOf = (participant) => participant.attributes?.language || undefined;
  room
    .on(lk.RoomEvent.TrackPublished, subscribe)
    .on(lk.RoomEvent.TrackUnpublished, subscribe)
    .on(lk.RoomEvent.ParticipantAttributesChanged, subscribe)
    .on(lk.RoomEvent.TrackSubscribed, (track) => {
      if (track.kind !== lk.Track.Kind.Audio) return;
      const element = track.attach();
      element.hidden = true;
      document.body.append(element);
    })
    .on(lk.RoomEvent.TrackUnsubscribed, (track) => {
      for (const element of track.detach()) element.remove();
    })
    .on(lk.RoomEvent.DataReceived, (payload, participant, _kind, topic) => {
      // Captions and events come from the translator alone (clients' tokens grant no data, and a
      // participant's identity is the service's to give): anything else is someone's forgery.
      if (topic !== "transcript" || participant?.identity !== TRANSLATOR_IDENTITY) return;
      try {
        events.message(JSON.parse(decoder.decode(payload)));
      } catch {
        // not JSON: not a transcript
      }
    })
    .on(lk.RoomEvent.ParticipantConnected, (participant) => {
      if (participant.identity === TRANSLATOR_IDENTITY) return subscribe();
      events.message({
        type: "participant_joined",
        identity: participant.identity,
        language: languageOf(participant),
        name: participant.name || undefined,
      });
    })
    .on(lk.RoomEvent.ParticipantDisconnected, (participant) =>
      events.message({ type: "participant_left", identity: participant.identity }),
    )
    .on(lk.RoomEvent.ParticipantAttributesChanged, (_changed, participant) =>
      events.language(participant.identity, languageOf(participant)),
    )
    .on(lk.RoomEvent.ActiveSpeakersChanged, (speakers) =>
      events.speaking(speakers.map((s) => s.identity).filter((identity) => identity !== TRANSLATOR_IDENTITY)),
    )
    .on(lk.RoomEvent.Disconnected, (reason) =>
      events.closed(
        livekitCloseMessage(reason === undefined ? undefined : lk.DisconnectReason[reason], { leaving }),
      ),
    );
  await room.connect(access.livekit, access.token, { autoSubscribe: false });
  events.message({
    type: "joined",
    identity: room.localParticipant.identity,
    language: access.language,
    participant_info: [...room.remoteParticipants.values()].map((p) => ({
      identity: p.identity,
      language: languageOf(p),
      name: p.name || undefined,
    })),
  });
  subscribe();
  await room.startAudio().catch(() => undefined);
  await room.localParticipant.setMicrophoneEnabled(true, { ...MICROPHONE }).catch((error) => {
    events.note(` No microphone (${describe(error)}): you can listen but not speak.`);
  });
  return {
    setMuted: (muted) => room.localParticipant.setMicrophoneEnabled(!muted, { ...MICROPHONE }),
    leave() {
      leaving = true;
      void room.disconnect();
    },
  };
}
