"""The response cache: a session's answers, kept so an identical run sends nothing again.

Opt-in per target (``cache: true`` in ``evals/runtimes.yaml``) or per run (``--cache``). The
unit is one sample of one session: the runtime keeps a session's state, so a session is
answered from the cache whole or sent whole, never half of each. Its key is the SHA-256 of

- the target's **runtime version** (the ``runtime_targets`` data version,
  :mod:`eval_pipeline.runtimes.versions`: spec, options, i.e. model, system prompt and request
  parameters, and what the server says of the model), so a new version never hits an old entry;
- the whole request of every turn: the session key, each turn's case, index, role and prompt
  (the messages a turn sends are these prompts and the answers before it);
- the sample's ``seed`` and ``sample_index``, so the samples of ``--repeat`` never share an answer.

A session is stored only when every turn was answered: a fault is sent again next time. A hit
is recorded ``cached = true``, with no latency and no attempt (nothing was sent).

An append-only store per runtime version (``<state>/response_cache/<runtime version>/``): each
writer (a run's cache, in one process) appends its entries to a segment file of its own, one
line each (``key``, the SHA-256 of its payload, the payload's JSON), so concurrent runs, threads
or processes never write into each other's lines; a reader indexes every segment when it opens
(keys and offsets only) and reads an entry's line when asked for it. A line that is truncated
(a kill mid-write) or corrupt (a hand edit) fails its checksum or its request check, and one
whose answers do not fit their columns (text, whole token counts in range) fails its schema
check when read; either is skipped with a warning and sent again, and the fresh answer is appended and read from then on. Lines
are flushed to the operating system as they are written, not synced to the disk: a cache
that lost its last lines in a power cut only sends those sessions again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import stat
import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from eval_pipeline.core import state_dir
from eval_pipeline.tables import TRANSCRIPTS, row_shape

LOG = logging.getLogger(__name__)
CACHE_FOLDER = "response_cache"
ENTRY_FORMAT = 1

# What an entry keeps of each answered turn (the rest of a row is the run's: latency, attempts).
ANSWER_FIELDS: tuple[str, ...] = (
    "surface",
    "grounding_source",
    "surface_tag",
    "epistemic_status",
    "raw",
    "prompt_tokens",
    "completion_tokens",
)
ANSWER_SHAPE = row_shape(TRANSCRIPTS, ANSWER_FIELDS)  # what each kept answer must fit when read
# What identifies a turn of the request, checked against the entry on every hit.
REQUEST_FIELDS: tuple[str, ...] = ("case_id", "turn_index", "role", "prompt")


def cache_root() -> Path:
    """Where the cache lives: under the project's state folder (``EVAL_PIPELINE_STATE``)."""
    return state_dir() / CACHE_FOLDER


@dataclass(frozen=True)
class SessionRequest:
    """One sample of one session, as the runtime is asked it: what its cache key is made of."""

    runtime_version: str
    session: str
    sample_index: int
    seed: int | None
    turns: tuple[tuple[str, int, str, str], ...]  # (case_id, turn_index, role, prompt) each

    @property
    def key(self) -> str:
        """The entry's key (:func:`request_key`), computed when first asked and kept. Not a
        cached property: its lock would be one more lock the driving threads share, and two
        threads computing it at once compute the same value."""
        known: str | None = self.__dict__.get("_key")
        if known is None:
            known = request_key(self)
            object.__setattr__(self, "_key", known)
        return known


