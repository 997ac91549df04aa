import {
  checkSession,
  closeNormally,
  CliError,
  errorText,
  expectMessage,
  openSession,
  writeSpeech,
  type Connection,
} from "./common.js";

export interface SpeakOptions {
  readonly text: string;
  /** The language to speak the text in. */
  readonly to: string;
  readonly out: string;
  readonly voice?: string;
}

/** `relay speak`: one line of text through a `mode=tts` session into a WAV file. */
export async function speak(connection: Connection, options: SpeakOptions): Promise<number> {
  const { socket } = await openSession(connection, {
    mode: "tts",
    targetLanguage: options.to,
    ...(options.voice !== undefined && { voiceId: options.voice }),
  });
  try {
    // A tts session sends a second `ready` (mode=tts) once its parameters are accepted.
    await expectMessage(socket, (m) => m.type === "ready" && m.mode === "tts", "tts ready");
    socket.send({ type: "speak", text: options.text });
    // A refused `speak` (text too long, ...) answers with an error frame and no speech_end.
    const end = await expectMessage(socket, (m) => m.type === "speech_end" || m.type === "error", "speech");
    if (end.type === "error") throw new CliError(`server error: ${errorText(end)}`);
    checkSession(socket);
  } catch (error) {
    socket.terminate();
    throw error;
  }
  await closeNormally(socket);
  if (socket.audioFrames.length === 0) throw new CliError("the server sent no speech");
  const seconds = await writeSpeech(options.out, socket.audioFrames);
  process.stderr.write(`wrote ${options.out}: ${seconds.toFixed(2)} s of speech\n`);
  return 0;
}
