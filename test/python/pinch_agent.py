"""A LiveKit Agents (Python) worker with `livekit-plugins-pinch`, its entrypoint as the README shows it.

Run by test/system/pinch-python-clients.test.ts as `python pinch_agent.py start` with LIVEKIT_URL,
LIVEKIT_API_KEY and LIVEKIT_API_SECRET (the room's LiveKit server), PINCH_API_KEY (a relay key),
RELAY_BASE_URL and PINCH_TEST_AGENT_NAME (explicit dispatch only: otherwise LiveKit would also
send it into relay's own translation rooms). The README's callback prints each final as
`[type] text`; the test reads those lines from stdout.

The plugin constructs `PinchClient(api_key=...)` with no way to name the service: the harness
replaces the default `api_base_url` of `PinchClient.__init__` with relay's (pinch_clients.py).
"""

from __future__ import annotations

import os

from livekit.agents import JobContext, WorkerOptions, cli
from livekit.plugins.pinch import Translator, TranslatorOptions

from pinch_clients import point_pinch_sdk_at_relay

point_pinch_sdk_at_relay()


async def entrypoint(ctx: JobContext):
    await ctx.connect()

    translator = Translator(
        options=TranslatorOptions(
            source_language="en-US",
            target_language="es-ES",
            voice_type="clone",  # "clone" | "female" | "male"
        )
    )

    @translator.on_transcript
    def on_transcript(event):
        if event.is_final:
            print(f"[{event.type}] {event.text}", flush=True)

    await translator.start(ctx.room)
    print(f"PINCH-TEST started in {ctx.room.name}", flush=True)
    ctx.add_shutdown_callback(translator.stop)


if __name__ == "__main__":
    cli.run_app(
        WorkerOptions(
            entrypoint_fnc=entrypoint,
            agent_name=os.environ["PINCH_TEST_AGENT_NAME"],
            # The worker reports the machine's CPU use as its load, and LiveKit offers no job to a
            # worker above its threshold: on a machine other tests keep busy none would come.
            load_fnc=lambda *_: 0.0,
            # No warm spare processes: the test's job is the only one.
            num_idle_processes=0,
            # A job process imports the plugin (and numpy, av): seconds on a busy machine.
            initialize_process_timeout=300.0,
            # The worker's health server on a free port, on loopback.
            host="127.0.0.1",
            port=0,
        )
    )
