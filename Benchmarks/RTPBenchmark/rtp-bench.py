#!/usr/bin/env python3
"""RTP outputs: packet pacing jitter, the CPU an RTP output costs per minute of speech against a
local output, and drift over a long stream.

Usage (as root: it makes a network namespace):

    scripts/build-release speakd speakd-engine-worker
    Benchmarks/RTPBenchmark/rtp-bench.py [--speakd PATH] [--outputs N] [--rounds R]
        [--speech-seconds S] [--drift-minutes M] [--json PATH]

Runs one release speakd in a private network namespace with multicast on loopback (as the RTP
tests do, docs/audio.md), its default output on a private PulseAudio null sink (the local output)
and N µ-law RTP outputs (`rtp1`… on 239.255.10.1:5004, 239.255.10.2:5006…, ptime 20 ms). One announcement of about
`--speech-seconds` (60) of speech is played, taking turns in each of `--rounds` (2) rounds:

- idle: nothing plays for as long as the announcement lasts (the daemon's own baseline);
- local: to the default output (PulseAudio's null sink);
- rtp x1: to `rtp1` alone;
- rtp xN: to `rtp1`…`rtpN` as one announcement (zones, rendered once).

Each phase reads the daemon's CPU time (user + system, all its threads, from /proc/PID/stat)
before and after; a phase's cost is its CPU less idle's over the same time, per minute of speech.
The announcement is played once before the rounds so every phase takes it from the render cache:
the engine workers (other processes) render nothing while it is measured.

Each RTP phase captures its packets (scripts/rtp-capture, kernel receive times, in the namespace):
the jitter is how late each packet arrived against the fitted schedule (first arrival + n x ptime),
p50/p99/max.

Then a stream of `--drift-minutes` (10; 0 leaves it out): one announcement of that length to
`rtp1`, captured whole. At its end it reports how far the packets' arrival had moved from their RTP
timestamps (last against first, and the fitted rate in ppm), and how far the sender's own wall
clock in its RTCP sender reports had moved from their RTP timestamps.

Prints every figure; `--json PATH` writes Benchmarks/results/rtp.json's table (scripts/render-performance).
"""

import argparse
import http.client
import json
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import uuid

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CAPTURE = os.path.join(ROOT, "scripts", "rtp-capture")
SENTENCE = "The train to Porto leaves from platform four. Please stand clear of the doors. "
PORT = 5004
PTIME = 0.020
CLOCK = 8000
TICKS = os.sysconf("SC_CLK_TCK")


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


def request(socket_path, method, path, body=None, timeout=60):
    connection = UnixConnection(socket_path, timeout)
    headers = {"Content-Type": "application/json"} if body is not None else {}
    connection.request(method, path, json.dumps(body) if body is not None else None, headers)
    response = connection.getresponse()
    data = response.read()
    connection.close()
    return response.status, data


def run(arguments, **options):
    subprocess.run(arguments, check=True, **options)


class Namespace:
    """A private network namespace whose loopback carries multicast."""

    def __init__(self):
        self.name = f"speakd-rtp-bench-{os.getpid()}"
        run(["ip", "netns", "add", self.name])
        for command in (["link", "set", "lo", "up"], ["link", "set", "lo", "multicast", "on"],
                        ["route", "add", "224.0.0.0/4", "dev", "lo"]):
            run(["ip", "-n", self.name] + command)

    def remove(self):
        subprocess.run(["ip", "netns", "del", self.name], check=False)


