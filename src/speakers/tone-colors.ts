/**
 * Each speaker's own voice for `voice_type=clone` (rooms), `voiceType=clone` (sessions) and
 * `voice=clone` (dubbing), when a tone colour converter is loaded: the library voice matched to the
 * speaker speaks (speakers/voice-choice.ts: the right gender, pitch and rate), and the converter
 * turns it into the speaker's timbre.
 *
 *   - A speaker's tone colour is extracted once they have spoken `minSeconds` (the converter's
 *     capability, 3 s for OpenVoice), and again at twice as much speech each time up to
 *     `REFERENCE_SECONDS`, each time from all of it: refined as more arrives, per speaker label.
 *   - Until then their lines are the matched library voice, unconverted.
 *   - Privacy: the speech and the tone colours live in this object only, which lives as long as the
 *     room, session or job that made it; nothing is stored, logged or shared (docs/privacy.md).
 */
import { concatPcm, int16ToFloat32 } from "../audio/pcm.js";
import type { LanguageCode, ToneColor, ToneColorEngine } from "../core/contracts.js";
import { MAX_SPEAKERS } from "./tracker.js";
import type { SpeakerVoice, VoiceChooser } from "./voice-choice.js";

/** The most speech kept per speaker for their tone colour (upstream averages ~10 s pieces). */
export const REFERENCE_SECONDS = 20;
const RATE = 16_000;

interface SpeakerSpeech {
  readonly pieces: Int16Array[];
  samples: number;
  /** Samples the latest extraction (finished or running) was made from. */
  extractedFrom: number;
  /** The extraction running, if any. */
  running: Promise<void> | undefined;
  toneColor: ToneColor | undefined;
}

export class SpeakerToneColors {
  private readonly speakers = new Map<string, SpeakerSpeech>();
  private readonly stop = new AbortController();

  /** `account`: whose room, session or job (the converter serves accounts in turn). */
  constructor(
    private readonly engine: ToneColorEngine,
    private readonly account?: string,
  ) {}

  /** Speech of `speaker` (undefined: the only speaker there is), PCM16 16 kHz. */
  observe(speaker: string | undefined, pcm: Int16Array): void {
    const key = speaker ?? "";
    let state = this.speakers.get(key);
    if (!state) {
      // The tracker hands out at most MAX_SPEAKERS labels; this table follows it.
      if (this.speakers.size >= MAX_SPEAKERS) return;
      state = { pieces: [], samples: 0, extractedFrom: 0, running: undefined, toneColor: undefined };
      this.speakers.set(key, state);
    }
    const room = REFERENCE_SECONDS * RATE - state.samples;
    if (room > 0 && pcm.length > 0) {
      const piece = pcm.length > room ? pcm.slice(0, room) : pcm.slice();
      state.pieces.push(piece);
      state.samples += piece.length;
    }
    this.extractIfDue(state);
  }

  /** The speaker's latest tone colour, undefined until one is ready. */
  of(speaker: string | undefined): ToneColor | undefined {
    return this.speakers.get(speaker ?? "")?.toneColor;
  }

  /** Stops extractions in flight and forgets every speaker. */
  close(): void {
    this.stop.abort(new Error("closed"));
    this.speakers.clear();
  }

  /**
   * Waits for the extractions running, then extracts once more for every speaker with speech not
   * yet in their tone colour (dubbing: all of a speaker's lines are converted with one tone colour,
   * made from all their speech).
   */
  async settle(): Promise<void> {
    for (const state of this.speakers.values()) {
      await state.running;
      if (state.samples >= this.engine.capabilities.minSeconds * RATE && state.samples > state.extractedFrom)
        await this.extract(state);
    }
  }

  private extractIfDue(state: SpeakerSpeech): void {
    const due =
      state.extractedFrom === 0
        ? state.samples >= this.engine.capabilities.minSeconds * RATE
        : state.samples >= Math.min(2 * state.extractedFrom, REFERENCE_SECONDS * RATE) &&
          state.samples > state.extractedFrom;
    if (due && !state.running) void this.extract(state);
  }

  /** Extracts the speaker's tone colour from all their speech so far. */
  private extract(state: SpeakerSpeech): Promise<void> {
    if (this.stop.signal.aborted) return Promise.resolve();
    const from = state.samples;
    const speech = concatPcm(state.pieces);
    state.running = this.engine
      .toneColor(
        { samples: int16ToFloat32(speech), sampleRate: RATE },
        {
          signal: this.stop.signal,
          mayWait: true,
          ...(this.account === undefined ? {} : { account: this.account }),
        },
      )
      .then(
        (toneColor) => {
          state.toneColor = toneColor;
          state.extractedFrom = from;
        },
        // A busy or failed converter: tried again with the speaker's next speech.
        () => undefined,
      )
      .finally(() => {
        state.running = undefined;
      });
    return state.running;
  }
}

/** A chooser whose voices carry the speaker's tone colour once it is ready. */
export class ClonedVoices implements VoiceChooser {
  constructor(
    private readonly voices: VoiceChooser,
    private readonly toneColors: SpeakerToneColors,
  ) {}

  observe(speaker: string | undefined, pcm: Int16Array): void {
    this.voices.observe(speaker, pcm);
    this.toneColors.observe(speaker, pcm);
  }

  voiceFor(speaker: string | undefined, language: LanguageCode): SpeakerVoice {
    const chosen = this.voices.voiceFor(speaker, language);
    const toneColor = this.toneColors.of(speaker);
    return toneColor ? { ...chosen, toneColor } : chosen;
  }

  close(): void {
    this.toneColors.close();
  }
}
