"""WhisperLive's server for `npm run bench:peer` (scripts/bench-peer.ts runs it in the `whisperlive`
environment of scripts/setup-python-clients.sh): its faster_whisper backend on the CPU, serving one
local CTranslate2 model directory to every client (the package has no command of its own; its
repository's run_server.py makes the same call).

  python scripts/bench-peer-whisperlive.py MODEL_DIR PORT
"""

import logging
import sys

from whisper_live.server import TranscriptionServer

logging.basicConfig(level=logging.WARNING)
model, port = sys.argv[1], int(sys.argv[2])
# single_model: one copy of the weights for every connection, as relay's engines hold theirs.
TranscriptionServer().run(
    "127.0.0.1",
    port=port,
    backend="faster_whisper",
    faster_whisper_custom_model_path=model,
    single_model=True,
)
