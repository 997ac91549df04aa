import { INPUT_SAMPLE_RATE } from "@relay-translate/client/protocol";
import { readAudioInput } from "./audio-input.js";
import type { RealtimeSocket, ServerMessage } from "./recording-socket.js";
import { CliError } from "./network.js";
import { checkOutputPath, contextOption } from "./options.js";
import { writeSpeech } from "./output.js";
import {
  checkSession,
  closeNormally,
  errorText,
  expectMessage,
  isRejection,
  openSession,
  requireKey,
  sleep,
  type Connection,
} from "./session.js";
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

/** Silence from the server while its `finalized` has not come, after which we give up. */
const IDLE_TIMEOUT_MS = 60_000;

/** `relay live`: stream a WAV file, print transcripts as they arrive, save the translated speech. */
export async function live(connection: Connection, options: LiveOptions): Promise<number> {
  // Usage problems first, before the input is read or a session is spent.
  if (options.audio && !options.out) throw new CliError("--out is required (or pass --no-audio)");
  if (options.audio && options.out) await checkOutputPath(options.out);
  requireKey(connection);
  const context = await contextOption(options);
  const pcm = await readAudioInput(options.in, INPUT_SAMPLE_RATE);
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
  let probeAnswered = false;
  // The client library only records what arrives; this shows each new message once, in order.
  const drain = () => {
    for (; cursor < socket.received.length; cursor++) {
      const { message } = socket.received[cursor]!;
      if (!message) continue;
      // The answer to the acceptance check below is the CLI's own, not the session's.
      if (message.type === "metadata_ack" && !probeAnswered) {
        probeAnswered = true;
        continue;
      }
      messages.push(message);
      view.show(messages, messages.length - 1);
    }
  };
  const follow = setInterval(drain, 20);
  try {
    await expectMessage(socket, (m) => m.type === "ready", "ready");
    // A refused session answers `ready`, its error, then closes; an accepted one answers this (as
    // the SDK checks), so the session is announced only once it has started.
    socket.send({ type: "update_metadata", metadata: {} });
    await expectMessage(socket, (m) => m.type === "metadata_ack", "session start");
    // The model and its version; `relay languages` lists the engines behind them.
    const model = session.model_version_id.split("/").slice(0, 2).join("/");
    process.stderr.write(`session ${session.session_id} (${model})\n`);
    await socket.stream(pcm, { chunkMs: 20, speed: options.speed });
    checkSession(socket);
    socket.finalize();
    await waitForResults(socket);
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
 * After `finalize`, every result (finals, translations, speech) has come when the server's
 * `finalized` does, or the session has ended (a fatal error closes it).
 */
async function waitForResults(socket: RealtimeSocket): Promise<void> {
  const { received } = socket;
  let seen = received.length;
  let lastNews = performance.now();
  while (!received.some((r) => r.message?.type === "finalized") && socket.closeCode === undefined) {
    if (received.length !== seen) [seen, lastNews] = [received.length, performance.now()];
    else if (performance.now() - lastNews > IDLE_TIMEOUT_MS)
      throw new CliError(`the server sent nothing for ${IDLE_TIMEOUT_MS / 1000} s before finishing`);
    await sleep(50);
  }
}