def request_key(request: SessionRequest) -> str:
    """The SHA-256 of the request's canonical JSON: runtime version, session, sample, seed, turns."""
    canonical = json.dumps(
        [request.runtime_version, request.session, request.sample_index, request.seed, request.turns],
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CacheCounts:
    """What one run's cache did: sessions answered from it, sent, stored, and entries skipped as corrupt."""

    hits: int = 0
    misses: int = 0
    stored: int = 0
    skipped: int = 0


class CorruptEntry(ValueError):
    """An entry that is not a whole, matching answer to its request."""


class _Located(NamedTuple):
    """Where an entry's payload lies: its segment, offset and length, and its checksum."""

    segment: Path
    offset: int
    length: int
    sha256: str


class ResponseCache:
    """The cache entries of one runtime version; safe to share between threads."""

    def __init__(self, runtime_version: str, root: Path | None = None) -> None:
        self.runtime_version = runtime_version
        self.folder = (root or cache_root()) / runtime_version
        self._lock = threading.Lock()
        self._tally = dict.fromkeys(vars(CacheCounts()), 0)  # the counts so far, by CacheCounts field
        self._segment: Path | None = None
        self._descriptor: int | None = None
        self._offset = 0
        # Entries stored but not yet written, by request: the writer thread computes their keys
        # and payloads and appends them in batches, so a driving thread never waits on the disk
        # and does as little as it can between two requests (its work holds up the others').
        self._pending: dict[SessionRequest, list[dict[str, Any]]] = {}
        self._wake = threading.Condition(self._lock)
        self._closed = False
        self._writer: threading.Thread | None = None
        # The entries the segments held when this cache opened, by key (never changed after),
        # and those this cache has written since, by request (they answer before the others).
        self._index, problems = index_segments(self.folder)
        self._written: dict[SessionRequest, _Located] = {}
        for segment, line, reason in problems:
            self._skip(f"{segment} line {line}", reason)

    @property
    def counts(self) -> CacheCounts:
        with self._lock:
            return CacheCounts(**self._tally)

    def _count(self, **added: int) -> None:
        with self._lock:
            for name, more in added.items():
                self._tally[name] += more

    def request(
        self, session: str, sample_index: int, seed: int | None, turns: Sequence[tuple[str, int, str, str]]
    ) -> SessionRequest:
        return SessionRequest(self.runtime_version, session, sample_index, seed, tuple(turns))

    def answers(self, request: SessionRequest) -> list[dict[str, Any]] | None:
        """The stored answers of ``request``'s turns (one dict of :data:`ANSWER_FIELDS` each, in
        order), or None: not stored, or stored corrupt (skipped with a warning). This cache's
        own entries are found by request; the request's key is computed only when the segments
        held entries when it opened (a cold cache never computes it here)."""
        with self._lock:
            pending = self._pending.get(request)
            located = None if pending is not None else self._written.get(request)
        if pending is None and located is None and self._index:  # read-only once opened
            located = self._index.get(request.key)
        if pending is not None:
            self._count(hits=1)
            return [{name: row.get(name) for name in ANSWER_FIELDS} for row in pending]
        if located is None:
            self._count(misses=1)
            return None
        where = f"{located.segment} at byte {located.offset}"
        try:
            with located.segment.open("rb") as handle:
                handle.seek(located.offset)
                payload = handle.read(located.length)
        except OSError as exc:
            self._skip(where, f"cannot read it: {exc.strerror or exc}", missed=1)
            return None
        try:
            answers = entry_answers(payload, located.sha256, request)
        except CorruptEntry as exc:
            self._skip(where, str(exc), missed=1)
            return None
        self._count(hits=1)
        return answers

    def _skip(self, where: str, reason: str, missed: int = 0) -> None:
        LOG.warning("response cache: skipping the entry in %s (%s); its session is sent again", where, reason)
        self._count(skipped=1, misses=missed)

    def store(self, request: SessionRequest, rows: Sequence[Mapping[str, Any]]) -> None:
        """Keep the answers of ``rows`` (one per turn of ``request``, every one answered); the
        writer thread appends them within :data:`WRITE_EVERY_S`, and :meth:`close` writes the rest."""
        kept = [dict(row) for row in rows]  # as they are now; the writer reads ANSWER_FIELDS
        with self._lock:
            if self._closed:
                raise RuntimeError("the response cache is closed")
            self._pending[request] = kept
            self._tally["stored"] += 1
            if self._writer is None:
                self._writer = threading.Thread(
                    target=self._write_batches, name="response-cache", daemon=True
                )
                self._writer.start()

    def _write_batches(self) -> None:
        while True:
            with self._lock:
                if not self._closed:
                    self._wake.wait(WRITE_EVERY_S)
                batch = list(self._pending.items())
                closed = self._closed
            if batch:
                self._append(batch)
            if closed:
                return

    def _append(self, batch: Sequence[tuple[SessionRequest, list[dict[str, Any]]]]) -> None:
        """Append ``batch`` to this writer's segment in one write, then index it."""
        if self._descriptor is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._segment = self.folder / f"{os.getpid()}-{uuid.uuid4().hex[:12]}{SEGMENT_SUFFIX}"
            self._descriptor = os.open(self._segment, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        assert self._segment is not None
        lines: list[bytes] = []
        located: dict[SessionRequest, _Located] = {}
        offset = self._offset
        for request, rows in batch:
            key = request.key
            payload = entry_payload(request, rows)
            checksum = hashlib.sha256(payload).hexdigest()
            head = f"{key}\t{checksum}\t".encode()
            located[request] = _Located(self._segment, offset + len(head), len(payload), checksum)
            lines.append(head + payload + b"\n")
            offset += len(lines[-1])
        os.write(self._descriptor, b"".join(lines))  # whole lines; a kill mid-write tears the last one only
        self._offset = offset
        with self._lock:
            self._written.update(located)
            for request, rows in batch:
                if self._pending.get(request) is rows:  # not stored again since
                    del self._pending[request]

    def close(self) -> None:
        """Write every entry stored so far and close the segment."""
        with self._lock:
            self._closed = True
            self._wake.notify_all()
            writer = self._writer
        if writer is not None:
            writer.join()
        if self._descriptor is not None:
            os.close(self._descriptor)
            self._descriptor = None


# How often the writer thread appends the entries stored since its last write.
WRITE_EVERY_S = 0.2
SEGMENT_SUFFIX = ".log"
_KEY = re.compile(rb"^[0-9a-f]{64}$")


def _written_order(segment: Path) -> tuple[float, str]:
    try:
        return segment.stat().st_mtime, segment.name
    except OSError:
        return 0.0, segment.name


def index_segments(folder: Path) -> tuple[dict[str, _Located], list[tuple[Path, int, str]]]:
    """Every entry of a version's segments by key, and the lines that are not whole entries:
    (segment, line number, why). A line is an entry when its payload matches its checksum, so
    a damaged line never hides a whole one of the same key; of two whole ones, the one in the
    segment written later wins."""
    index: dict[str, _Located] = {}
    problems: list[tuple[Path, int, str]] = []
    if not folder.is_dir():
        return index, problems
    for segment in sorted(folder.glob(f"*{SEGMENT_SUFFIX}"), key=_written_order):
        try:
            if not stat.S_ISREG(segment.lstat().st_mode):
                continue  # a folder, link or pipe bearing a segment's name (a pipe's read would wait for ever)
            data = segment.read_bytes()
        except OSError as exc:
            problems.append((segment, 0, f"cannot read it: {exc.strerror or exc}"))
            continue
        offset = 0
        for number, line in enumerate(data.split(b"\n"), start=1):
            start, offset = offset, offset + len(line) + 1
            if not line:
                continue
            if offset > len(data):  # the last line has no end: cut off mid-write
                problems.append((segment, number, "the line is cut off"))
                break
            key, _, rest = line.partition(b"\t")
            checksum, _, payload = rest.partition(b"\t")
            if not _KEY.match(key) or not _KEY.match(checksum):
                problems.append((segment, number, "not a cache entry line (key, checksum, payload)"))
                continue
            if hashlib.sha256(payload).hexdigest().encode() != checksum:
                problems.append((segment, number, "its checksum does not match its payload"))
                continue
            payload_at = start + len(key) + len(checksum) + 2
            index[key.decode()] = _Located(segment, payload_at, len(payload), checksum.decode())
    return index, problems


def target_cache(spec: str, options: Mapping[str, Any], root: Path | None = None) -> ResponseCache:
    """The cache of the runtime version ``spec`` with ``options`` has now (RuntimeSpecError when
    it cannot be determined: then nothing could be told apart from an older version)."""
    from eval_pipeline.runtimes.versions import runtime_version

    return ResponseCache(runtime_version(spec, options).digest, root)


def entry_payload(request: SessionRequest, rows: Sequence[Mapping[str, Any]]) -> bytes:
    """The payload of one entry: the key, each turn's request and answer."""
    turns = [
        {**dict(zip(REQUEST_FIELDS, asked, strict=True)), **{name: row.get(name) for name in ANSWER_FIELDS}}
        for asked, row in zip(request.turns, rows, strict=True)
    ]
    document = {"format": ENTRY_FORMAT, "key": request.key, "turns": turns}
    return json.dumps(document, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode("utf-8")


def entry_answers(payload: bytes, sha256: str, request: SessionRequest) -> list[dict[str, Any]]:
    """The answers an entry's payload holds for ``request``; CorruptEntry when it is not whole
    (truncated, edited) or answers another request."""
    if hashlib.sha256(payload).hexdigest() != sha256:
        raise CorruptEntry("its checksum does not match its payload")
    try:
        document = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise CorruptEntry(f"not a whole JSON document: {exc}") from None
    except RecursionError:
        raise CorruptEntry("not a cache entry: nested too deep") from None
    if not isinstance(document, dict) or document.get("format") != ENTRY_FORMAT:
        raise CorruptEntry(f"not a cache entry of format {ENTRY_FORMAT}")
    if document.get("key") != request.key:
        raise CorruptEntry("it is stored under a key that is not its own")
    turns = document.get("turns")
    if (
        not isinstance(turns, list)
        or len(turns) != len(request.turns)
        or any(
            not isinstance(turn, dict) or tuple(turn.get(name) for name in REQUEST_FIELDS) != asked
            for turn, asked in zip(turns, request.turns, strict=False)
        )
    ):
        raise CorruptEntry("its turns are not the request's")
    for number, turn in enumerate(turns, start=1):
        problem = ANSWER_SHAPE.misfit(turn)
        if problem is None and turn["surface"] is None:
            problem = "an answered turn has no surface"
        if problem is not None:
            raise CorruptEntry(f"turn {number} does not fit an answer: {problem}")
    return [{name: turn[name] for name in ANSWER_FIELDS} for turn in turns]


@dataclass(frozen=True)
class VersionUsage:
    """The entries kept for one runtime version, and their bytes on disk."""

    runtime_version: str
    entries: int
    bytes: int


def cache_usage(root: Path | None = None) -> list[VersionUsage]:
    """Every runtime version with entries in the cache (distinct keys), by name."""
    base = root or cache_root()
    if not base.is_dir():
        return []
    usage = []
    for folder in sorted(p for p in base.iterdir() if p.is_dir()):
        index, _ = index_segments(folder)
        size = sum(path.stat().st_size for path in folder.glob(f"*{SEGMENT_SUFFIX}"))
        usage.append(VersionUsage(folder.name, len(index), size))
    return usage


def clear_cache(root: Path | None = None) -> int:
    """Remove every entry; the number of entries removed."""
    base = root or cache_root()
    removed = sum(usage.entries for usage in cache_usage(base))
    if base.is_dir():
        for folder in (p for p in base.iterdir() if p.is_dir()):
            shutil.rmtree(folder, ignore_errors=True)
    return removed
