"""Module-level calls for worker processes in tests (a spawned worker imports them by name)."""

from __future__ import annotations

import os
import time


def square(value: int) -> int:
    return value * value


def slow_square(value: int) -> int:
    time.sleep(0.2)
    return value * value


def pid(_: int) -> int:
    return os.getpid()


def die(_: int) -> int:
    os._exit(3)  # a worker killed mid-call (as by the OOM killer)


def fail(value: int) -> int:
    raise ValueError(f"call {value} failed")
