/**
 * The tone colour models relay can pull: OpenVoice V2's tone colour converter (MyShell.ai, MIT) as
 * published in ONNX by season-studio (`seasonstudio/openvoice_tone_clone_onnx` on Hugging Face).
 *
 * Upstream facts (read 2026-11-27; the model page itself could not be read from the build machine):
 * - File names and how they run: season-studio/MeloTTS-ONNX at ddfb27be2e605546dee8cc6495457289a7c0cd57,
 *   `melo_onnx/main.py` (`OpenVoiceToneClone_ONNX`): `configuration.json` (its `data.sampling_rate`,
 *   `filter_length`, `hop_length`, `win_length` are read), `tone_color_extract_model.onnx` (input
 *   `input`, float32 [1, frames, 513], time-major; its first output reshaped to [1, 256, 1]) and
 *   `tone_clone_model.onnx` (inputs `audio` float32 [1, 513, frames], `audio_length` int64 [1],
 *   `src_tone` and `dest_tone` float32 [1, 256, 1], `tau` float32 [1]; its first output the waveform
 *   [1, 1, 256·frames] at 22,050 Hz). Outputs are taken by position: a third party inspecting the
 *   converter found five outputs with generated names.
 * - Sizes and SHA-256 of the two ONNX files: as third-party projects pin them to the Hub's LFS
 *   records (3,257,992 and 127,891,564 bytes); a pull checks them against the SHA-256 the Hub states
 *   for each LFS file (`X-Linked-Etag`), not against these.
 * - The configuration: myshell-ai/OpenVoice V2 `checkpoints_v2/converter/config.json` (22,050 Hz,
 *   filter 1024, hop 256, window 1024, gin_channels 256); the ONNX release's copy is reported
 *   identical in every field the code reads.
 * - Licence: OpenVoice V1 and V2 are MIT ("free for both commercial and research use",
 *   myshell-ai/OpenVoice README and LICENSE at 74a1d147b17a8c3092dd5430504bd83ef6c7eb23); the ONNX
 *   export is of those weights, and its code (MeloTTS-ONNX) is MIT too.
 */

export interface ToneColorModelEntry {
  /** The name `relay models pull <name>` uses. */
  readonly name: string;
  /** "seasonstudio/openvoice_tone_clone_onnx". */
  readonly repo: string;
  readonly files: {
    readonly config: string;
    readonly extractor: string;
    readonly converter: string;
  };
  /** Bytes of each ONNX file as published (shown in `relay models list`; the pull checks SHA-256). */
  readonly sizes: Readonly<Record<string, number>>;
  readonly approxMiB: number;
  readonly licence: string;
  /** Pulled by setup with the other default models. */
  readonly default: boolean;
  readonly source: string;
  readonly description: string;
}

export const TONE_COLOR_CATALOGUE: readonly ToneColorModelEntry[] = [
  {
    name: "tone-color",
    repo: "seasonstudio/openvoice_tone_clone_onnx",
    files: {
      config: "configuration.json",
      extractor: "tone_color_extract_model.onnx",
      converter: "tone_clone_model.onnx",
    },
    sizes: { "tone_color_extract_model.onnx": 3_257_992, "tone_clone_model.onnx": 127_891_564 },
    approxMiB: 125,
    licence: "MIT (OpenVoice V2, MyShell.ai)",
    default: true,
    source: "https://huggingface.co/seasonstudio/openvoice_tone_clone_onnx",
    description: "OpenVoice V2 tone colour converter: speech in the speaker's own voice (voice_type=clone)",
  },
];

export function findToneColorModel(name: string): ToneColorModelEntry | undefined {
  return TONE_COLOR_CATALOGUE.find((entry) => entry.name === name);
}
