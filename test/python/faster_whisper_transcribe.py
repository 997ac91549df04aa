"""Transcribes WAV files with faster-whisper, as the reference for relay's whisper.cpp engine.

Usage: python faster_whisper_transcribe.py MODEL_DIR LANGUAGE WAV...
  LANGUAGE  a code, or "auto" to identify it
Prints one JSON array: {"file", "text", "language", "seconds"} per WAV, in order.

Decoding is matched to relay's engine (native/whisper-cpp/addon.cc): greedy (beam_size=1), starting
at temperature 0 with whisper's fallback, timestamps sampled, no prompt, no VAD.
"""

import json
import sys
import time

from faster_whisper import WhisperModel


def main():
    model_dir, language, *files = sys.argv[1:]
    model = WhisperModel(model_dir, device="cpu", compute_type="float32", cpu_threads=2)
    results = []
    for file in files:
        started = time.monotonic()
        segments, info = model.transcribe(
            file,
            language=None if language == "auto" else language,
            beam_size=1,
            without_timestamps=False,
            condition_on_previous_text=False,
            vad_filter=False,
        )
        text = "".join(segment.text for segment in segments).strip()
        results.append(
            {"file": file, "text": text, "language": info.language, "seconds": time.monotonic() - started}
        )
    print(json.dumps(results))


if __name__ == "__main__":
    main()
