/**
 * Speech synthesis on a remote server speaking OpenAI's `POST /v1/audio/speech` (OpenAI,
 * Kokoro-FastAPI, openedai-speech, …).
 *
 * Such servers offer a handful of named voices, not the library's 70 timbres, so each library voice is
 * mapped to a server voice of its gender: the i-th voice of a gender in the library gets
 * `voices[gender][i % voices[gender].length]`, and its rate becomes the request's `speed`. Pitch
 * cannot be asked for; the language follows from the text (the API has no language parameter).
 */
import { bytesToInt16, int16ToFloat32 } from "../../audio/pcm.js";
import { decodeWav, isWav, withConsistentSizes } from "../../audio/wav.js";
import { levelSpeech } from "../../audio/loudness.js";
import { listVoices } from "../../voices/library.js";
import type {
  EngineInfo,
  LanguageCode,
  SynthesisRequest,
  SynthesizedAudio,
  TtsCapabilities,
  TtsEngine,
  Voice,
} from "../../core/contracts.js";
import { RemoteClient, type RemoteEngineOptions } from "./client.js";
import type { CircuitStatus } from "../kit/remote/guard.js";
import { configuredLanguages } from "./languages.js";

export interface OpenAiTtsVoices {
  readonly female: readonly string[];
  readonly male: readonly string[];
}

export interface OpenAiTtsOptions extends RemoteEngineOptions {
  /** Languages the server's model speaks. */
  readonly languages: readonly LanguageCode[];
  /** The server's voice names by gender (e.g. Kokoro: female ["af_heart", …], male ["am_adam", …]). */
  readonly voices: OpenAiTtsVoices;
  /**
   * "wav" (default): self-describing, any sample rate. "pcm": raw 24 kHz 16-bit mono little-endian,
   * as OpenAI defines it — only for servers that honour that rate.
   */
  readonly responseFormat?: "pcm" | "wav";
}

/** OpenAI's `pcm` response format. */
export const PCM_SAMPLE_RATE = 24_000;
/** The API's accepted speed range. */
const MIN_SPEED = 0.25;
const MAX_SPEED = 4;

/** The server voice and speed a library voice is rendered with. */
export function serverVoice(
  voice: Voice,
  voices: OpenAiTtsVoices,
): { readonly name: string; readonly speed: number } {
  const names = voices[voice.gender];
  const index = Math.max(
    0,
    listVoices(voice.gender).findIndex((v) => v.id === voice.id),
  );
  const speed = Math.min(
    MAX_SPEED,
    Math.max(MIN_SPEED, Number.isFinite(voice.timbre.rate) ? voice.timbre.rate : 1),
  );
  return { name: names[index % names.length]!, speed };
}

class OpenAiTtsEngine implements TtsEngine {
  get circuit(): CircuitStatus {
    return this.remote.circuit;
  }

  readonly info: EngineInfo;
  readonly capabilities: TtsCapabilities;

  constructor(
    private readonly remote: RemoteClient,
    languages: readonly LanguageCode[],
    private readonly voices: OpenAiTtsVoices,
    private readonly format: "pcm" | "wav",
  ) {
    this.info = { id: "openai-tts", version: remote.version };
    this.capabilities = { languages: Object.freeze([...languages]) };
  }

  async synthesize(request: SynthesisRequest, signal?: AbortSignal): Promise<SynthesizedAudio> {
    if (!this.capabilities.languages.includes(request.language)) {
      throw new Error(
        `remote TTS: language "${request.language}" is not configured (configured: ${this.capabilities.languages.join(", ")})`,
      );
    }
    const input = request.text.trim();
    if (input === "") return { samples: new Float32Array(0), sampleRate: PCM_SAMPLE_RATE };
    const { name, speed } = serverVoice(request.voice, this.voices);
    const format = this.format;
    const audio = await this.remote.call(async (client, signal) => {
      const response = await client.audio.speech.create(
        { model: this.remote.model, input, voice: name, response_format: format, speed },
        { signal },
      );
      const bytes = new Uint8Array(await response.arrayBuffer());
      // Servers that ignore `pcm` and send a WAV anyway are understood too.
      if (format === "wav" || isWav(bytes)) return decodeWav(withConsistentSizes(bytes));
      return { samples: int16ToFloat32(bytesToInt16(bytes)), sampleRate: PCM_SAMPLE_RATE };
    }, signal);
    return { samples: levelSpeech(audio.samples), sampleRate: audio.sampleRate };
  }

  async close(): Promise<void> {
    this.remote.close();
  }
}

export function createOpenAiTtsEngine(options: OpenAiTtsOptions): TtsEngine {
  const remote = new RemoteClient("TTS", options);
  const languages = configuredLanguages("TTS", options.languages);
  for (const gender of ["female", "male"] as const) {
    const names = options.voices?.[gender];
    if (
      !Array.isArray(names) ||
      names.length === 0 ||
      names.some((n) => typeof n !== "string" || n.trim() === "")
    ) {
      throw new Error(`remote TTS: voices.${gender} must list at least one server voice name`);
    }
  }
  const format = options.responseFormat ?? "wav";
  if (format !== "wav" && format !== "pcm") {
    throw new Error(`remote TTS: responseFormat must be "wav" or "pcm", got "${String(format)}"`);
  }
  const voices = { female: [...options.voices.female], male: [...options.voices.male] };
  return new OpenAiTtsEngine(remote, languages, voices, format);
}
