import type { VoiceTimbre } from "../../core/contracts.js";

/** Pico accepts pitch levels 50..200 and speed levels 20..500 (percent; 100 = speaker default). */
const PITCH_LEVELS = [50, 200] as const;
const SPEED_LEVELS = [20, 500] as const;
/** Control characters are dropped like in the eSpeak engine; tab and newline stay. */
const CONTROL_CHARACTERS = /(?![\t\n])\p{Cc}/gu;

/**
 * eSpeak pitch steps → Pico pitch percent. Measured on eSpeak NG 1.51: −40 steps ≈ ×0.74 and +40
 * ≈ ×1.45 of the base F0, i.e. roughly one octave per 80 steps.
 */
export function picoPitchLevel(pitch: number): number {
  return clamp(Math.round(100 * 2 ** ((pitch - 50) / 80)), ...PITCH_LEVELS);
}

export function picoSpeedLevel(rate: number): number {
  return clamp(Math.round(100 * rate), ...SPEED_LEVELS);
}

/**
 * Wraps `text` in Pico's prosody markup for `timbre`, or returns undefined when there is nothing to
 * say. Angle brackets become spaces: Pico parses `<…>` as markup and has no escape for them, so
 * text must never be able to open a tag. (Pitch range has no Pico equivalent and is not rendered.)
 */
export function picoMarkup(text: string, timbre: VoiceTimbre): string | undefined {
  const plain = text.replace(CONTROL_CHARACTERS, " ").replace(/[<>]/g, " ");
  if (plain.trim() === "") return undefined;
  const pitch = picoPitchLevel(timbre.pitch);
  const speed = picoSpeedLevel(timbre.rate);
  return `<speed level="${speed}"><pitch level="${pitch}">${plain}</pitch></speed>`;
}

function clamp(value: number, min: number, max: number): number {
  return Number.isFinite(value) ? Math.min(max, Math.max(min, value)) : 100;
}
