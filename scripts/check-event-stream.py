#!/usr/bin/env python3
"""Reads a running speakd's event stream and checks every event against openapi.json.

Usage: check-event-stream.py OPENAPI_JSON BASE_URL TOKEN_FILE

Replays the whole event history (Last-Event-ID: 0) and reads until the stream has been quiet for
a second, then validates each event's `event:`, `id:` and `data:` fields against the document's
ServerSentEvent and AnnouncementEvent schemas (JSON Schema 2020-12, as OpenAPI 3.1 uses).
Prints how many events it checked; exits 1 naming the first event that does not conform.
"""
import json
import socket
import sys
import urllib.request

import jsonschema


def main() -> int:
    document_path, base_url, token_file = sys.argv[1:4]
    with open(document_path, encoding="utf-8") as f:
        document = json.load(f)
    with open(token_file, encoding="utf-8") as f:
        token = f.read().strip()

    def validator(name):
        schema = {"$ref": f"#/components/schemas/{name}", "components": document["components"]}
        return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())

    frame, event = validator("ServerSentEvent"), validator("AnnouncementEvent")
    request = urllib.request.Request(
        base_url + "/v1/events", headers={"Authorization": f"Bearer {token}", "Last-Event-ID": "0"})
    fields, checked = {}, 0
    try:
        with urllib.request.urlopen(request, timeout=1) as stream:
            for raw in stream:
                line = raw.decode("utf-8").rstrip("\n")
                if line.startswith(":") or line.startswith("retry:"):
                    continue
                if line:
                    name, _, value = line.partition(":")
                    fields[name] = value[1:] if value.startswith(" ") else value
                    continue
                if not fields:
                    continue
                for error in frame.iter_errors(fields):
                    print(f"event {fields}: {error.message}")
                    return 1
                for error in event.iter_errors(json.loads(fields["data"])):
                    print(f"event {fields['id']} data {fields['data']}: {error.message} at {list(error.path)}")
                    return 1
                if json.loads(fields["data"])["type"] != fields["event"]:
                    print(f"event {fields['id']}: 'event: {fields['event']}' is not its data's type")
                    return 1
                checked += 1
                fields = {}
    except (socket.timeout, TimeoutError):
        pass
    print(f"{checked} events conform to openapi.json")
    return 0 if checked > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
