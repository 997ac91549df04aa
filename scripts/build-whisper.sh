#!/bin/sh
# Builds relay's whisper.cpp addon for this machine's CPU (AVX2/FMA/F16C where present) from the
# whisper.cpp sources in the npm package nodejs-whisper, into native/whisper-cpp/build/. Run by
# `npm run setup`; never fatal: without the build the service falls back to the prebuilt
# @fugood/node-whisper binding (no SIMD: about 20x slower) and says so at start-up.
set -u
cd "$(dirname "$0")/.."

OUT=native/whisper-cpp/build
SOURCES=node_modules/nodejs-whisper/cpp/whisper.cpp
ADDON_API=$(node -p "require('path').resolve(require('node-addon-api').include_dir)" 2>/dev/null)
NODE_INCLUDE=$(node -p "require('path').resolve(process.execPath, '../../include/node')")
[ -f "$NODE_INCLUDE/node_api.h" ] || NODE_INCLUDE="$(npm config get nodedir 2>/dev/null)/include/node"

fail() {
  echo "setup: whisper.cpp native build skipped: $1; the prebuilt binding (no SIMD, much slower) serves instead"
  exit 0
}

[ -f "$SOURCES/CMakeLists.txt" ] || fail "whisper.cpp sources missing (npm package nodejs-whisper not installed)"
[ -n "$ADDON_API" ] || fail "node-addon-api not installed"
[ -f "$NODE_INCLUDE/node_api.h" ] || fail "Node.js headers not found (looked in $NODE_INCLUDE)"
command -v cmake >/dev/null 2>&1 || fail "cmake not installed"
command -v c++ >/dev/null 2>&1 || fail "no C++ compiler"

JOBS=$(node -p "require('os').availableParallelism()")
# ggml compiles through ccache when it is installed (setup installs it): a repeated setup, or a new
# checkout elsewhere on the same machine (paths are taken relative to it), reuses earlier objects.
export CCACHE_BASEDIR="$(pwd)"
echo "setup: building whisper.cpp for this CPU ($JOBS jobs; a few minutes on 2 cores)"
cmake -S native/whisper-cpp -B "$OUT" -DCMAKE_BUILD_TYPE=Release \
  -DWHISPER_CPP_DIR="$(pwd)/$SOURCES" -DNODE_INCLUDE_DIR="$NODE_INCLUDE" -DNODE_ADDON_API_DIR="$ADDON_API" \
  >"$OUT.log" 2>&1 || fail "cmake configure failed (see $OUT.log)"
cmake --build "$OUT" --target relay_whisper -j "$JOBS" >>"$OUT.log" 2>&1 || fail "compile failed (see $OUT.log)"
node -e "require('./$OUT/relay_whisper.node')" 2>>"$OUT.log" || fail "the built addon does not load (see $OUT.log)"
echo "setup: whisper.cpp built for this CPU: $OUT/relay_whisper.node"
