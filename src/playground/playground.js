// The playground: plain JavaScript on the service's own SDK (served from the build at /sdk/), so
// nothing needs building. The API key stays in this page's memory: it is sent in the
// Authorization header and never put in a URL.
import { DubbingClient, HttpError, RealtimeSession } from "/sdk/index.js";
import { INPUT_SAMPLE_RATE, OUTPUT_SAMPLE_RATE } from "/sdk/protocol.js";
import { SpeechPlayer } from "/playground/speech-player.js";

const $ = (id) => document.getElementById(id);
const baseUrl = location.origin;
/** 20 ms of microphone audio per frame sent. */
const FRAME_SAMPLES = 320;

function apiKey() {
  const key = $("api-key").value.trim();
  if (!key) throw new Error("enter an API key first");
  return key;
}

function describe(error) {
  if (error instanceof HttpError)
    return `${error.code ?? `HTTP ${error.status}`}: ${error.body?.error?.message ?? ""}`;
  return error instanceof Error ? error.message : String(error);
}

function status(id, text, isError = false) {
  $(id).textContent = text;
  $(id).classList.toggle("error", isError);
}

// Tabs
for (const tab of document.querySelectorAll("[role=tab]")) {
  tab.addEventListener("click", () => {
    for (const other of document.querySelectorAll("[role=tab]")) {
      other.setAttribute("aria-selected", String(other === tab));
      $(other.dataset.panel).hidden = other !== tab;
    }
  });
}

// Choices from the server: what the configured engines serve, and the voice library.
function fill(select, options, selected) {
  select.replaceChildren(
    ...options.map(([value, label]) => {
      const option = new Option(label, value);
      option.selected = value === selected;
      return option;
    }),
  );
}

async function loadChoices() {
  const [languages, { voices }] = await Promise.all([
    fetch(`${baseUrl}/v1/languages`).then((r) => r.json()),
    fetch(`${baseUrl}/v1/voices`).then((r) => r.json()),
  ]);
  const recognized = [...new Set(languages.recognition.map((r) => r.language))];
  const targets = [...new Set(languages.translation.map((t) => t.to))];
  const spoken = [...new Set(languages.voice_output?.map((v) => v.language) ?? targets)];
  // Names people read ("German (de)"); the codes are what the API and the CLI take.
  const displayNames = new Intl.DisplayNames([navigator.language, "en"], { type: "language" });
  const nameOf = (code) => {
    try {
      return `${displayNames.of(code)} (${code})`;
    } catch {
      return code;
    }
  };
  const names = (codes) =>
    codes.map((code) => [code, nameOf(code)]).sort(([, a], [, b]) => a.localeCompare(b));
  // Why "From" offers what it does: the server's recognition tier and how to widen it.
  const tier = languages.recognition_tier;
  $("live-tier").textContent = tier ? `${tier.summary}${tier.upgrade ? ` — ${tier.upgrade}` : ""}` : "";
  fill($("live-from"), names(recognized), "en");
  fill($("live-to"), names(targets), "es");
  // Which engines translate the chosen pair, and through which language (the server's routes).
  const showRoute = () => {
    const [from, to] = [$("live-from").value, $("live-to").value];
    const route = languages.translation.find((t) => t.from === from && t.to === to);
    $("live-route").textContent =
      from === to
        ? ""
        : route
          ? `Translated by ${route.engines.join(" + ")}${route.via ? ` through ${route.via}` : ""}`
          : `No translation from ${from} to ${to} on this server`;
  };
  $("live-from").onchange = showRoute;
  $("live-to").onchange = showRoute;
  showRoute();
  fill($("tts-language"), names(spoken), "es");
  fill($("dub-from"), [["auto", "detect"], ...names(recognized)], "auto");
  fill($("dub-to"), names(targets), "es");
  const voiceOptions = voices.map((v) => [String(v.id), `${v.name} (${v.gender})`]);
  fill($("live-voice"), [["", "default"], ["clone", "your own voice (clone)"], ...voiceOptions], "");
  fill($("tts-voice"), [["", "default"], ...voiceOptions], "");
}

/** Speech played as it comes, its frames and seconds shown on `meter`. */
function speakerOn(meter) {
  let frames = 0;
  let samples = 0;
  return new SpeechPlayer((played) => {
    frames++;
    samples += played;
    meter.dataset.frames = String(frames);
    meter.textContent = `${(samples / OUTPUT_SAMPLE_RATE).toFixed(1)} s`;
  });
}

// Live translation
let live;

function showTranscript(message) {
  const list = $("live-transcript");
  let item = list.querySelector(`[data-id="${CSS.escape(message.correlation_id)}"]`);
  if (!item) {
    item = document.createElement("li");
    item.dataset.id = message.correlation_id;
    item.append(Object.assign(document.createElement("div"), { className: "original" }));
    item.append(Object.assign(document.createElement("div"), { className: "translated" }));
    list.append(item);
  }
  const line = item.querySelector(message.type === "original_transcript" ? ".original" : ".translated");
  const speaker = message.speaker ? `${message.speaker}: ` : "";
  line.textContent = `[${message.type === "original_transcript" ? (message.detected_language ?? message.source_language) : message.target_language}] ${speaker}${message.text}`;
  line.classList.toggle("interim", !message.is_final);
}

