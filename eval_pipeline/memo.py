"""A few recent results kept by key: what lets one run read a replay file once, and hydrate a
small run's cases once for all its stages.

The CLI builds the runtime before a run starts (a replay file is read and validated then),
and the run's transcripts stage builds it again; each stage of a lane also needs the case
models of each batch. Keying by content (a digest of the bytes or of the stored JSON) means a
changed file is never served stale.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Generic, TypeVar

V = TypeVar("V")


class Recent(Generic[V]):
    """The last ``size`` values computed, by key (thread-safe; a miss computes outside the lock)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._values: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, compute: Callable[[], V]) -> V:
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
                return self._values[key]
        value = compute()
        self.put(key, value)
        return value

    def put(self, key: Hashable, value: V) -> None:
        with self._lock:
            self._values[key] = value
            self._values.move_to_end(key)
            while len(self._values) > self._size:
                self._values.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._values.clear()


def file_digest(path: Path) -> bytes:
    """A digest of the file's bytes, read a block at a time (a big file is never held whole)."""
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, lambda: hashlib.blake2b(digest_size=16)).digest()
