"""The Python half of `npm run bench:quality` (scripts/bench-quality.ts runs it in the `models`
environment of scripts/setup-python-clients.sh): real Whisper weights through faster-whisper, and the
scorers. Reads one JSON request on standard input, writes one JSON answer.

  {"do": "transcribe", "model": DIR, "clips": [{"path": WAV, "language": "es" | null}]}
      -> [{"text", "language"}]: faster-whisper, beam 5 (its default, as the Whisper paper
         decodes), int8 on 2 CPU threads; language null lets the model identify it
  {"do": "wer", "normalizer": "english" | "basic", "pairs": [[reference, hypothesis]]}
      -> {"wer", "words"}: jiwer over the corpus, after Whisper's own text normaliser
         (whisper_normalizer: EnglishTextNormalizer for English, BasicTextNormalizer otherwise),
         as the Whisper paper scores
  {"do": "mt", "references": [...], "hypotheses": [...]}
      -> {"bleu", "chrf"}: sacrebleu corpus BLEU (13a) and chrF2
"""

import json
import sys


def transcribe(request):
    from faster_whisper import WhisperModel

    model = WhisperModel(request["model"], device="cpu", compute_type="int8", cpu_threads=2)
    results = []
    for clip in request["clips"]:
        segments, info = model.transcribe(clip["path"], language=clip.get("language"), beam_size=5)
        results.append({"text": " ".join(s.text.strip() for s in segments), "language": info.language})
    return results


def wer(request):
    import jiwer
    from whisper_normalizer.basic import BasicTextNormalizer
    from whisper_normalizer.english import EnglishTextNormalizer

    normalize = EnglishTextNormalizer() if request["normalizer"] == "english" else BasicTextNormalizer()
    references, hypotheses = [], []
    for reference, hypothesis in request["pairs"]:
        reference = normalize(reference).strip()
        if not reference:
            continue
        references.append(reference)
        hypotheses.append(normalize(hypothesis).strip())
    words = sum(len(r.split()) for r in references)
    return {"wer": jiwer.wer(references, hypotheses), "words": words}


def mt(request):
    import sacrebleu

    references = [request["references"]]
    return {
        "bleu": sacrebleu.corpus_bleu(request["hypotheses"], references).score,
        "chrf": sacrebleu.corpus_chrf(request["hypotheses"], references).score,
    }


request = json.load(sys.stdin)
answer = {"transcribe": transcribe, "wer": wer, "mt": mt}[request["do"]](request)
json.dump(answer, sys.stdout)
