"""Pinch's own Python clients, run as their READMEs show, against relay.

Run by test/system/pinch-python-clients.test.ts with the virtual environment
scripts/setup-python-clients.sh makes (pinned in test/python/requirements.txt). Each subcommand
runs one client's documented use and prints one line, `RESULT {json}`, with what it saw; the
TypeScript test judges it. Environment: PINCH_API_KEY (the key, as the clients read it) and
RELAY_BASE_URL (relay's HTTP base URL).

The clients' code is never edited. The one substitution: `pipecat-plugins-pinch` and
`livekit-plugins-pinch` construct `PinchClient(api_key=...)` with no way to name the service, so
`point_pinch_sdk_at_relay()` replaces the default value of `PinchClient.__init__`'s
`api_base_url` parameter (`https://api.startpinch.com`) with relay's URL before they run.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import wave

RELAY = os.environ.get("RELAY_BASE_URL", "")


def result(**fields: object) -> None:
    print("RESULT " + json.dumps(fields), flush=True)


def point_pinch_sdk_at_relay() -> None:
    """The default `api_base_url` of pinch-sdk's `PinchClient.__init__`, replaced by relay's URL."""
    from pinch.client import PinchClient

    defaults = list(PinchClient.__init__.__defaults__ or ())
    # __init__(self, api_key=None, api_base_url="https://api.startpinch.com", timeout_s=30.0)
    assert defaults[1] == "https://api.startpinch.com", defaults
    defaults[1] = RELAY
    PinchClient.__init__.__defaults__ = tuple(defaults)


def read_pcm16(path: str) -> tuple[int, bytes]:
    with wave.open(path, "rb") as wav:
        assert wav.getnchannels() == 1 and wav.getsampwidth() == 2, path
        return wav.getframerate(), wav.readframes(wav.getnframes())


def seconds_of(pcm: bytes, rate: int) -> float:
    return len(pcm) / 2 / rate


def loud_seconds(pcm: bytes, rate: int) -> float:
    """Seconds of 10 ms windows above -40 dBFS (speech, not silence or comfort noise)."""
    import array

    samples = array.array("h", pcm)
    window = rate // 100
    loud = 0
    for start in range(0, len(samples) - window + 1, window):
        chunk = samples[start : start + window]
        if sum(s * s for s in chunk) / window > (32768 * 0.01) ** 2:
            loud += 1
    return loud / 100


# ---- pinch-sdk ----


async def sdk_file(input_wav: str, output_wav: str, transcript: str) -> None:
    """`PinchClient.translate_file`, as pinch-sdk's README shows it."""
    from pinch import PinchClient

    client = PinchClient(api_key=os.environ["PINCH_API_KEY"], api_base_url=RELAY)
    started = time.monotonic()
    translated = await client.translate_file(
        input_wav_path=input_wav,
        output_wav_path=output_wav,
        transcript_path=transcript,
        source_language="en-US",
        target_language="es-ES",
    )
    rate, pcm = read_pcm16(output_wav)
    result(
        original=translated.original_transcript,
        translated=translated.translated_transcript,
        output_rate=rate,
        output_seconds=seconds_of(pcm, rate),
        output_loud_seconds=loud_seconds(pcm, rate),
        took_seconds=time.monotonic() - started,
    )


async def sdk_stream(input_wav: str) -> None:
    """`create_session`, `connect_stream`, `send_pcm16` at real time and the stream's events."""
    from pinch import PinchClient, SessionParams

    client = PinchClient(api_key=os.environ["PINCH_API_KEY"], api_base_url=RELAY)
    session = client.create_session(
        SessionParams(source_language="en-US", target_language="es-ES", voice_type="female")
    )
    stream = await client.connect_stream(session)
    rate, pcm = read_pcm16(input_wav)
    seen: dict[str, object] = {"types": [], "finals": [], "audio": b"", "rates": set(), "errors": []}

    async def consume() -> None:
        async for event in stream.events():
            if event.type not in seen["types"]:
                seen["types"].append(event.type)
            if event.type == "transcript" and event.is_final:
                seen["finals"].append({"kind": event.kind, "text": event.text, "raw": event.raw})
            elif event.type == "audio":
                seen["audio"] += event.pcm16_bytes
                seen["rates"].add(event.sample_rate)
            elif event.type == "error":
                seen["errors"].append(event.message)

    consuming = asyncio.create_task(consume())
    frame = rate // 50 * 2  # 20 ms of PCM16
    padded = pcm + b"\0" * rate * 2  # a second of silence ends the utterance
    started = time.monotonic()
    for i, offset in enumerate(range(0, len(padded), frame)):
        await stream.send_pcm16(padded[offset : offset + frame], sample_rate=rate)
        await asyncio.sleep(max(0.0, started + (i + 1) * 0.02 - time.monotonic()))

    def translated_finals() -> int:
        return sum(1 for final in seen["finals"] if final["kind"] == "translated")

    deadline = time.monotonic() + 240
    audio_rate = 48000
    while time.monotonic() < deadline:
        audio_rate = next(iter(seen["rates"]), 48000)
        if translated_finals() > 0 and loud_seconds(seen["audio"], audio_rate) > 0.5:
            break
        await asyncio.sleep(0.2)
    await stream.aclose()
    await asyncio.wait_for(consuming, 120)
    result(
        room_name=session.room_name,
        types=seen["types"],
        finals=seen["finals"],
        audio_rates=sorted(seen["rates"]),
        audio_loud_seconds=loud_seconds(seen["audio"], audio_rate),
        errors=seen["errors"],
    )