async function startLive() {
  const session = await RealtimeSession.open(
    { baseUrl, apiKey: apiKey() },
    {
      sourceLanguage: $("live-from").value,
      targetLanguage: $("live-to").value,
      ...voiceParams($("live-voice").value),
      ...($("live-context").value.trim() ? { context: $("live-context").value } : {}),
    },
  );
  const speaker = speakerOn($("live-audio"));
  session.onAudio = (samples) => speaker.play(samples);
  const media = await navigator.mediaDevices.getUserMedia({
    // Echo cancellation keeps the translated speech out of the microphone; level and noise are the
    // service's to handle (its recognizer hears better without the browser's processing).
    audio: { channelCount: 1, echoCancellation: true, noiseSuppression: false, autoGainControl: false },
  });
  // The browser resamples the microphone to 16 kHz for this context.
  const context = new AudioContext({ sampleRate: INPUT_SAMPLE_RATE });
  await context.audioWorklet.addModule("/playground/capture-worklet.js");
  const capture = new AudioWorkletNode(context, "capture");
  let pending = new Float32Array(0);
  capture.port.onmessage = ({ data }) => {
    const joined = new Float32Array(pending.length + data.length);
    joined.set(pending);
    joined.set(data, pending.length);
    let offset = 0;
    for (; offset + FRAME_SAMPLES <= joined.length; offset += FRAME_SAMPLES) {
      const frame = new Int16Array(FRAME_SAMPLES);
      for (let i = 0; i < FRAME_SAMPLES; i++)
        frame[i] = Math.max(-32768, Math.min(32767, Math.round(joined[offset + i] * 32767)));
      session.sendAudio(frame);
    }
    pending = joined.slice(offset);
  };
  context.createMediaStreamSource(media).connect(capture);
  let finishing;
  const finish = () => {
    clearTimeout(finishing);
    session.close();
    speaker.close();
  };
  live = {
    session,
    stop() {
      for (const track of media.getTracks()) track.stop();
      void context.close();
      // The session closes on the server's `finalized` (below): everything said before Stop is
      // still translated and spoken, however long that takes; a minute's wait is the limit.
      session.finalize();
      finishing = setTimeout(finish, 60_000);
    },
  };
  status(
    "live-status",
    `Listening (session ${session.ready.session_id} on ${session.ready.worker_id}). Speak now.`,
  );
  for await (const message of session) {
    if (message.type === "original_transcript" || message.type === "translated_transcript")
      showTranscript(message);
    else if (message.type === "error") status("live-status", message.error, true);
    else if (message.type === "finalized") finish();
  }
  const closed = await session.closed;
  if (closed.code !== 1000)
    status("live-status", `The session ended (${closed.code} ${closed.reason})`, closed.code >= 4000);
}

$("live-start").addEventListener("click", () => {
  $("live-start").disabled = true;
  $("live-stop").disabled = false;
  startLive().catch((error) => {
    status("live-status", describe(error), true);
    $("live-start").disabled = false;
    $("live-stop").disabled = true;
  });
});
$("live-stop").addEventListener("click", () => {
  live?.stop();
  live = undefined;
  $("live-start").disabled = false;
  $("live-stop").disabled = true;
  status("live-status", "Stopped.");
});

// Text to speech
$("tts-speak").addEventListener("click", async () => {
  $("tts-speak").disabled = true;
  try {
    status("tts-status", "Speaking…");
    const session = await RealtimeSession.open(
      { baseUrl, apiKey: apiKey() },
      {
        mode: "tts",
        targetLanguage: $("tts-language").value,
        ...($("tts-voice").value ? { voiceId: $("tts-voice").value } : {}),
      },
    );
    const speaker = speakerOn($("tts-audio"));
    session.onAudio = (samples) => speaker.play(samples);
    session.speak($("tts-text").value, { correlationId: "playground" });
    for await (const message of session) {
      if (message.type === "speech_end") break;
      if (message.type === "error") throw new Error(message.error);
    }
    session.close();
    status("tts-status", "Done.");
  } catch (error) {
    status("tts-status", describe(error), true);
  } finally {
    $("tts-speak").disabled = false;
  }
});

// Dubbing
$("dub-start").addEventListener("click", async () => {
  const file = $("dub-file").files?.[0];
  if (!file) return status("dub-status", "choose a video or audio file first", true);
  $("dub-start").disabled = true;
  const progress = $("dub-progress");
  try {
    const client = new DubbingClient(baseUrl, apiKey());
    status("dub-status", `Uploading ${file.name}…`);
    const { sourceUrl } = await client.upload(file.name, file, {
      onProgress: (sent, total) => (progress.value = (100 * sent) / total),
    });
    const created = await client.create({
      sourceUrl,
      sourceLang: $("dub-from").value,
      targetLang: $("dub-to").value,
      voice: $("dub-voice").value,
      ...($("dub-context").value.trim() ? { context: $("dub-context").value } : {}),
    });
    progress.value = 0;
    const job = await client.wait(created.job_id, {
      onUpdate: (update) => {
        progress.value = update.progress?.percent ?? 0;
        status("dub-status", `Job ${update.job_id}: ${update.progress?.stage_name ?? update.status}`);
      },
    });
    if (job.status === "failed") throw new Error(`${job.error}: ${job.error_message ?? ""}`);
    progress.value = 100;
    status(
      "dub-status",
      `Job ${job.job_id} completed (${job.input_duration_sec?.toFixed(1)} s, ${job.cost_usd?.toFixed(2)} USD).`,
    );
    const result = $("dub-result");
    result.src = job.output_url;
    result.hidden = false;
    Object.assign($("dub-download"), { href: job.output_url, hidden: false });
  } catch (error) {
    status("dub-status", describe(error), true);
  } finally {
    $("dub-start").disabled = false;
  }
});

loadChoices().catch((error) =>
  status("live-status", `cannot read the server's languages: ${describe(error)}`, true),
);

/** The live tab's voice: the default, the speaker's own (voiceType=clone) or a library voice. */
function voiceParams(value) {
  if (value === "clone") return { voiceType: "clone" };
  return value ? { voiceId: value } : {};
}
