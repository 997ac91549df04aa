#!/bin/sh
# Builds LiveKit's server (livekit/livekit, Go module github.com/livekit/livekit-server) at a pinned
# release tag from the Go module proxy, once per machine: the binary is cached in
# ${RELAY_CACHE_DIR:-~/.cache/relay}/livekit/<tag>/livekit-server and later runs reuse it (Go's own
# module and build caches make a rebuild quick too). Prints the binary's path.
#
# Pinned to a release tag: untagged commits carry `replace … => ../protocol` and do not build from
# the proxy, and tags from v1.13.6 on replace pion's WebRTC modules with LiveKit's forks. v1.13.5's
# go.mod has no replace lines (checked 2026-12-01 on proxy.golang.org).
set -eu
TAG="${RELAY_LIVEKIT_TAG:-v1.13.5}"
DIR="${RELAY_CACHE_DIR:-$HOME/.cache/relay}/livekit/$TAG"
BINARY="$DIR/livekit-server"

if [ -x "$BINARY" ]; then
  echo "$BINARY"
  exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  echo "install-livekit: no Go toolchain on PATH: LiveKit's server $TAG is built with Go 1.26 or newer (https://go.dev/dl/)" >&2
  exit 1
fi
mkdir -p "$DIR"
echo "install-livekit: building LiveKit server $TAG with $(go version | cut -d' ' -f3) (a few minutes, once)" >&2
# The module's own go.mod decides the toolchain; GOFLAGS from the caller's project would not apply.
GOBIN="$DIR.partial" GOFLAGS=-mod=mod go install "github.com/livekit/livekit-server/cmd/server@$TAG" >&2
mv "$DIR.partial/server" "$BINARY"
rmdir "$DIR.partial"
echo "$BINARY"
