import { readAudioInput } from "./audio-input.js";
import type { Received, RealtimeSocket, ServerMessage } from "./recording-socket.js";
import {
  checkSession,
  closeNormally,
  CliError,
  errorText,
  expectMessage,
  isRejection,
  openSession,
  requireKey,
  sleep,
  writeSpeech,
  type Connection,
  contextOption,
} from "./common.js";
import { TranscriptView } from "./transcript-view.js";

export interface LiveOptions {
  readonly in: string;
  readonly from: string;
  readonly to: string;
  readonly out?: string;
  /** × real time; Infinity sends as fast as possible. */
  readonly speed: number;
  readonly voice?: string;
  readonly model?: string;
  readonly finalizeMode?: string;
  readonly context?: string;
  readonly contextFile?: string;
  /** false (`--no-audio`): a transcripts-only session (`audioOutputEnabled=false`), no WAV written. */
  readonly audio: boolean;
  readonly json: boolean;
}

/** The server waits about this long after `finalize` for audio still in flight. */
const FINALIZE_WAIT_MS = 300;
/** Silence from the server after which what it was sending is taken to be complete. */
const QUIET_MS = 1000;
/** …and how long before concluding that the input held no speech at all. */
const SILENT_QUIET_MS = 5000;
/** Silence from the server while results are still missing, after which we give up. */
const IDLE_TIMEOUT_MS = 30_000;

/** `relay live`: stream a WAV file, print transcripts as they arrive, save the translated speech. */
export async function live(connection: Connection, options: LiveOptions): Promise<number> {
  // Usage problems first, before the input is read or a session is spent.
  if (options.audio && !options.out) throw new CliError("--out is required (or pass --no-audio)");
  requireKey(connection);
  const context = await contextOption(options);
  const pcm = await readAudioInput(options.in, 16_000);
  const { session, socket } = await openSession(connection, {
    sourceLanguage: options.from,
    targetLanguage: options.to,
    audioOutputEnabled: String(options.audio),
    ...(options.voice !== undefined && { voiceId: options.voice }),
    ...(options.model !== undefined && { modelName: options.model }),
    ...(options.finalizeMode !== undefined && { finalizeMode: options.finalizeMode }),
    ...(context !== undefined && { context }),
  });

  const view = new TranscriptView(process.stdout, options.json);
  const messages: ServerMessage[] = [];
  let cursor = 0;
  // The client library only records what arrives; this shows each new message once, in order.
  const drain = () => {
    for (; cursor < socket.received.length; cursor++) {
      const { message } = socket.received[cursor]!;
      if (!message) continue;
      messages.push(message);
      view.show(messages, messages.length - 1);
    }
  };
  const follow = setInterval(drain, 20);
  try {
    await expectMessage(socket, (m) => m.type === "ready", "ready");
    process.stderr.write(`session ${session.session_id} (${session.model_version_id})\n`);
    await socket.stream(pcm, { chunkMs: 20, speed: options.speed });
    checkSession(socket);
    socket.finalize();
    const audioMs = pcm.length / 16;
    await waitForResults(socket, options.audio, 60_000 + 2 * audioMs);
    drain();
    checkSession(socket);
  } catch (error) {
    socket.terminate();
    throw error;
  } finally {
    clearInterval(follow);
    drain();
    view.finish();
  }
  await closeNormally(socket);

  if (options.audio && options.out) {
    const seconds = await writeSpeech(options.out, socket.audioFrames);
    process.stderr.write(`wrote ${options.out}: ${seconds.toFixed(2)} s of translated speech\n`);
  }
  // In-session errors were printed as they arrived (except any the view held back); the run still failed.
  messages.forEach((message, i) => {
    if (isRejection(messages, i)) process.stderr.write(`relay: server error: ${errorText(message)}\n`);
  });
  return messages.some((m) => m.type === "error") ? 1 : 0;
}

/**
 * Speech sessions have no end-of-results message, so after `finalize` we wait until every segment
 * has its final original and translated transcripts, speech has followed the last translated text,
 * and the server has gone quiet.
 */
async function waitForResults(
  socket: RealtimeSocket,
  expectAudio: boolean,
  timeoutMs: number,
): Promise<void> {
  await sleep(FINALIZE_WAIT_MS);
  for (;;) {
    // Before the first transcript the server may still be catching up with audio sent faster than
    // real time (a busy server, --speed max): a short quiet spell does not mean it heard nothing.
    const heardAny = socket.received.some((r) => r.message?.type === "original_transcript");
    await socket.settle(heardAny ? QUIET_MS : SILENT_QUIET_MS, timeoutMs);
    const { received } = socket;
    // After an error frame some results may never come (e.g. a failed translation): stop once quiet.
    const sawError = received.some((r) => r.message?.type === "error");
    if (socket.closeCode !== undefined || sawError || resultsComplete(received, expectAudio)) return;
    const count = received.length;
    const deadline = performance.now() + IDLE_TIMEOUT_MS;
    while (received.length === count && socket.closeCode === undefined) {
      if (performance.now() > deadline)
        throw new CliError(`the server sent nothing for ${IDLE_TIMEOUT_MS / 1000} s before finishing`);
      await sleep(50);
    }
  }
}

function resultsComplete(received: readonly Received[], expectAudio: boolean): boolean {
  const segments = new Map<string, { open: boolean; originalFinals: number; translatedFinals: number }>();
  const lastTranslation = new Map<string, string>();
  let lastSpokenText = -1;
  let lastAudio = -1;
  received.forEach(({ message, audio }, index) => {
    if (audio) lastAudio = index;
    if (message?.type !== "original_transcript" && message?.type !== "translated_transcript") return;
    const id = String(message.correlation_id);
    const segment = segments.get(id) ?? { open: false, originalFinals: 0, translatedFinals: 0 };
    segments.set(id, segment);
    const final = message.is_final === true;
    if (message.type === "original_transcript") {
      segment.open = !final;
      if (final) segment.originalFinals++;
    } else if (final) {
      segment.translatedFinals++;
      // Only a final that adds translated text is spoken.
      const text = String(message.text ?? "");
      if (text !== (lastTranslation.get(id) ?? "")) lastSpokenText = index;
      lastTranslation.set(id, text);
    }
  });
  const transcribed = [...segments.values()].every(
    (s) => !s.open && s.originalFinals > 0 && s.translatedFinals >= s.originalFinals,
  );
  return transcribed && (!expectAudio || lastAudio > lastSpokenText);
}
