"""``eval-pipeline ui`` serves the Dagster UI without warnings and stops, with everything it
started, within seconds of Ctrl-C (SIGINT) or SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

STOPPED_WITHIN_S = 30.0  # STOP_S, and the wait for what is left to be killed


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            return bool(reply.status == 200)
    except OSError:
        return False


def descendants(pid: int) -> set[int]:
    """Every process whose parent chain leads to ``pid``."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pid: int) -> str:
    """The command line of a running process ('' when it is gone or a zombie)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
    except OSError:
        return ""
    return "" if state == "Z" else command


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_ui_starts_cleanly_and_stops_on_a_signal(signum: int) -> None:
    port = free_port()
    executable = Path(sys.executable).parent / "eval-pipeline"
    ui = subprocess.Popen(
        [str(executable), "ui", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "100"},
    )
    try:
        deadline = time.monotonic() + 240
        while not answers(f"http://127.0.0.1:{port}/server_info"):
            assert ui.poll() is None and time.monotonic() < deadline, "the UI did not start"
            time.sleep(1)
        started = descendants(ui.pid)
        assert started  # the webserver, the daemon and their code servers
        ui.send_signal(signum)
        began = time.monotonic()
        ui.wait(timeout=STOPPED_WITHIN_S)
        assert time.monotonic() - began < STOPPED_WITHIN_S
        time.sleep(0.5)
        left = {pid: alive(pid) for pid in started}
        assert not {pid: what for pid, what in left.items() if what}, "processes outlived the UI"
    finally:
        if ui.poll() is None:
            ui.kill()
        _, stderr = ui.communicate(timeout=30)
    assert "Warning" not in stderr and "WARNING" not in stderr, stderr
