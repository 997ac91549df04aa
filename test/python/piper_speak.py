"""Piper's own runtime (piper-tts 1.8.0) as the reference for relay's imported Piper voices
(test/integration/piper-voice-real.test.ts). Run with the `models` environment's python.

  piper_speak.py speak <voice.onnx> <out-dir> [runs]   sentences as a JSON list on stdin
      For each run and sentence: <out-dir>/piper-<run>-<i>.f32 (raw float32, the model's output
      unnormalized). Prints JSON: sample rate, each sentence's phonemes and phoneme ids, the
      synthesis seconds of each run.
  piper_speak.py distance <rate>                       pairs of .f32 paths as a JSON list on stdin
      Prints JSON: the log-mel distance of each pair (dB, see log_mel_distance).
"""

import json
import sys
import time

import numpy as np
from piper import PiperVoice, SynthesisConfig

N_FFT = 1024
HOP = 256
MELS = 80


def speak(model: str, out_dir: str, runs: int) -> None:
    sentences = json.load(sys.stdin)
    voice = PiperVoice.load(model)
    # The model's raw output: Piper normalizes each sentence's peak by default, sherpa-onnx does not.
    raw = SynthesisConfig(normalize_audio=False)
    spoken = []
    for text in sentences:
        phonemes = voice.phonemize(text)
        spoken.append(
            {
                "text": text,
                "phonemes": phonemes,
                "ids": [voice.phonemes_to_ids(p) for p in phonemes if p],
            }
        )
    seconds = []
    for run in range(runs):
        started = time.perf_counter()
        for i, sentence in enumerate(spoken):
            audio = np.concatenate(
                [np.asarray(voice.phoneme_ids_to_audio(ids, raw), dtype=np.float32) for ids in sentence["ids"]]
            )
            audio.tofile(f"{out_dir}/piper-{run}-{i}.f32")
        seconds.append(time.perf_counter() - started)
    json.dump({"sampleRate": voice.config.sample_rate, "sentences": spoken, "seconds": seconds}, sys.stdout)


def mel_filters(rate: int) -> np.ndarray:
    """Triangular filters on the HTK mel scale, 0 Hz to Nyquist."""
    mel = lambda f: 2595 * np.log10(1 + f / 700)  # noqa: E731
    hz = lambda m: 700 * (10 ** (m / 2595) - 1)  # noqa: E731
    edges = hz(np.linspace(0, mel(rate / 2), MELS + 2))
    bins = np.fft.rfftfreq(N_FFT, 1 / rate)
    filters = np.zeros((MELS, bins.size))
    for m in range(MELS):
        lo, mid, hi = edges[m], edges[m + 1], edges[m + 2]
        filters[m] = np.clip(np.minimum((bins - lo) / (mid - lo), (hi - bins) / (hi - mid)), 0, None)
    return filters


def log_mel(samples: np.ndarray, rate: int) -> np.ndarray:
    """Frames × mels, in dB, of speech scaled to unit RMS (the two runtimes' levels differ)."""
    samples = samples / max(float(np.sqrt(np.mean(samples**2))), 1e-9)
    frames = 1 + max(0, samples.size - N_FFT) // HOP
    window = np.hanning(N_FFT)
    stack = np.stack([samples[i * HOP : i * HOP + N_FFT] * window for i in range(frames)])
    power = np.abs(np.fft.rfft(stack, axis=1)) ** 2
    return 10 * np.log10(np.maximum(power @ mel_filters(rate).T, 1e-6))


def log_mel_distance(a: np.ndarray, b: np.ndarray, rate: int) -> float:
    """
    Mean per-band |difference| (dB) of the two log-mel spectrograms along their dynamic time warping
    path: the two lengths differ (VITS draws each phoneme's duration at random), so frames are
    aligned, not cut. Bands below -60 dB of the frame maximum are floored there, so silence's noise
    floor does not dominate.
    """
    x, y = log_mel(a, rate), log_mel(b, rate)
    top = max(x.max(), y.max())
    x, y = np.maximum(x, top - 60), np.maximum(y, top - 60)
    cost = np.abs(x[:, None, :] - y[None, :, :]).mean(axis=2)
    # Accumulated cost and path length, an anti-diagonal at a time (each depends on the two before).
    n, m = cost.shape
    acc = np.full((n + 1, m + 1), np.inf)
    steps = np.zeros((n + 1, m + 1))
    acc[0, 0] = 0
    for d in range(2, n + m + 1):
        i = np.arange(max(1, d - m), min(n, d - 1) + 1)
        j = d - i
        options = np.stack([acc[i - 1, j - 1], acc[i - 1, j], acc[i, j - 1]])
        lengths = np.stack([steps[i - 1, j - 1], steps[i - 1, j], steps[i, j - 1]])
        k = np.argmin(options, axis=0)
        acc[i, j] = cost[i - 1, j - 1] + options[k, np.arange(i.size)]
        steps[i, j] = lengths[k, np.arange(i.size)] + 1
    return float(acc[n, m] / steps[n, m])


def distance(rate: int) -> None:
    pairs = json.load(sys.stdin)
    load = lambda f: np.fromfile(f, dtype=np.float32)  # noqa: E731
    json.dump([log_mel_distance(load(a), load(b), rate) for a, b in pairs], sys.stdout)


if __name__ == "__main__":
    if sys.argv[1] == "speak":
        speak(sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 1)
    else:
        distance(int(sys.argv[2]))
