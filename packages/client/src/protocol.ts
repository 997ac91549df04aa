/**
 * The real-time protocol's fixed numbers (the spec's "Limits and formats"), in one place for the
 * service and this SDK. Constants only, importing nothing: the service reads them from
 * `@relay-translate/client/protocol` without loading the SDK itself.
 */

/** Audio in: PCM16 little-endian mono at this rate. */
export const INPUT_SAMPLE_RATE = 16_000;
/** Translated speech out: float32 little-endian mono at this rate. */
export const OUTPUT_SAMPLE_RATE = 24_000;
/** Samples in one frame of translated speech (80 ms at OUTPUT_SAMPLE_RATE); a clip's last may be shorter. */
export const OUTPUT_FRAME_SAMPLES = 1920;
/** The most characters one `speak` may carry; a longer line is refused with an `error` naming it. */
export const MAX_SPEAK_CHARACTERS = 5000;
/**
 * `speak` lines a tts session may have waiting or being spoken; more are refused with an `error`
 * naming each (send more after a `speech_end`).
 */
export const MAX_WAITING_SPEAKS = 64;