def sdk_wrong_key() -> None:
    from pinch import PinchClient, SessionParams
    from pinch.errors import PinchError

    client = PinchClient(api_key="not-a-relay-key", api_base_url=RELAY)
    try:
        client.create_session(SessionParams())
    except PinchError as error:
        result(error=type(error).__name__, message=str(error))
        return
    result(error=None)


# ---- pipecat-plugins-pinch ----


async def pipecat_plugin(input_wav: str) -> None:
    """A Pipecat pipeline: a recording in, `PinchTranslatorService`, what comes out captured."""
    point_pinch_sdk_at_relay()
    from pipecat.frames.frames import (
        EndFrame,
        ErrorFrame,
        InputAudioRawFrame,
        OutputAudioRawFrame,
        TranscriptionFrame,
    )
    from pipecat.pipeline.pipeline import Pipeline
    from pipecat.pipeline.runner import PipelineRunner
    from pipecat.pipeline.task import PipelineParams, PipelineTask
    from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
    from pipecat.plugins.pinch import PinchTranslatorService, TranslatorOptions

    rate, pcm = read_pcm16(input_wav)
    out_rate = 24000
    captured: dict[str, list] = {"audio": [], "transcripts": [], "errors": []}

    class Capture(FrameProcessor):
        async def process_frame(self, frame, direction: FrameDirection) -> None:
            await super().process_frame(frame, direction)
            if isinstance(frame, OutputAudioRawFrame):
                captured["audio"].append(frame.audio)
            elif isinstance(frame, TranscriptionFrame):
                captured["transcripts"].append(
                    {"user_id": frame.user_id, "text": frame.text, "language": str(frame.language)}
                )
            elif isinstance(frame, ErrorFrame):
                captured["errors"].append(frame.error)
            await self.push_frame(frame, direction)

    translator = PinchTranslatorService(
        options=TranslatorOptions(
            source_language="en-US", target_language="es-ES", voice_type="female"
        ),
        api_key=os.environ["PINCH_API_KEY"],
    )
    task = PipelineTask(
        Pipeline([translator, Capture()]),
        params=PipelineParams(audio_in_sample_rate=rate, audio_out_sample_rate=out_rate),
    )

    def translated() -> list:
        return [t for t in captured["transcripts"] if t["user_id"] == ""]

    async def feed() -> None:
        # Until the translator is in its room (its start() creates the session and joins).
        while translator._audio_source is None:  # noqa: SLF001 (read only: when to start talking)
            await asyncio.sleep(0.1)
        frame = rate // 50 * 2
        padded = pcm + b"\0" * rate * 2
        started = time.monotonic()
        for i, offset in enumerate(range(0, len(padded), frame)):
            await task.queue_frame(
                InputAudioRawFrame(audio=padded[offset : offset + frame], sample_rate=rate, num_channels=1)
            )
            await asyncio.sleep(max(0.0, started + (i + 1) * 0.02 - time.monotonic()))
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            if translated() and loud_seconds(b"".join(captured["audio"]), out_rate) > 0.5:
                break
            await asyncio.sleep(0.2)
        await task.queue_frame(EndFrame())

    feeding = asyncio.create_task(feed())
    await PipelineRunner(handle_sigint=False).run(task)
    await feeding
    audio = b"".join(captured["audio"])
    result(
        transcripts=captured["transcripts"],
        audio_loud_seconds=loud_seconds(audio, out_rate),
        errors=captured["errors"],
    )


def main() -> None:
    command, *args = sys.argv[1:]
    if command == "sdk-file":
        asyncio.run(sdk_file(*args))
    elif command == "sdk-stream":
        asyncio.run(sdk_stream(*args))
    elif command == "sdk-wrong-key":
        sdk_wrong_key()
    elif command == "pipecat-plugin":
        asyncio.run(pipecat_plugin(*args))
    else:
        raise SystemExit(f"unknown command {command}")


if __name__ == "__main__":
    main()
