#!/usr/bin/env python3
"""Drives speakd's status page in headless Chromium and checks what it shows.

Usage: check-status-page.py BASE_URL TOKEN_FILE SCREENSHOT

The page loads and asks for the token; with it, the event stream goes live. A long announcement
is posted through the page's form and its words show as heard; it is paused and resumed with its
buttons; then a short one is posted, which shows as queued behind it; the long one is cancelled
with its Cancel button (cancelled), and the short one then speaks and finishes (completed). A
session started over the API shows in the Sessions table, and leaves it when it ends; a schedule made
over the API shows in the Schedules table with its next slot, and leaves it when deleted.
Health must read ok and list the default output and speakd's version. The browser's console must have no errors. A screenshot is
saved. Prints one line per step; exits 1 naming the step that failed.
"""
import json
import os
import sys
import time
import urllib.request

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

# Selenium Manager would try to download a driver and send statistics: there is no network here,
# and the Debian driver is given explicitly.
os.environ["SE_AVOID_STATS"] = "true"


def main() -> int:
    base_url, token_file, screenshot = sys.argv[1:4]
    with open(token_file, encoding="utf-8") as f:
        token = f.read().strip()
    options = webdriver.ChromeOptions()
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1200,1400",
                     "--disable-dev-shm-usage", "--no-first-run"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    step = "load the page"
    try:
        wait = WebDriverWait(driver, 20, poll_frequency=0.05)
        driver.get(base_url + "/")
        print("loaded:", driver.title)

        step = "ask for the token and take it"
        wait.until(lambda d: d.find_element(By.ID, "token-box").is_displayed())
        driver.find_element(By.ID, "token").send_keys(token)
        driver.find_element(By.CSS_SELECTOR, "#token-form button").click()
        wait.until(lambda d: not d.find_element(By.ID, "token-box").is_displayed())
        wait.until(lambda d: d.find_element(By.ID, "stream-state").text == "live")
        print("token accepted, event stream live")

        step = "show health"
        wait.until(lambda d: d.find_element(By.ID, "engine-state").text == "ok")
        wait.until(lambda d: d.find_element(By.ID, "audio-state").text == "ok")
        wait.until(lambda d: d.find_element(By.ID, "outputs").text.startswith("default ("))
        # speakd's version from /healthz: 0.1.0, or 0.1.0-dev from a debug build.
        wait.until(lambda d: d.find_element(By.ID, "version").text[:1].isdigit())
        print("health:", driver.find_element(By.ID, "engine-detail").text, "/",
              driver.find_element(By.ID, "audio-detail").text, "/", driver.find_element(By.ID, "outputs").text,
              "/ version", driver.find_element(By.ID, "version").text)

        def announce(text):
            field = driver.find_element(By.ID, "say-text")
            field.clear()
            field.send_keys(text)
            driver.find_element(By.ID, "say-button").click()
            wait.until(lambda d: d.find_element(By.ID, "say-message").text.startswith("Queued as "))
            return driver.find_element(By.ID, "say-message").text.removeprefix("Queued as ").rstrip(".")

        # The page redraws its tables on every event, so an element found a moment ago may be gone:
        # such a read counts as "not yet" and is tried again.
        def text_of(selector):
            try:
                rows = driver.find_elements(By.CSS_SELECTOR, selector)
                return rows[0].text if rows else None
            except StaleElementReferenceException:
                return None

        def queue_state(id):
            return text_of(f"#queue tr[data-id='{id}'] td.state-cell")

        def outcome(id):
            return text_of(f"#finished tr[data-id='{id}'] td.outcome")

        def click(selector):
            def clicked(d):
                try:
                    d.find_element(By.CSS_SELECTOR, selector).click()
                    return True
                except StaleElementReferenceException:
                    return False
            wait.until(clicked)

        step = "post a long announcement and see it speak"
        long_id = announce("This long announcement will be cancelled from the status page before it ends, "
                           "so the next one can be heard.")
        wait.until(lambda d: queue_state(long_id) == "speaking")
        print("long announcement", long_id, "speaking")

        step = "see its words as they are heard"
        heard = set()
        def words_heard(d):
            heard.add(text_of("#heard"))
            return len(heard - {"–", "", None}) >= 2
        wait.until(words_heard)
        print("heard:", sorted(heard - {"–", "", None}))

        step = "pause it with its button"
        click(f"#queue tr[data-id='{long_id}'] button.pause")
        wait.until(lambda d: queue_state(long_id) == "paused")
        print("long announcement paused")

        step = "resume it with its button"
        click(f"#queue tr[data-id='{long_id}'] button.resume")
        wait.until(lambda d: queue_state(long_id) == "speaking")
        print("long announcement resumed")

        step = "post a second announcement and see it queued behind the first"
        short_id = announce("Platform four.")
        wait.until(lambda d: (queue_state(short_id) or "").startswith("queued"))
        print("second announcement", short_id, queue_state(short_id))

        step = "cancel the first with its button"
        click(f"#queue tr[data-id='{long_id}'] button.cancel")
        wait.until(lambda d: (outcome(long_id) or "").startswith("cancelled"))
        print("first:", outcome(long_id))

        step = "see the second speak and finish"
        wait.until(lambda d: (outcome(short_id) or "").startswith("completed"))
        print("second:", outcome(short_id))
        wait.until(lambda d: queue_state(short_id) is None)

        step = "see a session started elsewhere listed, and gone once it ends"
        def session_call(method, query=""):
            request = urllib.request.Request(
                base_url + "/v1/session" + query, method=method, data=b'{"rate": 0.8}' if method == "PUT" else None,
                headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=10) as response:
                return json.load(response)
        session_id = session_call("PUT")["session"]["id"]
        wait.until(lambda d: text_of("#sessions tr[data-output='default']") is not None)
        row = text_of("#sessions tr[data-output='default']")
        if session_id not in row or "0.8" not in row:
            print("session row:", row)
            return 1
        print("session:", row)
        session_call("DELETE", "?output=default")
        wait.until(lambda d: text_of("#sessions tr[data-output='default']") is None)

        step = "see a schedule made elsewhere listed with its next slot, and gone once deleted"
        def schedules_call(method, path="", body=None):
            request = urllib.request.Request(
                base_url + "/v1/schedules" + path, method=method,
                data=json.dumps(body).encode() if body is not None else None,
                headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=10) as response:
                return json.load(response) if response.status != 204 else None
        schedule = schedules_call("POST", body={
            "announcement": {"text": "The museum closes in fifteen minutes."}, "name": "closing",
            "rrule": "FREQ=DAILY;BYHOUR=17;BYMINUTE=45", "start": "2026-01-01T00:00:00+00:00",
            "timeZone": "Europe/Lisbon"})
        selector = "#schedules tr[data-id='" + schedule["id"] + "']"
        wait.until(lambda d: text_of(selector) is not None)
        row = text_of(selector)
        if "closing" not in row or "FREQ=DAILY" not in row or schedule["next"] not in row:
            print("schedule row:", row, "next:", schedule["next"])
            return 1
        print("schedule:", row)
        schedules_call("DELETE", "/" + schedule["id"])
        wait.until(lambda d: text_of(selector) is None)

        step = "keep a screenshot"
        driver.save_screenshot(screenshot)
        print("screenshot:", screenshot)

        step = "a console without errors"
        time.sleep(0.2)
        errors = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
        for entry in errors:
            print("console error:", entry["message"])
        if errors:
            return 1
        print("console: no errors")
        return 0
    except TimeoutException:
        print(f"failed to {step}")
        try:
            driver.save_screenshot(screenshot)
            print("screenshot of the failure:", screenshot)
            for entry in driver.get_log("browser"):
                print("console:", entry["level"], entry["message"])
        except Exception:
            pass
        return 1
    finally:
        driver.quit()


if __name__ == "__main__":
    sys.exit(main())
