#!/usr/bin/env python3
"""Speaks through speakd's SSIP socket from a web page in headless Chromium (Web Speech API).

Usage: check-web-speech.py SSIP_SOCKET SPEAKD_SOCKET

Chromium reaches speech-dispatcher's protocol through libspeechd with --enable-speech-dispatcher,
at SPEECHD_ADDRESS; SPEECHD_CMD=/bin/false keeps libspeechd from starting a real
speech-dispatcher. The page speaks three utterances; then a long one, which a high-priority
announcement posted to speakd's HTTP API (on SPEAKD_SOCKET) interrupts; then, without
speechSynthesis.cancel(), one more. Prints one line per utterance event, `EVENT TEXT EPOCH_MS`
(start, end, error), then `ok`; exits 1 naming the step that failed.
"""
import http.client
import json
import os
import socket
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

os.environ["SE_AVOID_STATS"] = "true"

PAGE = """
window.log = [];
window.say = (text) => {
  const utterance = new SpeechSynthesisUtterance(text);
  const note = (kind) => () => log.push([kind, text, performance.timeOrigin + performance.now()]);
  utterance.onstart = note('start');
  utterance.onend = note('end');
  utterance.onerror = (e) => log.push(['error', text + ': ' + e.error, performance.timeOrigin + performance.now()]);
  speechSynthesis.speak(utterance);
};
"""


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost")
        self.unix_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.unix_path)


def main() -> int:
    ssip_socket, speakd_socket = sys.argv[1:3]
    os.environ["SPEECHD_ADDRESS"] = "unix_socket:" + ssip_socket
    os.environ["SPEECHD_CMD"] = "/bin/false"
    options = webdriver.ChromeOptions()
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                     "--enable-speech-dispatcher", "--autoplay-policy=no-user-gesture-required"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    step = "load the page"
    try:
        driver.get("data:text/html,<title>speech</title>")
        driver.execute_script(PAGE)

        def wait_for(predicate, seconds):
            deadline = time.time() + seconds
            while time.time() < deadline:
                log = driver.execute_script("return window.log")
                if predicate(log):
                    return log
                time.sleep(0.02)
            raise TimeoutError(f"{step}: log so far {driver.execute_script('return window.log')}")

        def ended(text):
            return lambda log: any(kind in ("end", "error") and entry.startswith(text) for kind, entry, _ in log)

        step = "speak three utterances in order"
        driver.execute_script("say('One.'); say('Two.'); say('Three.');")
        wait_for(ended("Three."), 30)

        step = "a high announcement interrupts the page"
        long_text = "This long utterance from the page is interrupted by a platform announcement."
        driver.execute_script("say(arguments[0]);", long_text)
        wait_for(lambda log: any(kind == "start" and entry == long_text for kind, entry, _ in log), 15)
        time.sleep(0.5)
        connection = UnixHTTPConnection(speakd_socket)
        connection.request("POST", "/v1/announcements", json.dumps({"text": "Attention please.", "priority": "high"}),
                           {"Content-Type": "application/json"})
        response = connection.getresponse()
        if response.status != 202:
            raise RuntimeError(f"{step}: POST answered {response.status}: {response.read()!r}")
        wait_for(ended(long_text), 30)

        step = "the page speaks again without cancel()"
        driver.execute_script("say('After.');")
        log = wait_for(ended("After."), 20)
        for kind, entry, at in log:
            print(kind, entry.replace(" ", "_"), f"{at:.1f}")
        print("ok")
        return 0
    except Exception as error:  # one line naming the step, for the test's message
        print(f"FAILED {step}: {error}")
        return 1
    finally:
        driver.quit()


if __name__ == "__main__":
    sys.exit(main())
