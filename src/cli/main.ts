#!/usr/bin/env node
import { Command, InvalidArgumentError, Option } from "commander";
import { SERVICE_VERSION } from "../version.js";
import { describeError, inFlagTerms, type FlagNames } from "./errors.js";
import { CliError } from "./network.js";
import { type Connection } from "./session.js";
import type { DubCommandOptions } from "./dub.js";
import { keysCommand } from "./keys.js";
import type { LiveOptions } from "./live.js";
import { modelsCommand } from "./models-command.js";
import type { SpeakOptions } from "./speak.js";

/**
 * `relay`: command-line client of the real-time interface (recording-socket.ts), of dubbing (the SDK's
 * DubbingClient), keys and models. Each command's code is imported when it runs, so a command loads
 * only its own modules (`relay models list` need not load the database, the audio stack or the
 * engines' pulls): a node process pays for every module it loads.
 */

interface ServerOptions {
  readonly server: string;
  readonly apiKey?: string;
}

function parseSpeed(value: string): number {
  if (value === "max") return Infinity;
  const speed = Number(value);
  if (!Number.isFinite(speed) || speed < 0) throw new InvalidArgumentError('use a number ≥ 0, or "max"');
  return speed === 0 ? Infinity : speed;
}

/**
 * The common options of every command that talks to the service: the server and the API key (from
 * the environment too), accepted even where the endpoint needs no key, so one invocation style (or
 * one environment) serves every command.
 */
function withServer(command: Command): Command {
  return command
    .addOption(
      new Option("--server <url>", "service base URL").env("RELAY_SERVER").default("http://localhost:8080"),
    )
    .addOption(new Option("--api-key <key>", "API key").env("RELAY_API_KEY"));
}

const connection = (options: ServerOptions): Connection => ({
  server: options.server,
  apiKey: options.apiKey,
});

/** How each command's flags are named in the service's messages (errors.ts `inFlagTerms`). */
const FLAG_TERMS: Readonly<Record<string, FlagNames>> = {
  live: {
    sourceLanguage: "--from",
    targetLanguage: "--to",
    voiceId: "--voice",
    modelName: "--model",
    finalizeMode: "--finalize-mode",
    "audioOutputEnabled=false": "--no-audio",
    context: "--context",
  },
  speak: { targetLanguage: "--to", voiceId: "--voice", "mode=tts": "`relay speak`" },
  dub: { source_lang: "--from", target_lang: "--to", voice: "--voice", context: "--context" },
};
let flagTerms: FlagNames = {};

const CONTEXT_HELP =
  'names and jargon to recognize and keep in translation; glossary lines "source => target" ("term => =" keeps it)';

const program = new Command("relay")
  .description("Client for the relay speech translation service")
  .version(SERVICE_VERSION)
  .showHelpAfterError()
  .hook("preAction", (_program, command) => {
    flagTerms = FLAG_TERMS[command.name()] ?? {};
  });

withServer(
  program
    .command("live")
    .description("stream an audio file for translation; print transcripts and save the translated speech")
    .argument(
      "<audio>",
      "input audio: WAV of any encoding, rate or channels, or anything ffmpeg decodes (sent as 16 kHz mono)",
    )
    .option("--from <lang>", "spoken language (see `relay languages`)", "en")
    .option("--to <lang>", "language to translate into (see `relay languages`)", "es")
    .option("--out <wav>", "where to write the translated speech (float32, 24 kHz)")
    .option("--speed <x>", "pace × real time; 0 or max: as fast as possible", parseSpeed, 1)
    .option("--voice <id>", "voice ID (see `relay voices`), or auto with --model relay-2")
    .addOption(
      new Option("--model <name>", "model (relay-2 labels speakers: `[en] 2: …`)").choices([
        "relay-1",
        "relay-2",
      ]),
    )
    .addOption(new Option("--finalize-mode <mode>", "when finals are sent").choices(["stable", "sentence"]))
    .option("--no-audio", "transcripts only: no translated speech, no --out")
    .option("--context <text>", CONTEXT_HELP)
    .option("--context-file <file>", "the same, read from a UTF-8 file (one glossary line per line)")
    .option("--json", "print every server message as one JSON line", false),
).action(async (input: string, options: Omit<LiveOptions, "in"> & ServerOptions) => {
  const { live } = await import("./live.js");
  process.exitCode = await live(connection(options), { ...options, in: input });
});

withServer(
  program
    .command("speak")
    .description("synthesize a line of text into a WAV file (a mode=tts session)")
    .argument("<text>", "text to speak")
    .requiredOption("--to <lang>", "language to speak it in (see `relay languages`)")
    .requiredOption("--out <wav>", "where to write the speech (float32, 24 kHz)")
    .option("--voice <id>", "voice ID (see `relay voices`)"),
).action(async (text: string, options: Omit<SpeakOptions, "text"> & ServerOptions) => {
  const { speak } = await import("./speak.js");
  process.exitCode = await speak(connection(options), { ...options, text });
});

withServer(
  program
    .command("dub")
    .description("dub a video or audio file (a path or an http(s) URL) into another language")
    .argument("<file-or-url>", "media to dub: mp4 mov mkv wav mp3 flac ogg m4a, or an http(s) URL")
    .requiredOption("--to <lang>", "language to dub into (see `relay languages`)")
    .option("--from <lang>", "spoken language, or auto (see `relay languages`)", "auto")
    .option(
      "--voice <voice>",
      "auto (each speaker in a voice matched to theirs), female, male, or a voice ID (see `relay voices`)",
    )
    .requiredOption("--out <file>", "where to save the result (MP4; MP3 when the input has no video)")
    .option("--context <text>", CONTEXT_HELP)
    .option("--context-file <file>", "the same, read from a UTF-8 file (one glossary line per line)")
    .option("--json", "print the finished job's status as one JSON line", false),
).action(async (input: string, options: DubCommandOptions & ServerOptions) => {
  const { dub } = await import("./dub.js");
  process.exitCode = await dub(connection(options), input, options);
});

withServer(
  program
    .command("voices")
    .description("list the voice library")
    .addOption(new Option("--gender <gender>", "only this gender").choices(["female", "male"])),
).action(async (options: ServerOptions & { gender?: string }) => {
  const { voices } = await import("./catalog.js");
  process.exitCode = await voices(connection(options), options.gender);
});

withServer(
  program.command("languages").description("list speech input, translation pairs and voice output"),
).action(async (options: ServerOptions) => {
  const { languages } = await import("./catalog.js");
  process.exitCode = await languages(connection(options));
});

program.addCommand(modelsCommand());
program.addCommand(keysCommand());

program.parseAsync().catch((error: unknown) => {
  // CliErrors are already phrased for the user; anything else still gets a single line.
  const message = error instanceof CliError ? error.message : describeError(error);
  console.error(`relay: ${inFlagTerms(message, flagTerms)}`);
  process.exitCode = 1;
});
