#!/bin/sh
# The Python environments the tests run Python tools in, installed from PyPI with --no-deps at exactly
# the versions their requirements file pins (resolved once in a fresh environment, then frozen):
#   sh scripts/setup-python-clients.sh        Pinch's own clients, for test/system/pinch-python-clients.test.ts:
#                                             pinch-sdk, pipecat-plugins-pinch (with Pipecat) and
#                                             livekit-plugins-pinch (with LiveKit Agents), as their READMEs
#                                             say (test/python/requirements.txt, about 750 MB)
#   sh scripts/setup-python-clients.sh fuzz   schemathesis, for test/system/api-fuzz.test.ts
#                                             (test/python/fuzz-requirements.txt, about 95 MB)
#   sh scripts/setup-python-clients.sh models faster-whisper and its OpenAI-compatible server, piper-tts,
#                                             jiwer, sacrebleu: the real-model tests and benchmarks
#                                             (test/python/models-requirements.txt, about 600 MB)
#   sh scripts/setup-python-clients.sh whisperlive  WhisperLive 0.10.0, the peer of `npm run bench:peer`
#                                             (test/python/whisperlive-requirements.txt, about 7.8 GB with
#                                             the GPU libraries it pins; PyAudio needs portaudio19-dev)
# Each is made once per machine and requirements file in
# ${RELAY_CACHE_DIR:-~/.cache/relay}/python-<clients|fuzz|models|whisperlive>/<hash of the requirements>/ and reused by
# later checkouts (test/support/python-clients.ts finds it there). Prints the environment's directory.
# CI runs both (.ci/run).
set -eu
cd "$(dirname "$0")/.."
case "${1:-clients}" in
  clients) NAME=clients REQUIREMENTS=test/python/requirements.txt MINOR=10 ;;
  fuzz) NAME=fuzz REQUIREMENTS=test/python/fuzz-requirements.txt MINOR=11 ;;
  models) NAME=models REQUIREMENTS=test/python/models-requirements.txt MINOR=10 ;;
  whisperlive) NAME=whisperlive REQUIREMENTS=test/python/whisperlive-requirements.txt MINOR=10 ;;
  *)
    echo "usage: sh scripts/setup-python-clients.sh [clients|fuzz|models|whisperlive]" >&2
    exit 2
    ;;
esac
HASH=$(sha256sum "$REQUIREMENTS" | cut -c1-12)
DIR="${RELAY_CACHE_DIR:-$HOME/.cache/relay}/python-$NAME/$HASH"

if [ -f "$DIR/.complete" ]; then
  echo "$DIR"
  exit 0
fi
PYTHON="${RELAY_PYTHON:-python3}"
if ! "$PYTHON" -c "import sys; sys.exit(sys.version_info < (3, $MINOR))" 2>/dev/null; then
  echo "setup-python-clients: $REQUIREMENTS needs Python 3.$MINOR or newer as $PYTHON (RELAY_PYTHON names another)" >&2
  exit 1
fi
# Debian packages the environment needs: python3-venv (Debian's python3 makes environments only with
# its ensurepip); for WhisperLive, PortAudio's headers (PyAudio builds from source against them).
PACKAGES=""
"$PYTHON" -m ensurepip --version >/dev/null 2>&1 || PACKAGES="python3-venv"
[ "$NAME" != whisperlive ] || [ -f /usr/include/portaudio.h ] || PACKAGES="$PACKAGES portaudio19-dev"
if [ -n "$PACKAGES" ] && command -v apt-get >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -q
  # shellcheck disable=SC2086 # a list of package names
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $PACKAGES
fi
rm -rf "$DIR"
echo "setup-python-clients: installing $REQUIREMENTS in $DIR (a few minutes, once)" >&2
"$PYTHON" -m venv "$DIR"
"$DIR/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$REQUIREMENTS" >&2
# Every requirement met by what was installed (--no-deps installs exactly the pinned list).
"$DIR/bin/pip" check >&2
touch "$DIR/.complete"
echo "$DIR"
