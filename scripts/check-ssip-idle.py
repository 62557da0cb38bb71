#!/usr/bin/env python3
"""Holds many idle SSIP connections to speakd and checks that it still speaks and stays small.

Usage: check-ssip-idle.py SSIP_SOCKET CONNECTIONS SPEAKD_PID

Opens CONNECTIONS connections, each asking for its client id and then idling; while they are
all open, one more client speaks a message and waits for its END (702). Prints one JSON object:
`opened`, `rssBeforeKiB` and `rssAfterKiB` (speakd's VmRSS before the connections and with all of
them open), `ended` (the last client's final notification line). Exits 1 if a step failed.
"""
import json
import resource
import socket
import sys
import time


def rss(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def read_reply(sock, buffer):
    lines = []
    while True:
        while b"\r\n" not in buffer[0]:
            chunk = sock.recv(65536)
            if not chunk:
                raise EOFError("connection closed")
            buffer[0] += chunk
        line, buffer[0] = buffer[0].split(b"\r\n", 1)
        lines.append(line.decode())
        if len(lines[-1]) >= 4 and lines[-1][3] == " ":
            return lines


def main() -> int:
    path, count, pid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, count + 256)), hard))
    before = rss(pid)
    idle = []
    for _ in range(count):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(30)
        for _ in range(500):
            try:
                sock.connect(path)
                break
            except BlockingIOError:  # the listen backlog is full for a moment
                time.sleep(0.01)
        sock.sendall(b"HISTORY GET CLIENT_ID\r\n")
        idle.append(sock)
    for sock in idle:
        reply = read_reply(sock, [b""])
        if reply[-1] != "245 OK CLIENT ID SENT":
            print(json.dumps({"error": f"idle client got {reply}"}))
            return 1
    time.sleep(0.5)
    after = rss(pid)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(30)
    sock.connect(path)
    buffer = [b""]
    for line in (b"SET SELF NOTIFICATION END on", b"SPEAK", b"Still speaking with all of them open.\r\n."):
        sock.sendall(line + b"\r\n")
        read_reply(sock, buffer)
    ended = read_reply(sock, buffer)[-1]
    print(json.dumps({"opened": len(idle), "rssBeforeKiB": before, "rssAfterKiB": after, "ended": ended}))
    for sock in idle:
        sock.close()
    return 0 if ended == "702 END" else 1


if __name__ == "__main__":
    sys.exit(main())
