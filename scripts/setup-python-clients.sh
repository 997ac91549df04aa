#!/bin/sh
# The Python environment Pinch's own clients run in for test/system/pinch-python-clients.test.ts:
# pinch-sdk, pipecat-plugins-pinch (with Pipecat) and livekit-plugins-pinch (with LiveKit Agents),
# at the versions test/python/requirements.txt pins, installed from PyPI as their READMEs say.
# Made once per machine and requirements file in
# ${RELAY_CACHE_DIR:-~/.cache/relay}/python-clients/<hash of the requirements>/ (about 750 MB) and
# reused by later checkouts. Prints the environment's directory. CI runs it (.ci/run).
set -eu
cd "$(dirname "$0")/.."
REQUIREMENTS=test/python/requirements.txt
HASH=$(sha256sum "$REQUIREMENTS" | cut -c1-12)
DIR="${RELAY_CACHE_DIR:-$HOME/.cache/relay}/python-clients/$HASH"

if [ -f "$DIR/.complete" ]; then
  echo "$DIR"
  exit 0
fi
PYTHON="${RELAY_PYTHON:-python3}"
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
  echo "setup-python-clients: Pinch's clients need Python 3.10 or newer as $PYTHON (RELAY_PYTHON names another)" >&2
  exit 1
fi
# Debian's python3 makes environments only with python3-venv (its ensurepip).
if ! "$PYTHON" -m ensurepip --version >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends python3-venv
fi
rm -rf "$DIR"
echo "setup-python-clients: installing Pinch's Python clients in $DIR (a few minutes, once)" >&2
"$PYTHON" -m venv "$DIR"
"$DIR/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$REQUIREMENTS" >&2
# Every requirement met by what was installed (--no-deps installs exactly the pinned list).
"$DIR/bin/pip" check >&2
touch "$DIR/.complete"
echo "$DIR"
