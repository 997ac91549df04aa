#!/bin/sh
# One-time setup for a fresh Debian/Ubuntu machine with Node.js 20+: the Debian packages the
# embedded engines run on and the toolchain whisper.cpp is built with (only those missing), the npm
# dependencies, whisper.cpp built for this CPU, and the build.
set -eu
cd "$(dirname "$0")/.."

PACKAGES="libpocketsphinx3 pocketsphinx-en-us apertium apertium-eng-spa apertium-fr-es apertium-es-pt \
apertium-spa-ita cg3 espeak-ng ffmpeg build-essential cmake ccache"
# What `npm test` needs besides: nginx (the fleet test), Chromium (the playground test) and
# docker-compose (checks compose.yaml). RELAY_SETUP_RUNTIME_ONLY=1 leaves them out on servers.
[ -n "${RELAY_SETUP_RUNTIME_ONLY:-}" ] || PACKAGES="$PACKAGES nginx-light chromium docker-compose"

missing=""
for pkg in $PACKAGES; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing="$missing $pkg"
done
if [ -n "$missing" ]; then
  echo "setup: installing Debian packages:$missing"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing
fi

# The npm dependencies exactly as package-lock.json records them (it lists every platform's optional
# packages, so `npm ci` accepts it and leaves it unchanged). onnxruntime-node's install script would
# download GPU providers (offline machines cannot; its CPU build ships in the package): npm 11 skips
# it through package.json's allowScripts, older npm through ONNXRUNTIME_NODE_INSTALL=skip.
# better-sqlite3 compiles SQLite during the install (its prebuilt binaries are downloads); like
# whisper.cpp below, through ccache when installed, so a repeated setup, or a new checkout on the same
# machine (paths are taken relative to it), reuses the objects instead of compiling for minutes.
(
  if command -v ccache >/dev/null 2>&1; then
    export CCACHE_BASEDIR="$(pwd)" CC="ccache ${CC:-cc}" CXX="ccache ${CXX:-c++}"
  fi
  ONNXRUNTIME_NODE_INSTALL=skip npm ci --no-audit --no-fund
)
sh scripts/build-whisper.sh
npm run build

# The default multilingual model (whisper base, 142 MiB, checksum verified, resumable): with it the
# service recognises and identifies every whisper language. Offline, the embedded engines serve.
if [ -n "${RELAY_SKIP_MODELS:-}" ]; then
  echo "setup: RELAY_SKIP_MODELS is set: no whisper model pulled; the embedded engines serve (English recognition)"
elif node dist/cli/main.js models pull base >/tmp/relay-setup-models.err 2>&1; then
  echo "setup: whisper model base ready: whisper.cpp recognises and identifies every language"
else
  echo "setup: whisper model base not downloaded ($(grep -m1 "^relay: " /tmp/relay-setup-models.err | cut -c8- | sed "s/\. .*//")); the embedded engines serve (English recognition); \`npx relay models pull base\` adds it later"
fi
# The default neural models (sherpa-onnx, about 250 MiB): the streaming English recognizer and its
# punctuation, the speaker-embedding model, and Piper voices for English and Spanish (eSpeak NG
# speaks the other languages). Offline, the first failed pull says why in one line.
MODELS=$(node -e 'import("./dist/models/sherpa-catalogue.js").then((m) => console.log(m.SHERPA_CATALOGUE.filter((e) => e.default).map((e) => e.name).join(" ")))')
if [ -n "${RELAY_SKIP_MODELS:-}" ]; then
  echo "setup: RELAY_SKIP_MODELS is set: no neural model pulled; the embedded engines serve"
else
  pulled=""
  for model in $MODELS; do
    if node dist/cli/main.js models pull "$model" >/tmp/relay-setup-neural.err 2>&1; then
      pulled="$pulled $model"
    else
      echo "setup: neural model $model not downloaded ($(grep -m1 "^relay: " /tmp/relay-setup-neural.err | cut -c8- | sed "s/\. .*//")); the embedded engines serve instead; \`npx relay models pull $model\` adds it later"
      break
    fi
  done
  [ -z "$pulled" ] || echo "setup: neural models ready:$pulled"
fi
# The default translation models (Opus-MT through transformers.js, about 650 MiB): en<->es, en<->fr
# and en<->de, and every pair between those four through English; Apertium stays the fallback.
# Offline, the first failed pull says why in one line.
MT_MODELS=$(node -e 'import("./dist/models/mt-catalogue.js").then((m) => console.log(m.MT_CATALOGUE.filter((e) => e.default).map((e) => e.name).join(" ")))')
if [ -n "${RELAY_SKIP_MODELS:-}" ]; then
  echo "setup: RELAY_SKIP_MODELS is set: no translation model pulled; Apertium translates"
else
  pulled=""
  for model in $MT_MODELS; do
    if node dist/cli/main.js models pull "$model" >/tmp/relay-setup-mt.err 2>&1; then
      pulled="$pulled $model"
    else
      echo "setup: translation model $model not downloaded ($(grep -m1 "^relay: " /tmp/relay-setup-mt.err | cut -c8- | sed "s/\. .*//")); Apertium translates instead; \`npx relay models pull $model\` adds it later"
      break
    fi
  done
  [ -z "$pulled" ] || echo "setup: translation models ready:$pulled"
fi
echo "setup: done"
