"""A runtime behind the exec: JSON-lines protocol v2 (a reference session per session id).

Run as ``python exec_bot.py``. It misbehaves on purpose when a prompt contains one of these
words: ``CRASH`` exits with code 3, ``GARBLE`` answers with a line that is not JSON,
``EXTRA`` answers and then writes its answer a second time, ``BYTES`` answers with bytes
that are not UTF-8, ``HUGE`` answers with a 50 MB line, ``HANG`` starts a grandchild and
never answers. ``--never-read`` never reads stdin at all. ``--pid-file PATH`` appends
``pgid pid`` for this process and for every grandchild it starts, so tests can look for
survivors in the process table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HUGE_REPLY_BYTES = 50_000_000


def record_pid(pid_file: str | None, pid: int) -> None:
    if pid_file:
        with Path(pid_file).open("a") as out:
            out.write(f"{os.getpgrp()} {pid}\n")


def write_line(data: bytes) -> None:
    sys.stdout.buffer.write(data + b"\n")
    sys.stdout.buffer.flush()


def sleep_forever() -> None:
    while True:
        time.sleep(60)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--never-read", action="store_true")
    parser.add_argument("--pid-file")
    parser.add_argument("--upstream", help="ignored: an argument a spec may carry (a URL with a token in it)")
    args = parser.parse_args()
    record_pid(args.pid_file, os.getpid())
    if args.never_read:
        sleep_forever()
    from eval_pipeline.runtimes.reference import ReferenceRuntime  # after the pid is on record

    runtime = ReferenceRuntime()
    sessions = {}
    for line in sys.stdin:
        request = json.loads(line)
        request_id = request["id"]
        if request.get("end"):
            sessions.pop(request["session"], None)
            write_line(json.dumps({"id": request_id}).encode())
            continue
        prompt = request["prompt"]
        if "CRASH" in prompt:
            sys.exit(3)
        if "GARBLE" in prompt:
            write_line(b"this is not json")
            continue
        if "BYTES" in prompt:
            write_line(b'{"id": "' + request_id.encode() + b'", "surface": "caf\xe9"}')
            continue
        if "HUGE" in prompt:
            write_line(json.dumps({"id": request_id, "surface": "x" * HUGE_REPLY_BYTES}).encode())
            continue
        if "HANG" in prompt:
            grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
            record_pid(args.pid_file, grandchild.pid)
            sleep_forever()
        session = sessions.setdefault(request["session"], runtime.open_session(request["session"]))
        response = session.send(prompt)
        reply = json.dumps(
            {"id": request_id, **response.model_dump(exclude={"raw"}), **response.raw}
        ).encode()
        write_line(reply)
        if "EXTRA" in prompt:
            write_line(reply)


if __name__ == "__main__":
    main()
