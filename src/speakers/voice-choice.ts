/**
 * Each speaker's voice for translated speech: a fixed library voice, or one matched to the
 * speaker's own voice (`voiceId=auto`, rooms' `voice_type=clone`, dubbing's `voice=auto`). The same
 * rules serve every surface:
 *
 *   - a speaker's speech is measured (src/voices/voice-features.ts) once their label is decided;
 *   - until their first profile (about 0.5 s of voiced speech) their lines use the fallback voice,
 *     and are not reported as matched;
 *   - the match follows the profile as it firms up, applying from the speaker's next line, and is
 *     locked per language once the profile locks (about 4 s of voiced speech);
 *   - the gender of the speaker's first matched voice is kept for good, in every language: once a
 *     man has a man's voice, a profile that firms up differently never gives him a woman's (lines
 *     that cannot be matched then take the library default of that gender);
 *   - matching is synchronous and never waits: while the library measurements are still running,
 *     lines keep the fallback.
 */
import type { LanguageCode, ToneColor, Voice } from "../core/contracts.js";
import { defaultVoice } from "../voices/library.js";
import { SpeakerProfiler } from "./profiler.js";
import type { VoiceFeatures } from "../voices/voice-features.js";
import { MAX_SPEAKERS } from "./tracker.js";

export interface SpeakerVoice {
  readonly voice: Voice;
  /** Chosen from the speaker's own voice (reported as `voiceId` with `voiceId=auto`). */
  readonly matched: boolean;
  /** The speaker's own timbre, which the voice is converted to (clone voices, tone-colors.ts). */
  readonly toneColor?: ToneColor;
}

export interface VoiceChooser {
  /** Speech of `speaker` (undefined: the only speaker there is), PCM16 16 kHz. */
  observe(speaker: string | undefined, pcm: Int16Array): void;
  /** The voice of the speaker's next line in `language`. */
  voiceFor(speaker: string | undefined, language: LanguageCode): SpeakerVoice;
  /** Forgets the speakers (their session ended). */
  close?(): void;
}

/** Median F0 (Hz) below which a measured speaker gets the male default until matched. */
const MALE_F0_CEILING_HZ = 165;

/**
 * The library default of the speaker's likely gender while no match is possible: by pitch once
 * measured, else `otherwise`.
 */
export function genderDefault(
  speaker: VoiceFeatures | undefined,
  otherwise: Voice["gender"] = "female",
): Voice {
  return defaultVoice(speaker ? (speaker.medianF0Hz < MALE_F0_CEILING_HZ ? "male" : "female") : otherwise);
}

/** Every line in one library voice. */
export function fixedVoice(voice: Voice): VoiceChooser {
  const chosen = { voice, matched: false };
  return { observe: () => undefined, voiceFor: () => chosen };
}

export interface MatchedVoicesOptions {
  /**
   * The library voice nearest a measured speaker in `language` (of `gender` when given: the speaker's
   * voice was decided), or undefined when not ready yet.
   */
  readonly match: (
    speaker: VoiceFeatures,
    language: LanguageCode,
    gender: Voice["gender"] | undefined,
  ) => Voice | undefined;
  /** The voice before a match: given the speaker's profile once there is one. */
  readonly fallback: (speaker: VoiceFeatures | undefined) => Voice;
}

interface SpeakerState {
  readonly profiler: SpeakerProfiler;
  readonly locked: Map<LanguageCode, Voice>;
  /** The gender of the speaker's first matched voice. */
  gender: Voice["gender"] | undefined;
}

export class MatchedVoices implements VoiceChooser {
  private readonly speakers = new Map<string, SpeakerState>();

  constructor(private readonly options: MatchedVoicesOptions) {}

  observe(speaker: string | undefined, pcm: Int16Array): void {
    const key = speaker ?? "";
    let state = this.speakers.get(key);
    if (!state) {
      // The tracker hands out at most MAX_SPEAKERS labels; this table follows it.
      if (this.speakers.size >= MAX_SPEAKERS) return;
      state = { profiler: new SpeakerProfiler(), locked: new Map(), gender: undefined };
      this.speakers.set(key, state);
    }
    state.profiler.observe(pcm);
  }

  voiceFor(speaker: string | undefined, language: LanguageCode): SpeakerVoice {
    const state = this.speakers.get(speaker ?? "");
    const profile = state?.profiler.profile;
    if (!state || !profile) return { voice: this.options.fallback(undefined), matched: false };
    const locked = state.locked.get(language);
    if (locked) return { voice: locked, matched: true };
    const voice = this.options.match(profile, language, state.gender);
    if (!voice) {
      const fallback = state.gender ? defaultVoice(state.gender) : this.options.fallback(profile);
      return { voice: fallback, matched: false };
    }
    state.gender ??= voice.gender;
    if (state.profiler.locked) state.locked.set(language, voice);
    return { voice, matched: true };
  }
}