def start_pulse(directory):
    """A private PulseAudio server with the null sink `hall` (22,050 Hz mono); its environment."""
    for name in ("runtime", "state", "home"):
        os.makedirs(os.path.join(directory, name), mode=0o700)
    config = os.path.join(directory, "client.conf")
    with open(config, "w") as file:
        file.write("autospawn = no\nenable-shm = no\nenable-memfd = no\n")
    socket_path = os.path.join(directory, "native")
    environment = {
        "PULSE_SERVER": f"unix:{socket_path}", "PULSE_CLIENTCONFIG": config,
        "PULSE_RUNTIME_PATH": os.path.join(directory, "runtime"),
        "PULSE_STATE_PATH": os.path.join(directory, "state"), "HOME": os.path.join(directory, "home"),
    }
    server_environment = dict(os.environ, **environment)
    server_environment.pop("PULSE_SERVER")
    process = subprocess.Popen(
        ["pulseaudio", "-n", "--daemonize=no", "--exit-idle-time=-1", "--disallow-exit", "--use-pid-file=no",
         "--log-target=stderr", "-L", f"module-native-protocol-unix socket={socket_path} auth-anonymous=1",
         "-L", "module-null-sink sink_name=hall rate=22050 channels=1", "-L", "module-always-sink"],
        env=server_environment, stdout=subprocess.DEVNULL, stderr=open(os.path.join(directory, "pulse.log"), "w"),
        start_new_session=True)
    deadline = time.monotonic() + 15
    while not os.path.exists(socket_path):
        if process.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"pulseaudio did not start: see {directory}/pulse.log")
        time.sleep(0.05)
    time.sleep(0.3)
    return process, environment


def start_speakd(speakd, namespace, directory, outputs, pulse_environment):
    socket_path = os.path.join(directory, "speakd.sock")
    os.makedirs(os.path.join(directory, "runtime"))
    arguments = ["ip", "netns", "exec", namespace.name, speakd, "--socket", socket_path, "--http", "127.0.0.1:18765",
                 "--audio", "pulse:hall", "--log-level", "info"]
    for index in range(1, outputs + 1):
        arguments += ["--output", f"rtp{index}=rtp://{group(index)}:{port(index)}?codec=pcmu&ptime=20&ttl=1"]
    environment = dict(os.environ, **pulse_environment, RUNTIME_DIRECTORY=os.path.join(directory, "runtime"))
    environment.pop("NOTIFY_SOCKET", None)
    process = subprocess.Popen(arguments, env=environment, stdout=subprocess.DEVNULL,
                               stderr=open(os.path.join(directory, "speakd.log"), "w"), start_new_session=True)
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None:
            sys.exit(f"speakd exited with {process.returncode}: see {directory}/speakd.log")
        try:
            if request(socket_path, "GET", "/healthz", timeout=5)[0] == 200:
                break
        except OSError:
            pass
        if time.monotonic() > deadline:
            sys.exit(f"speakd did not answer /healthz: see {directory}/speakd.log")
        time.sleep(0.1)
    # `ip netns exec` execs speakd in place, so the process is the daemon itself.
    return process, socket_path


def group(index):
    return f"239.255.10.{index}"


def port(index):
    """Each output its own port (and RTCP the next): a socket bound to a port receives every group
    joined on it, so a capture tells the streams apart by port."""
    return PORT + 2 * (index - 1)


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as file:
        fields = file.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def load_average():
    with open("/proc/loadavg") as file:
        return float(file.read().split()[0])


