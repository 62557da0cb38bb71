#!/usr/bin/env python3
"""Checks a running speakd's Wyoming front (--wyoming) with Home Assistant's own client library.

Usage: check-wyoming.py --wyoming-port PORT --http-port PORT --token-file PATH [--satellite]
                        [--voice NAME] [--piper-voice NAME]

Each check prints one line, `ok NAME` or `FAIL NAME: why`; the exit status is 0 when all passed.
The PCM of a synthesis is compared byte for byte with what `POST /v1/speech` renders for the
same text and voice (no chime: the front renders at the hall's loudness, as /v1/speech does).
"""

import argparse
import asyncio
import io
import json
import math
import socket
import struct
import sys
import time
import urllib.request
import wave

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.event import Event
from wyoming.info import Describe, Info
from wyoming.ping import Ping, Pong
from wyoming.satellite import RunSatellite
from wyoming.snd import Played
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeStopped,
    SynthesizeVoice,
)

failures = []


def report(name, ok, why=""):
    print(("ok " + name) if ok else ("FAIL " + name + ": " + why), flush=True)
    if not ok:
        failures.append(name)


def http_speech(args, body):
    """The PCM of POST /v1/speech for `body`."""
    with open(args.token_file) as token_file:
        token = token_file.read().strip()
    request = urllib.request.Request(
        f"http://127.0.0.1:{args.http_port}/v1/speech",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer " + token},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        with wave.open(io.BytesIO(response.read())) as wav:
            return wav.readframes(wav.getnframes())


def http_get(args, path):
    with open(args.token_file) as token_file:
        token = token_file.read().strip()
    request = urllib.request.Request(
        f"http://127.0.0.1:{args.http_port}{path}", headers={"Authorization": "Bearer " + token})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


async def read_until(client, types, timeout=60):
    """Events up to and including the first of `types`."""
    events = []
    while True:
        event = await asyncio.wait_for(client.read_event(), timeout)
        if event is None:
            raise ConnectionError("closed after " + str([e.type for e in events]))
        events.append(event)
        if event.type in types:
            return events


def pcm(events):
    return b"".join(AudioChunk.from_event(e).audio for e in events if AudioChunk.is_type(e.type))


async def describe(args):
    async with AsyncTcpClient("127.0.0.1", args.wyoming_port) as client:
        await client.write_event(Describe().event())
        info = Info.from_event((await read_until(client, {"info"}))[-1])
    report("describe has one tts program", len(info.tts) == 1, str(info.tts)[:200])
    if not info.tts:
        return info
    program = info.tts[0]
    names = {voice.name for voice in program.voices}
    report("describe lists espeak-ng's voices", args.voice in names, f"{args.voice} not in {sorted(names)[:10]}")
    if args.piper_voice:
        report("describe lists Piper's voices", args.piper_voice in names, f"{args.piper_voice} not listed")
    report("voices are installed with languages", all(v.installed and v.languages for v in program.voices))
    report("streaming is offered", program.supports_synthesize_streaming)
    return info


async def one_shot(args, voice, text):
    async with AsyncTcpClient("127.0.0.1", args.wyoming_port) as client:
        await client.write_event(Synthesize(text=text, voice=SynthesizeVoice(name=voice)).event())
        events = await read_until(client, {"audio-stop", "error"})
    types = [e.type for e in events]
    report(f"synthesize ({voice}) is one start, chunks, one stop",
           types[0] == "audio-start" and types[-1] == "audio-stop" and types.count("audio-start") == 1
           and set(types[1:-1]) == {"audio-chunk"}, str(types[:5]))
    start = AudioStart.from_event(events[0]) if events[0].type == "audio-start" else None
    report(f"synthesize ({voice}) is 16-bit", start is not None and start.width == 2, str(events[0]))
    reference = http_speech(args, {"text": text, "voice": voice, "chime": None, "chimeAfter": None})
    audio = pcm(events)
    report(f"synthesize ({voice}) PCM matches POST /v1/speech", audio == reference and len(audio) > 0,
           f"{len(audio)} bytes against {len(reference)}")


async def streamed(args):
    first, second = "The museum closes in ten minutes.", "Please make your way to the exit."
    async with AsyncTcpClient("127.0.0.1", args.wyoming_port) as client:
        await client.write_event(SynthesizeStart(voice=SynthesizeVoice(name=args.voice)).event())
        await client.write_event(SynthesizeChunk(text="The museum closes in ten min").event())
        await client.write_event(SynthesizeChunk(text="utes. Please make your way").event())
        # The first sentence's audio comes before the stream is stopped.
        before_stop = await read_until(client, {"audio-stop", "error"}, timeout=30)
        await client.write_event(SynthesizeChunk(text=" to the exit.").event())
        await client.write_event(Synthesize(text=first + " " + second).event())  # compatibility: ignored
        await client.write_event(SynthesizeStop().event())
        after_stop = await read_until(client, {"synthesize-stopped", "error"})
    types = [e.type for e in before_stop + after_stop]
    report("streamed: first audio before synthesize-stop", before_stop[0].type == "audio-start",
           str([e.type for e in before_stop][:3]))
    report("streamed: two sentences, each once, then synthesize-stopped",
           types.count("audio-start") == 2 and types.count("audio-stop") == 2 and types[-1] == "synthesize-stopped"
           and "error" not in types, str([t for t in types if t != "audio-chunk"]))
    starts = {json.dumps(e.data, sort_keys=True) for e in before_stop + after_stop if e.type == "audio-start"}
    report("streamed: every audio-start has one format", len(starts) == 1, str(starts))
    reference = b"".join(http_speech(args, {"text": t, "voice": args.voice, "chime": None, "chimeAfter": None})
                         for t in (first, second))
    audio = pcm(before_stop + after_stop)
    report("streamed: PCM is each sentence's POST /v1/speech", audio == reference,
           f"{len(audio)} bytes against {len(reference)}")


async def refused(args):
    async with AsyncTcpClient("127.0.0.1", args.wyoming_port) as client:
        await client.write_event(Synthesize(text="Hello", voice=SynthesizeVoice(name="no-such-voice")).event())
        event = (await read_until(client, {"error", "audio-stop"}))[-1]
        error = Error.from_event(event) if event.type == "error" else None
        report("a bad voice is an error with the HTTP code", error is not None and error.code == "notFound",
               str(event))
        await client.write_event(Synthesize(text="   ").event())
        event = (await read_until(client, {"error", "audio-stop"}))[-1]
        report("an empty text is an error", event.type == "error", str(event))
        await client.write_event(Event(type="no-such-event"))
        event = (await read_until(client, {"error"}))[-1]
        report("an unknown event is an error", event.type == "error", str(event))
        await client.write_event(AudioChunk(rate=22050, width=2, channels=1, audio=b"\0\0").event())
        event = (await read_until(client, {"error"}))[-1]
        report("a chunk without audio-start is an error", event.type == "error", str(event))


def raw_exchange(args, data):
    """Sends raw bytes; what comes back until the server closes (or 10 s pass)."""
    received = b""
    with socket.create_connection(("127.0.0.1", args.wyoming_port), timeout=10) as connection:
        try:
            connection.sendall(data)
        except OSError:
            pass  # closed while sending: the server stopped reading
        try:
            while True:
                piece = connection.recv(65536)
                if not piece:
                    return received, True
                received += piece
        except socket.timeout:
            return received, False
        except OSError:
            return received, True


def oversized(args):
    answer, closed = raw_exchange(args, b'{"type":"audio-chunk","payload_length":1000000000}\n')
    report("a 1 GB payload_length is an error and a close", closed and b'"error"' in answer, repr(answer[:200]))
    answer, closed = raw_exchange(args, b"{" * (10 << 20))
    report("a 10 MB header line is an error or a close", closed or b'"error"' in answer, repr(answer[:200]))


async def satellite(args, info):
    report("describe has a satellite and a snd program", info.satellite is not None and len(info.snd) == 1,
           f"{info.satellite} {info.snd}")
    async with AsyncTcpClient("127.0.0.1", args.wyoming_port) as client:
        sent = time.monotonic()
        await client.write_event(Ping(text="hello").event())
        event = (await read_until(client, {"pong"}, timeout=5))[-1]
        report("ping is answered with pong within 5 s", Pong.is_type(event.type) and time.monotonic() - sent < 5)
        await client.write_event(RunSatellite().event())
        rate, seconds = 22050, 1.0
        tone = b"".join(struct.pack("<h", int(8000 * math.sin(2 * math.pi * 440 * i / rate)))
                        for i in range(int(rate * seconds)))
        await client.write_event(AudioStart(rate=rate, width=2, channels=1).event())
        for offset in range(0, len(tone), 2048):
            await client.write_event(AudioChunk(rate=rate, width=2, channels=1, audio=tone[offset:offset + 2048]).event())
        stopped = time.monotonic()
        await client.write_event(AudioStop().event())
        events = await read_until(client, {"played", "error"}, timeout=60)
        waited = time.monotonic() - stopped
        report("an announce is answered with played after it was heard",
               Played.is_type(events[-1].type) and waited >= seconds * 0.8, f"{[e.type for e in events]} {waited:.2f} s")
    entries = http_get(args, "/v1/audit").get("entries", [])
    report("the announcement is in the audit log from the front wyoming",
           any(entry.get("front") == "wyoming" and entry.get("reason") == "completed" for entry in entries),
           str(entries)[:300])


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--wyoming-port", type=int, required=True)
    parser.add_argument("--http-port", type=int, required=True)
    parser.add_argument("--token-file", required=True)
    parser.add_argument("--voice", default="gmw/en")
    parser.add_argument("--piper-voice")
    parser.add_argument("--satellite", action="store_true")
    args = parser.parse_args()
    info = await describe(args)
    await one_shot(args, args.voice, "Hello there. The doors open at nine.")
    if args.piper_voice:
        await one_shot(args, args.piper_voice, "Hello there.")
    await streamed(args)
    await refused(args)
    oversized(args)
    # The daemon survived all of that.
    info = await describe(args)
    if args.satellite:
        await satellite(args, info)
    print("passed" if not failures else f"{len(failures)} failed", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
