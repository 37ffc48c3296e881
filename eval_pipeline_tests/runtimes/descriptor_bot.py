"""A bot that writes below ``sys.stdout``: straight to file descriptor 1, and through the C
library's buffered ``printf``, as a C extension would."""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Callable


def make_descriptor_writer() -> Callable[[str], str]:
    def chat(prompt: str) -> str:
        os.write(1, f"fd1 from the bot: {prompt}\n".encode())
        time.sleep(0.05)  # long enough for concurrent turns to overlap
        ctypes.CDLL(None).printf(f"printf from the bot: {prompt}\n".encode())
        return f"You asked: {prompt}"

    return chat
