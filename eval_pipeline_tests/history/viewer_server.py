"""``eval-pipeline view`` started for real, as a user starts it, on a free port of 127.0.0.1."""

from __future__ import annotations

import re
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

VIEW = str(Path(sys.executable).parent / "eval-pipeline")


@contextmanager
def serving(root: str, *options: str) -> Iterator[str]:
    """The viewer over ``root`` (with ``options``); yields its base URL (``http://127.0.0.1:<port>``)."""
    process = subprocess.Popen(
        [VIEW, "view", "--history", root, "--port", "0", *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert match, f"the viewer did not start: {line}{process.stdout.read() if process.poll() else ''}"
        yield f"http://127.0.0.1:{match.group(1)}"
    finally:
        process.terminate()
        process.wait(timeout=10)


def get(url: str) -> tuple[int, str]:
    """Status and body of a GET (an error status is an answer too)."""
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return int(response.status), response.read().decode("utf-8")
    except urllib.error.HTTPError as error:
        return int(error.code), error.read().decode("utf-8")
