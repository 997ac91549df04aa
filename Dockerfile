# syntax=docker/dockerfile:1
# relay with its embedded engines (Silero VAD, PocketSphinx, Apertium, eSpeak NG, whisper.cpp built
# in). Models pulled with `relay models pull` go to /data/models (the volume).
#
#   docker build -t relay .
#   docker run -p 8080:8080 -e API_KEYS=my-key -v relay-data:/data relay

FROM node:20-bookworm-slim AS build
WORKDIR /app
# The toolchain whisper.cpp's addon is compiled with (for the build machine's CPU features).
RUN apt-get update \
  && apt-get install -y --no-install-recommends build-essential cmake python3 \
  && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json ./
# The SDK is a workspace of the project: npm ci links it and builds it (the root's prepare script).
COPY packages/client ./packages/client
# onnxruntime-node would download GPU providers at install; its CPU build ships in the package.
RUN ONNXRUNTIME_NODE_INSTALL=skip npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY src ./src
COPY native ./native
COPY scripts/build-whisper.sh ./scripts/
# The addon build is never fatal (the prebuilt binding serves without it); keep only the addon.
RUN sh scripts/build-whisper.sh \
  && mkdir -p /out/whisper \
  && { cp native/whisper-cpp/build/relay_whisper.node /out/whisper/ 2>/dev/null || true; } \
  && npm run build \
  && npm prune --omit=dev

FROM node:20-bookworm-slim
# The embedded engines' Debian packages, and ffmpeg for dubbing.
RUN apt-get update \
  && apt-get install -y --no-install-recommends \
    libpocketsphinx3 pocketsphinx-en-us apertium apertium-eng-spa apertium-fr-es apertium-es-pt \
    apertium-spa-ita cg3 espeak-ng ffmpeg \
  && rm -rf /var/lib/apt/lists/* \
  && mkdir /data && chown node:node /data
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
# node_modules links @relay-translate/client (the CLI and the playground use it) to its build here.
COPY --from=build /app/packages/client/package.json ./packages/client/
COPY --from=build /app/packages/client/dist ./packages/client/dist
COPY --from=build /app/dist ./dist
COPY data/check ./data/check
COPY --from=build /out/whisper ./native/whisper-cpp/build
ENV NODE_ENV=production HOST=0.0.0.0 PORT=8080 DATA_DIR=/data
USER node
VOLUME ["/data"]
EXPOSE 8080
# Ready: engines loaded, database reachable, not shutting down.
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:8080/readyz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# SIGTERM (docker stop) drains: sessions get 1001, a running dubbing job is handed back.
STOPSIGNAL SIGTERM
CMD ["node", "dist/main.js"]
