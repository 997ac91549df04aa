import type { Voice } from "../core/contracts.js";
import { defaultVoice, voiceById } from "./library.js";

/** Which voice speaks when a request names none, per surface, and how requests name voices. */

/**
 * A library voice, or one matched to each speaker (src/speakers/voice-choice.ts): `"clone"` (rooms; a
 * gender default until the match) or `{ auto }` (`voiceId=auto`; the `auto` voice until the match,
 * and the matched voice is reported).
 */
export type VoiceChoice = Voice | "clone" | { readonly auto: Voice };

/**
 * Per surface, the voice type used when the request names none: the real-time spec's `voiceType`
 * default (male) and the rooms spec's `voice_type` default (clone). Dubbing's `voice` (beyond the
 * spec) defaults to "auto": each speaker in the voice matched to theirs.
 */
export const DEFAULT_VOICE_TYPES = { realtime: "male", rooms: "clone", dubbing: "auto" } as const;

/**
 * A dubbing job's `voice`: "auto", "clone" (each speaker in their own voice where a tone colour
 * model is loaded, else as "auto"), a gender's default voice or a library id; undefined if none.
 */
export function dubbingVoice(value: string): Voice | "auto" | "clone" | undefined {
  if (value === "auto" || value === "clone") return value;
  if (value === "female" || value === "male") return defaultVoice(value);
  return voiceById(value);
}

/** The voice of a voice type: the library default of a gender, or clone. */
export function voiceOf(type: "male" | "female"): Voice;
export function voiceOf(type: "male" | "female" | "clone"): Voice | "clone";
export function voiceOf(type: "male" | "female" | "clone"): Voice | "clone" {
  return type === "clone" ? "clone" : defaultVoice(type);
}