def start_capture(namespace, index, directory, timeout):
    ready = os.path.join(directory, f"capture{index}-{uuid.uuid4().hex[:6]}.ready")
    output = ready.replace(".ready", ".json")
    process = subprocess.Popen(
        ["ip", "netns", "exec", namespace.name, sys.executable, CAPTURE, group(index), str(port(index)),
         "--timeout", str(timeout), "--ready", ready],
        stdout=open(output, "w"), stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 10
    while not os.path.exists(ready) and time.monotonic() < deadline:
        time.sleep(0.02)
    return process, output


def finish_capture(capture, timeout=30):
    process, output = capture
    process.wait(timeout=timeout)
    with open(output) as file:
        return json.load(file)


def announce(socket_path, text, output, timeout):
    status, body = request(socket_path, "POST", "/v1/announcements?wait=true", {"text": text, "output": output},
                           timeout=timeout)
    event = json.loads(body) if status == 200 else None
    if not event or event.get("success") is not True:
        sys.exit(f"the announcement to {output} did not complete: {status} {body[:300]!r}")


def speech_seconds(socket_path, text):
    """How long the announcement plays: its render as the output plays it (POST /v1/speech)."""
    status, wav = request(socket_path, "POST", "/v1/speech", {"text": text}, timeout=120)
    if status != 200 or wav[:4] != b"RIFF":
        sys.exit(f"POST /v1/speech answered {status}")
    offset = 12
    rate = channels = bits = None
    while offset + 8 <= len(wav):
        kind, size = wav[offset:offset + 4], struct.unpack("<I", wav[offset + 4:offset + 8])[0]
        if kind == b"fmt ":
            channels, rate, _, _, bits = struct.unpack("<HIIHH", wav[offset + 10:offset + 24])
        if kind == b"data":
            return min(size, len(wav) - offset - 8) / (rate * channels * bits // 8)
        offset += 8 + size + (size & 1)
    sys.exit("POST /v1/speech: no data in the WAV")


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def drift(report):
    """How far arrival moved from the RTP timestamps over the stream, and the sender reports' wall clock."""
    packets = report["packets"]
    first, last = packets[0], packets[-1]
    media = ((last["ts"] - first["ts"]) & 0xFFFFFFFF) / CLOCK
    # Each end as the median of its 50 packets' offsets, so one packet's jitter is not the drift.
    def offsets(chunk):
        return statistics.median(
            (p["at"] - first["at"]) - ((p["ts"] - first["ts"]) & 0xFFFFFFFF) / CLOCK for p in chunk)
    end_offset = offsets(packets[-50:]) - offsets(packets[:50])
    gaps = sum(1 for a, b in zip(packets, packets[1:]) if (b["seq"] - a["seq"]) & 0xFFFF != 1)
    reports = report.get("senderReports", [])
    wall = None
    if len(reports) >= 2:
        a, b = reports[0], reports[-1]
        wall = (b["wall"] - a["wall"]) - ((b["ts"] - a["ts"]) & 0xFFFFFFFF) / CLOCK
    return {
        "packets": len(packets), "seconds": media, "gaps": gaps,
        "arrivalMinusTimestampsMs": 1000 * end_offset,
        "ratePpm": 1e6 * (report["spacingMs"] / (PTIME * 1000) - 1) if report.get("spacingMs") else None,
        "senderReports": len(reports), "senderWallMinusTimestampsMs": None if wall is None else 1000 * wall,
        "jitterMs": report["jitterMs"],
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--speakd", help="the speakd to run (default: scripts/build-release's)")
    parser.add_argument("--outputs", type=int, default=3, help="RTP outputs for the several-outputs phase")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--speech-seconds", type=float, default=60)
    parser.add_argument("--drift-minutes", type=float, default=10)
    parser.add_argument("--json", help="write the results table here (Benchmarks/results/rtp.json)")
    arguments = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("rtp-bench needs root: it makes a network namespace")
    if arguments.outputs < 2 or arguments.rounds < 1:
        sys.exit("--outputs is at least 2, --rounds at least 1")
    speakd = arguments.speakd or os.path.join(
        subprocess.run([os.path.join(ROOT, "scripts", "build-release"), "--show-bin-path"], check=True,
                       capture_output=True, text=True).stdout.strip(), "speakd")
    arguments.speakd_path = os.path.relpath(speakd, ROOT) if speakd.startswith(ROOT) else speakd
    if not os.access(speakd, os.X_OK):
        sys.exit(f"no speakd at {speakd}: scripts/build-release speakd speakd-engine-worker")

    directory = tempfile.mkdtemp(prefix="speakd-rtp-bench-")
    namespace = Namespace()
    pulse = daemon = None
    loads = [load_average()]
    try:
        pulse, pulse_environment = start_pulse(os.path.join(directory, "pulse"))
        daemon, socket_path = start_speakd(speakd, namespace, directory, arguments.outputs, pulse_environment)
        per_sentence = speech_seconds(socket_path, SENTENCE.strip())
        text = (SENTENCE * max(1, round(arguments.speech_seconds / per_sentence))).strip()
        seconds = speech_seconds(socket_path, text)
        print(f"speakd {speakd}, pid {daemon.pid}; the announcement plays {seconds:.2f} s; "
              f"{arguments.rounds} rounds; load average {loads[0]:.2f}", flush=True)
        announce(socket_path, text, "default", timeout=seconds + 60)  # into the render cache

        zones = [f"rtp{index}" for index in range(1, arguments.outputs + 1)]
        phases = ["idle", "local", "rtp x1", f"rtp x{arguments.outputs}"]
        cpu = {phase: [] for phase in phases}
        jitter = {"rtp x1": [], f"rtp x{arguments.outputs}": []}
        for round_index in range(arguments.rounds):
            for phase in phases:
                captures = []
                if phase == "rtp x1":
                    captures = [start_capture(namespace, 1, directory, seconds + 60)]
                elif phase.startswith("rtp"):
                    captures = [start_capture(namespace, i, directory, seconds + 60)
                                for i in range(1, arguments.outputs + 1)]
                time.sleep(0.5)
                before, started = cpu_seconds(daemon.pid), time.monotonic()
                if phase == "idle":
                    time.sleep(seconds)
                else:
                    announce(socket_path, text,
                             {"local": "default", "rtp x1": "rtp1"}.get(phase, zones), timeout=seconds + 60)
                used, wall = cpu_seconds(daemon.pid) - before, time.monotonic() - started
                cpu[phase].append(used / wall)
                for capture in captures:
                    report = finish_capture(capture)
                    jitter[phase].append(dict(report["jitterMs"], gaps=report.get("gaps", 0)))
                    if len(report["packets"]) < seconds / PTIME * 0.9:
                        print(f"{phase}: only {len(report['packets'])} packets captured for {seconds:.1f} s")
                shown = "" if not captures else " jitter p50/p99/max " + ", ".join(
                    f"{j['p50']:.3f}/{j['p99']:.3f}/{j['max']:.3f} ms ({j['gaps']} gaps)"
                    for j in jitter[phase][-len(captures):])
                print(f"round {round_index + 1} {phase:8}: {1000 * used:7.0f} ms CPU over {wall:6.1f} s{shown}",
                      flush=True)
                loads.append(load_average())

        # Per minute of speech: the phase's CPU rate less idle's, times 60 s.
        idle = statistics.median(cpu["idle"])
        cost = {phase: [60 * (rate - idle) for rate in cpu[phase]] for phase in phases[1:]}
        several = phases[3]
        per_extra = [(b - a) / (arguments.outputs - 1) for a, b in zip(cost["rtp x1"], cost[several])]
        print(f"daemon idle: {1000 * 60 * idle:.1f} ms CPU per minute")
        for phase in phases[1:]:
            print(f"{phase:8}: {1000 * statistics.median(cost[phase]):.1f} ms CPU per minute of speech above idle "
                  f"(rounds {', '.join(f'{1000 * c:.1f}' for c in cost[phase])})")
        print(f"each RTP output after the first: {1000 * statistics.median(per_extra):.1f} ms per minute of speech")

        drifted = None
        if arguments.drift_minutes > 0:
            long_text = (SENTENCE * max(1, round(arguments.drift_minutes * 60 / per_sentence))).strip()
            long_seconds = speech_seconds(socket_path, long_text)
            print(f"drift: one announcement of {long_seconds:.1f} s to rtp1", flush=True)
            capture = start_capture(namespace, 1, directory, long_seconds + 120)
            time.sleep(0.5)
            announce(socket_path, long_text, "rtp1", timeout=long_seconds + 120)
            long_report = finish_capture(capture, timeout=120)
            drifted = drift(long_report)
            drifted["timestampGaps"] = long_report.get("gaps", 0)
            loads.append(load_average())
            print(f"drift over {drifted['seconds']:.1f} s ({drifted['packets']} packets, {drifted['gaps']} sequence "
                  f"gaps, {drifted['timestampGaps']} timestamp gaps): "
                  f"arrival − RTP timestamps at the end {drifted['arrivalMinusTimestampsMs']:+.3f} ms "
                  f"(fitted rate {drifted['ratePpm']:+.2f} ppm); sender reports' wall clock − their timestamps "
                  f"{drifted['senderWallMinusTimestampsMs']:+.3f} ms over {drifted['senderReports']} reports; "
                  f"jitter p50/p99/max {drifted['jitterMs']['p50']:.3f}/{drifted['jitterMs']['p99']:.3f}/"
                  f"{drifted['jitterMs']['max']:.3f} ms", flush=True)
        print(f"load average {min(loads):.2f}–{max(loads):.2f}")
        if arguments.json:
            write_json(arguments, seconds, cpu, cost, per_extra, jitter, drifted, loads)
    finally:
        for process in (daemon, pulse):
            if process and process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
        namespace.remove()
        shutil.rmtree(directory, ignore_errors=True)


def write_json(arguments, seconds, cpu, cost, per_extra, jitter, drifted, loads):
    def ms(values):
        low, high = round(1000 * min(values), 1), round(1000 * max(values), 1)
        return {"value": [low, high] if low != high else low, "unit": "ms"}

    def jitters(reports):
        return {"values": [[round(min(r[q] for r in reports), 2), round(max(r[q] for r in reports), 2)]
                           if round(min(r[q] for r in reports), 2) != round(max(r[q] for r in reports), 2)
                           else round(reports[0][q], 2) for q in ("p50", "p99", "max")], "unit": "ms"}

    several = f"rtp x{arguments.outputs}"
    idle = statistics.median(cpu["idle"])
    rows = [
        ["pacing jitter p50 / p99 / max, one RTP output (packet capture, kernel receive times)",
         jitters(jitter["rtp x1"]), "p99 ≤ 2 ms on an idle machine"],
        [f"the same, each of {arguments.outputs} RTP outputs playing one announcement", jitters(jitter[several]), ""],
        ["times the sender ran dry (a timestamp gap: the audio came late), one output / each of several, per run",
         {"values": [max(j["gaps"] for j in jitter["rtp x1"]), max(j["gaps"] for j in jitter[several])]}, "0"],
        ["daemon CPU per minute, idle", ms([60 * idle]), ""],
        ["daemon CPU per minute of speech above idle: local output (PulseAudio null sink)", ms(cost["local"]), ""],
        ["the same: one RTP output (µ-law, ptime 20 ms)", ms(cost["rtp x1"]), ""],
        [f"the same: {arguments.outputs} RTP outputs as one announcement", ms(cost[several]), ""],
        ["each RTP output after the first", ms(per_extra), ""],
    ]
    if drifted:
        minutes = round(drifted["seconds"] / 60, 1)
        rows += [
            [f"drift over one {minutes}-minute stream: packet arrival against RTP timestamps, at the end",
             {"value": round(drifted["arrivalMinusTimestampsMs"], 2), "unit": "ms"}, "no drift"],
            [f"the same: the sender reports' wall clock against their RTP timestamps ({drifted['senderReports']} reports)",
             {"value": round(drifted["senderWallMinusTimestampsMs"], 2), "unit": "ms"}, "no drift"],
            ["the same stream: pacing jitter p50 / p99 / max", jitters([drifted["jitterMs"]]), ""],
        ]
    data = {
        "benchmark": "Benchmarks/RTPBenchmark/rtp-bench.py",
        "measured": (
            f"{arguments.speakd_path} in a network namespace with multicast on loopback; one announcement of "
            f"{seconds:.1f} s "
            f"of speech, {arguments.rounds} rounds taking turns (idle, local, rtp x1, {several}); CPU from "
            f"/proc/PID/stat of the daemon (its engine workers render nothing: the announcement is in the render "
            f"cache); jitter from scripts/rtp-capture; load average {min(loads):.2f}–{max(loads):.2f} "
            f"on the shared 2-core machine on {time.strftime('%Y-%m-%d', time.gmtime())}"),
        "columns": ["figure", "measured", "goal"],
        "rows": rows,
        "run": {"cpuPerSecond": cpu, "jitterMs": jitter, "drift": drifted, "loadAverage": loads},
    }
    with open(arguments.json, "w") as file:
        json.dump(data, file, indent=2, ensure_ascii=False)
        file.write("\n")


if __name__ == "__main__":
    main()
