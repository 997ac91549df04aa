#!/bin/sh
# One-time setup for a fresh Debian/Ubuntu machine with Node.js 20.19+, 22.13+ or 24+ (package.json's
# engines): the Debian packages the embedded engines run on and the toolchain whisper.cpp is built
# with (only those missing), the npm dependencies, whisper.cpp built for this CPU, and the build.
set -eu
cd "$(dirname "$0")/.."

PACKAGES="libpocketsphinx3 pocketsphinx-en-us apertium apertium-eng-spa apertium-fr-es apertium-es-pt \
apertium-spa-ita cg3 espeak-ng ffmpeg build-essential cmake ccache"
# What `npm test` needs besides: PostgreSQL and Redis (the database, fleet and room tests: the test
# run starts its own on loopback where none is running, test/support/servers.ts), nginx (the fleet
# test), Chromium (the playground and meeting tests) and docker-compose (checks compose.yaml).
# RELAY_SETUP_RUNTIME_ONLY=1 leaves them out on servers.
[ -n "${RELAY_SETUP_RUNTIME_ONLY:-}" ] ||
  PACKAGES="$PACKAGES postgresql redis-server nginx-light chromium docker-compose"

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
# LiveKit's server for the room tests (and `npm run livekit`), built once from the Go module proxy
# at a pinned tag. Without Go it says so, and the tests that need LiveKit say what is missing.
if [ -z "${RELAY_SETUP_RUNTIME_ONLY:-}" ]; then
  if livekit=$(sh scripts/install-livekit.sh); then
    echo "setup: LiveKit server ready: $livekit"
  else
    echo "setup: LiveKit server not built (see above); the tests that need it say so"
  fi
fi

# The default multilingual model (whisper base, 142 MiB, checksum verified, resumable): with it the
# service recognises and identifies every whisper language. Offline, the embedded engines serve.
if [ -n "${RELAY_SKIP_MODELS:-}" ]; then
  echo "setup: RELAY_SKIP_MODELS is set: no whisper model pulled; the embedded engines serve (English recognition)"
elif node dist/cli/main.js models pull base >/tmp/relay-setup-models.err 2>&1; then
  echo "setup: whisper model base ready: whisper.cpp recognises and identifies every language"
else
  echo "setup: whisper model base not downloaded ($(grep -m1 "^relay: " /tmp/relay-setup-models.err | cut -c8- | sed "s/\. .*//")); the embedded engines serve (English recognition); \`npx relay models pull base\` adds it later"
fi
# Pulls the default models of one kind, in turn. A model that fails is reported and the next one is
# tried (one bad download costs that model only); offline, the first failure says so and the rest
# are not tried.
#   pull_defaults <kind> <engine family> <catalogue export> <what serves instead>
pull_defaults() {
  if [ -n "${RELAY_SKIP_MODELS:-}" ]; then
    echo "setup: RELAY_SKIP_MODELS is set: no $1 pulled; $4"
    return
  fi
  models=$(node -e "import('./dist/engines/$2/catalogue.js').then((m) => console.log(m.$3.filter((e) => e.default).map((e) => e.name).join(' ')))")
  pulled=""
  for model in $models; do
    if node dist/cli/main.js models pull "$model" >/tmp/relay-setup-pull.err 2>&1; then
      pulled="$pulled $model"
    else
      echo "setup: $1 $model not downloaded ($(grep -m1 "^relay: " /tmp/relay-setup-pull.err | cut -c8- | sed "s/\. .*//")); $4 instead; \`npx relay models pull $model\` adds it later"
      grep -q "offline" /tmp/relay-setup-pull.err && break
    fi
  done
  [ -z "$pulled" ] || echo "setup: $1s ready:$pulled"
}
# The default neural models (sherpa-onnx, about 510 MiB to download): the streaming English recognizer and its
# punctuation, the speaker-embedding model, and Piper voices for English and Spanish (eSpeak NG
# speaks the other languages).
pull_defaults "neural model" sherpa-onnx SHERPA_CATALOGUE "the embedded engines serve"
# The default translation models (Opus-MT through transformers.js, about 650 MiB): en<->es, en<->fr
# and en<->de, and every pair between those four through English; Apertium stays the fallback.
pull_defaults "translation model" transformers-js MT_CATALOGUE "Apertium translates"
# The default tone colour model (OpenVoice V2's converter in ONNX, MIT, about 125 MiB): rooms'
# voice_type=clone speaks in the speaker's own voice; without it, clone picks the nearest library voice.
pull_defaults "tone colour model" openvoice TONE_COLOR_CATALOGUE "voice_type=clone uses the nearest library voice"
echo "setup: done"
