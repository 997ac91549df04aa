/**
 * Speech synthesis on a remote server speaking OpenAI's `POST /v1/audio/speech` (OpenAI,
 * Kokoro-FastAPI, openedai-speech, …).
 *
 * Such servers offer a handful of named voices, not the library's 70 timbres, so each library voice is
 * mapped to a server voice of its gender: the i-th voice of a gender in the library gets
 * `voices[gender][i % voices[gender].length]`, and its rate becomes the request's `speed`. Pitch
 * cannot be asked for; the language follows from the text (the API has no language parameter).
 */
import wavefile from "wavefile";
import { levelSpeech } from "../../voices/loudness.js";
import { listVoices } from "../../voices/library.js";
import type {
  EngineInfo,
  LanguageCode,
  SynthesisRequest,
  SynthesizedAudio,
  TtsCapabilities,
  TtsEngine,
  Voice,
} from "../types.js";
import { RemoteClient, type RemoteEngineOptions } from "./client.js";
import { configuredLanguages } from "./languages.js";

const { WaveFile } = wavefile;

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

function pcm16ToFloat(bytes: Uint8Array): Float32Array {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const samples = new Float32Array(bytes.byteLength >> 1);
  for (let i = 0; i < samples.length; i++) samples[i] = view.getInt16(2 * i, true) / 32768;
  return samples;
}

/**
 * Streaming servers write WAV headers before they know the length (size 0 or 0xFFFFFFFF): the data
 * chunk is then taken to run to the end of the body. Returns a copy with consistent sizes.
 */
function withConsistentSizes(bytes: Uint8Array): Uint8Array {
  const fixed = new Uint8Array(bytes);
  const view = new DataView(fixed.buffer);
  view.setUint32(4, fixed.byteLength - 8, true);
  let offset = 12;
  while (offset + 8 <= fixed.byteLength) {
    const id = String.fromCharCode(...fixed.subarray(offset, offset + 4));
    const size = view.getUint32(offset + 4, true);
    const body = offset + 8;
    if (id === "data") {
      let length = fixed.byteLength - body;
      if (size !== 0 && size <= length) length = size;
      length -= length % 2;
      view.setUint32(offset + 4, length, true);
      return fixed.subarray(0, body + length);
    }
    offset = body + size + (size & 1);
  }
  throw new Error("the WAV answer has no data chunk");
}

/** Decodes a WAV of any common encoding as mono float samples (channels averaged). */
export function decodeWav(bytes: Uint8Array): SynthesizedAudio {
  const wav = new WaveFile(withConsistentSizes(bytes));
  wav.toBitDepth("32f");
  const channels = wav.getSamples(false, Float64Array) as unknown as Float64Array[] | Float64Array;
  const list = Array.isArray(channels) ? channels : [channels];
  const length = list[0]?.length ?? 0;
  const samples = new Float32Array(length);
  for (const channel of list) for (let i = 0; i < length; i++) samples[i]! += channel[i]! / list.length;
  return { samples, sampleRate: (wav.fmt as { sampleRate: number }).sampleRate };
}

function isWav(bytes: Uint8Array): boolean {
  return (
    bytes.byteLength >= 12 &&
    String.fromCharCode(...bytes.subarray(0, 4)) === "RIFF" &&
    String.fromCharCode(...bytes.subarray(8, 12)) === "WAVE"
  );
}

class OpenAiTtsEngine implements TtsEngine {
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

  async synthesize(request: SynthesisRequest): Promise<SynthesizedAudio> {
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
      if (format === "wav" || isWav(bytes)) return decodeWav(bytes);
      return { samples: pcm16ToFloat(bytes), sampleRate: PCM_SAMPLE_RATE };
    });
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
