#!/usr/bin/env python3
"""Many SSIP clients at once against speakd: each sends short messages with every notification
on, and at random cancels its own, cancels everything, or disconnects (its messages then go on
without it).

Usage: check-ssip-soak.py SSIP_SOCKET CLIENTS SEED

Prints one JSON object: `queued` (the text of every message answered 225, each text unique) and
`problems` (a client that stayed connected and got other than exactly one 702 or 703 for a
message of its own, or a reply it could not parse). Exits 1 when there are problems.
"""
import json
import random
import socket
import sys
import threading
import time


class Client:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(30)
        self.sock.connect(path)
        self.buffer = b""
        self.notifications = []

    def read_reply(self):
        lines = []
        while True:
            while b"\r\n" not in self.buffer:
                chunk = self.sock.recv(65536)
                if not chunk:
                    raise EOFError("connection closed")
                self.buffer += chunk
            line, self.buffer = self.buffer.split(b"\r\n", 1)
            text = line.decode()
            lines.append(text)
            if len(text) >= 4 and text[3] == " ":
                return lines
            if len(text) < 4 or text[3] != "-" or not text[:3].isdigit():
                raise ValueError(f"unparsable line {text!r}")

    def command(self, line):
        self.sock.sendall(line.encode() + b"\r\n")
        while True:
            reply = self.read_reply()
            if reply[-1].startswith("7"):
                self.notifications.append(reply)
            else:
                return reply


def run_client(path, index, seed, queued, problems, lock):
    rng = random.Random(seed * 1000 + index)
    try:
        client = Client(path)
        client.command("SET SELF CLIENT_NAME soak:client%d:main" % index)
        client.command("SET SELF NOTIFICATION ALL on")
        mine = []
        disconnected = False
        for step in range(rng.randint(2, 5)):
            text = "Client %d message %d." % (index, step)
            if client.command("SPEAK")[-1] != "230 OK RECEIVING DATA":
                raise ValueError("SPEAK not accepted")
            reply = client.command(text + "\r\n.")
            if reply[-1] == "225 OK MESSAGE QUEUED":
                mine.append(reply[0][4:])
                with lock:
                    queued.append(text)
            time.sleep(rng.random() * 0.2)
            roll = rng.random()
            if roll < 0.2:
                client.command("CANCEL self")
            elif roll < 0.25:
                client.command("CANCEL all")
            elif roll < 0.35:
                client.sock.close()
                disconnected = True
                break
        if disconnected:
            return
        client.command("SET SELF PRIORITY message")
        # Wait for the end of every message of its own.
        ends = {}
        deadline = time.time() + 60
        while len(ends) < len(mine) and time.time() < deadline:
            if client.notifications:
                reply = client.notifications.pop(0)
            else:
                reply = client.read_reply()
            code = reply[-1][:3]
            message = reply[0][4:]
            if code in ("702", "703"):
                ends.setdefault(message, []).append(code)
        # Anything further for its messages would be a second end.
        client.sock.settimeout(0.5)
        try:
            while True:
                reply = client.notifications.pop(0) if client.notifications else client.read_reply()
                if reply[-1][:3] in ("702", "703"):
                    ends.setdefault(reply[0][4:], []).append(reply[-1][:3])
        except (socket.timeout, TimeoutError):
            pass
        client.sock.close()
        for message in mine:
            if len(ends.get(message, [])) != 1:
                with lock:
                    problems.append("client %d message %s ended %s" % (index, message, ends.get(message, [])))
        for message in ends:
            if message not in mine:
                with lock:
                    problems.append("client %d got an end for message %s, not its own" % (index, message))
    except Exception as error:  # noqa: BLE001 - every failure is a problem to report
        with lock:
            problems.append("client %d: %r" % (index, error))


def main() -> int:
    path, clients, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    queued, problems, lock = [], [], threading.Lock()
    threads = [threading.Thread(target=run_client, args=(path, i, seed, queued, problems, lock))
               for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(json.dumps({"queued": queued, "problems": problems}))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
