import { MAX_WAITING_SPEAKS, speakableLines } from "@relay-translate/client";
import type { RealtimeSocket, ServerMessage } from "./recording-socket.js";
import { CliError } from "./network.js";
import { checkOutputPath } from "./options.js";
import { writeSpeech } from "./output.js";
import {
  checkSession,
  closeNormally,
  errorText,
  expectMessage,
  openSession,
  sleep,
  type Connection,
} from "./session.js";

export interface SpeakOptions {
  readonly text: string;
  /** The language to speak the text in. */
  readonly to: string;
  readonly out: string;
  readonly voice?: string;
}

/** Silence from the server while a line is being spoken, after which we give up. */
const IDLE_TIMEOUT_MS = 60_000;

/**
 * `relay speak`: a text through a `mode=tts` session into a WAV file. The service takes lines of
 * at most MAX_SPEAK_CHARACTERS (and frames of 64 KiB), so a longer text is cut into lines after
 * its sentences, sent as the service makes room for them (MAX_WAITING_SPEAKS at a time).
 */
export async function speak(connection: Connection, options: SpeakOptions): Promise<number> {
  // Usage problems first, before a session is spent.
  const lines = speakableLines(options.text);
  if (lines.length === 0) throw new CliError("nothing to speak: the text is empty");
  await checkOutputPath(options.out);
  const { socket } = await openSession(connection, {
    mode: "tts",
    targetLanguage: options.to,
    ...(options.voice !== undefined && { voiceId: options.voice }),
  });
  try {
    // A tts session sends a second `ready` (mode=tts) once its parameters are accepted.
    await expectMessage(socket, (m) => m.type === "ready" && m.mode === "tts", "tts ready");
    let sent = 0;
    for (let spoken = 0; spoken < lines.length; spoken++) {
      for (; sent < lines.length && sent - spoken < MAX_WAITING_SPEAKS; sent++)
        socket.send({ type: "speak", text: lines[sent] });
      // A line that cannot be spoken is answered with an error frame (and no speech_end).
      const end = await lineEnd(socket, spoken);
      if (end.type === "error") {
        const which = lines.length > 1 ? `line ${spoken + 1} of ${lines.length}: ` : "";
        throw new CliError(`the server could not speak ${which}${errorText(end)}`);
      }
    }
    checkSession(socket);
  } catch (error) {
    socket.terminate();
    throw error;
  }
  await closeNormally(socket);
  if (socket.audioFrames.length === 0) throw new CliError("the server sent no speech");
  const seconds = await writeSpeech(options.out, socket.audioFrames);
  const parts = lines.length > 1 ? ` (the text in ${lines.length} lines)` : "";
  process.stderr.write(`wrote ${options.out}: ${seconds.toFixed(2)} s of speech${parts}\n`);
  return 0;
}

const endsALine = (message: ServerMessage) => message.type === "speech_end" || message.type === "error";

/**
 * The message that ends the `index`th line sent (its `speech_end`, or the error about it), once it
 * has come; a long line is waited for as long as its speech keeps coming.
 */
async function lineEnd(socket: RealtimeSocket, index: number): Promise<ServerMessage> {
  let seen = socket.received.length;
  let lastNews = performance.now();
  for (;;) {
    const end = socket.messages.filter(endsALine)[index];
    if (end) return end;
    checkSession(socket);
    if (socket.received.length !== seen) [seen, lastNews] = [socket.received.length, performance.now()];
    else if (performance.now() - lastNews > IDLE_TIMEOUT_MS)
      throw new CliError(`the server sent nothing for ${IDLE_TIMEOUT_MS / 1000} s while speaking`);
    await sleep(50);
  }
}
