"""A few recent results kept by key: what lets one process hash an unchanged file once, and
hydrate a small run's cases once for all its stages (each stage of a lane needs the case
models of each batch). Keying by content (a digest of the bytes or of the stored JSON) means a
changed file is never served stale.
"""

from __future__ import annotations

import errno
import hashlib
import stat
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
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


def content_sha256(paths: Sequence[Path]) -> str:
    """The SHA-256 of the files' bytes, one after another, read a block at a time (a big file is
    never held whole). Kept for the files as they are on disk (device, inode, size, modification
    time to the nanosecond): the several parts of one run that ask (a custom case file's case set
    key, asked by the command and by the run's cases step, and the metrics' ``cases_sha256``)
    hash a million-case file once, and a file written since is hashed again."""
    stats = [path.stat() for path in paths]
    for path, found in zip(paths, stats, strict=True):
        if not stat.S_ISREG(found.st_mode):  # a device or a pipe: hashing it might never end
            raise OSError(errno.EINVAL, "not a regular file", str(path))
    key = tuple(
        (str(p.resolve()), s.st_dev, s.st_ino, s.st_size, s.st_mtime_ns)
        for p, s in zip(paths, stats, strict=True)
    )
    return _DIGESTS.get(key, lambda: _sha256(paths))


def _sha256(paths: Sequence[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        with path.open("rb") as handle:
            while block := handle.read(1 << 20):
                digest.update(block)
    return digest.hexdigest()


_DIGESTS: Recent[str] = Recent(16)
