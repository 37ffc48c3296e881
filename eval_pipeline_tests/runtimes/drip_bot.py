"""A ``python:`` bot that asks an HTTP server for its answer and waits for every byte of it.

Against a server that drips its reply (one byte every few seconds) its turn never ends by
itself: only the adapter's deadline can end it. ``make(url)`` is the factory.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Callable


def make(url: str) -> Callable[[str], str]:
    def chat(prompt: str) -> str:
        request = urllib.request.Request(url, data=b"{}", headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request) as reply:  # no timeout of its own
            return reply.read().decode("utf-8", "replace")

    return chat
