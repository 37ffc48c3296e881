"""The journal of answered sessions: what a run already paid for, kept as it goes.

Each session the runtime finished (every one of its turns' transcript rows, faults included)
is appended to the run's journal file, so a run that is killed (SIGKILL, out of memory, a
lost worker) keeps its answers. ``run --resume`` (and a Dagster re-execution of a failed
run) takes the journal over, answers the sessions it holds from it and sends only the rest;
a session cut off mid-thread is not in it and restarts from its first turn, since its state
lived in the runtime.

A journal belongs to one **series identity** (:class:`JournalIdentity`: lane, split, case
set and the digest of its cases, runtime target and runtime version, samples, seed), written
as its first record; a journal of another identity is refused with the difference. Files
live under the instance's storage folder, next to the stage files:
``<journal dir>/<lane>/<case_set>/<runtime>/<run_id>.journal``. A live run holds an
exclusive lock on its file, so two runs of one series never take the same journal; a killed
run's lock goes with its process.

Format: JSON lines, append-only. Each line is ``<length> <crc32> <json>``, the length in bytes
of the JSON and its CRC-32 (8 hex), so a torn tail (a kill mid-write) or a hand-edited line
is detected, skipped with a warning and its session sent again, never read as an answer.
Lines are written by one background thread, batched, and fsynced at least every
:data:`FSYNC_EVERY_S`.

Rejected: *Arrow IPC stream* batches (the rows are already dicts when a session ends, and a
torn IPC message cannot be resynchronised past, where a line can); *one file per series*
(two runs of one series at once would write one file); *a row per turn* (a session's turns
are only worth keeping whole: a cut-off session is sent again from its first turn anyway).
A recording (``replay:``, ``history:``) is sent nothing, so it keeps no journal.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from eval_pipeline.runtimes.base import RuntimeSpecError

FORMAT_VERSION = 1
FSYNC_EVERY_S = 0.5  # at least every second, with room for a slow disk
SUFFIX = ".journal"

SessionRows = list[dict[str, Any]]


@dataclass(frozen=True)
class JournalIdentity:
    """What a journal's answers are answers to: a resumed run must be the same in every field."""

    lane: str
    split: str
    case_set: str
    cases_sha256: str  # the cases the threads were built from, and the lane version that built them
    runtime: str  # the target's name
    runtime_version: str | None  # its runtime version's digest (None: it could not be told)
    samples: int
    seed: int | None

    def differences(self, other: JournalIdentity) -> list[str]:
        """What differs from ``other`` (this is the journal's, ``other`` the run's), in words."""
        return [
            f"{name} {mine!r} (this run: {theirs!r})"
            for name, mine in asdict(self).items()
            if mine != (theirs := getattr(other, name))
        ]


def encode_record(record: Mapping[str, Any]) -> bytes:
    """One journal line: ``<length> <crc32> <json>\\n``."""
    payload = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode()
    return b"%d %08x " % (len(payload), zlib.crc32(payload)) + payload + b"\n"


class CorruptRecord(ValueError):
    """A journal line whose length, checksum or JSON does not hold."""


def decode_record(line: bytes) -> dict[str, Any]:
    """The record of one journal line (without its newline); CorruptRecord when it does not check."""
    length_text, _, rest = line.partition(b" ")
    crc_text, _, payload = rest.partition(b" ")
    if not length_text.isdigit() or len(crc_text) != 8:
        raise CorruptRecord("no length and checksum")
    if int(length_text) != len(payload):
        raise CorruptRecord(f"{len(payload)} bytes, the record says {int(length_text)}")
    try:
        expected = int(crc_text, 16)
    except ValueError:
        raise CorruptRecord("the checksum is not hexadecimal") from None
    if zlib.crc32(payload) != expected:
        raise CorruptRecord("the checksum does not match")
    try:
        record = json.loads(payload)
    except ValueError as exc:
        raise CorruptRecord(f"not JSON: {exc}") from None
    if not isinstance(record, dict):
        raise CorruptRecord("not a JSON object")
    return record


@dataclass
class JournalContents:
    """What a journal file holds that checks: its identity, the sessions' rows by (session, sample)."""

    identity: JournalIdentity | None
    sessions: dict[tuple[str, int], SessionRows] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    good_end: int = 0  # the byte offset after the last whole line (a torn tail starts here)


def read_journal(path: Path) -> JournalContents:
    """The records of ``path`` that check; each line that does not is a warning (``file:line``)."""
    data = path.read_bytes()
    contents = JournalContents(identity=None)
    offset = 0
    for number, line in enumerate(data.split(b"\n"), start=1):
        end = offset + len(line) + 1
        torn = end > len(data)  # the last piece, with no newline: written in part
        if torn and not line:
            break
        try:
            if torn:
                raise CorruptRecord("the line was cut off (written in part)")
            record = decode_record(line)
            _take(contents, record)
        except CorruptRecord as exc:
            contents.warnings.append(f"{path}:{number}: skipped, its session is sent again: {exc}")
        if not torn:
            contents.good_end = end
        offset = end
    return contents


def _take(contents: JournalContents, record: dict[str, Any]) -> None:
    if "identity" in record:
        if contents.identity is not None or record.get("journal") != FORMAT_VERSION:
            raise CorruptRecord("a second header, or a header of another journal format")
        try:
            contents.identity = JournalIdentity(**record["identity"])
        except TypeError as exc:
            raise CorruptRecord(f"not a journal header: {exc}") from None
        return
    key, sample, rows = record.get("session"), record.get("sample_index"), record.get("rows")
    if not isinstance(key, str) or not isinstance(sample, int) or not isinstance(rows, list):
        raise CorruptRecord("not a session record (session, sample_index, rows)")
    if contents.identity is None:
        raise CorruptRecord("a session record before the journal's header")
    contents.sessions[(key, sample)] = rows


class JournalWriter:
    """Appends records to an open, locked journal file; a background thread writes them in
    batches and fsyncs at least every :data:`FSYNC_EVERY_S`. :meth:`close` writes what is left."""

    def __init__(self, path: Path, handle: int) -> None:
        self.path = path
        self._handle = handle
        self._pending: list[bytes] = []
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._flusher = threading.Thread(target=self._flush_loop, name="eval-journal", daemon=True)
        self._flusher.start()

    def append(self, record: Mapping[str, Any]) -> None:
        line = encode_record(record)
        with self._lock:
            self._pending.append(line)

    def append_session(self, key: str, sample_index: int, rows: SessionRows) -> None:
        self.append({"session": key, "sample_index": sample_index, "rows": rows})

    def _flush(self) -> None:
        with self._lock:
            lines, self._pending = self._pending, []
        if lines:
            os.write(self._handle, b"".join(lines))
            os.fsync(self._handle)

    def _flush_loop(self) -> None:
        while not self._closing.wait(FSYNC_EVERY_S):
            self._flush()

    def close(self) -> None:
        """Write and fsync what is pending, then release the file (and its lock)."""
        if self._closing.is_set():
            return
        self._closing.set()
        self._flusher.join()
        try:
            self._flush()
        finally:
            os.close(self._handle)


def series_folder(root: Path, lane: str, case_set: str, runtime: str) -> Path:
    return root / lane / case_set / runtime


def journal_path(root: Path, lane: str, case_set: str, runtime: str, run_id: str) -> Path:
    return series_folder(root, lane, case_set, runtime) / f"{run_id}{SUFFIX}"


def _locked(path: Path) -> int | None:
    """``path`` opened for appending with an exclusive lock taken, or None: a live run holds it."""
    handle = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(handle)
        return None
    return handle


def _unlocked_journals(folder: Path) -> Iterator[tuple[Path, int]]:
    """The series' journals no live run holds, newest first, each opened and locked."""
    if not folder.is_dir():
        return
    paths = sorted(folder.glob(f"*{SUFFIX}"), key=lambda p: p.stat().st_mtime, reverse=True)
    for path in paths:
        handle = _locked(path)
        if handle is not None:
            yield path, handle


@dataclass
class OpenedJournal:
    """A run's journal, open for appending, and what it was resumed with."""

    writer: JournalWriter
    answered: dict[tuple[str, int], SessionRows]
    note: str  # what the run says about resuming when it found nothing to resume ("" otherwise)
    warnings: list[str]
    resumed_from: Path | None = None  # the journal taken over


def nothing_committed(run_id: str) -> bool:
    """An ``is_committed`` for a caller with no history (every journal's run is uncommitted)."""
    return False


def open_journal(
    root: Path,
    identity: JournalIdentity,
    run_id: str,
    *,
    resume: bool,
    parent_run_id: str | None = None,
    is_committed: Callable[[str], bool] = nothing_committed,
) -> OpenedJournal:
    """The journal ``run_id`` appends to. Without ``resume`` a fresh one. With ``resume``, the
    series' newest journal no live run holds (the parent run's first, for a re-execution) is
    taken over: renamed to this run's, its torn tail cut off, its sessions the answers; none
    there starts a fresh journal and says so. A journal of another identity is refused
    (RuntimeSpecError, saying what differs); nothing is taken over then. So is a journal whose
    run ``is_committed`` to history (a kill between the commit and the journal's removal): its
    answers are a committed run's, so it is removed (with the older journals the commit would
    have removed) and nothing is resumed."""
    folder = series_folder(root, identity.lane, identity.case_set, identity.runtime)
    folder.mkdir(parents=True, exist_ok=True)
    target = journal_path(root, identity.lane, identity.case_set, identity.runtime, run_id)
    if resume:
        candidates = list(_unlocked_journals(folder))
        if parent_run_id is not None:  # the parent's own journal first
            candidates.sort(key=lambda found: found[0].stem != parent_run_id)
        if candidates and is_committed(candidates[0][0].stem):
            _refuse_committed(candidates)
        for _, other in candidates[1:]:
            os.close(other)
        if candidates:
            return _take_over(candidates[0], target, identity)
    fresh = _locked(target)
    if fresh is None:
        raise RuntimeSpecError(f"{target}: another live run holds this journal")
    os.ftruncate(fresh, 0)
    writer = JournalWriter(target, fresh)
    writer.append({"journal": FORMAT_VERSION, "identity": asdict(identity)})
    others = [path for path in folder.glob(f"*{SUFFIX}") if path != target]
    if resume:
        note = f"resume: no journal of this series to take over in {folder}: started afresh"
    elif others:
        note = (
            f"{len(others)} other journal(s) of this series in {folder} not used (--resume answers from an "
            "interrupted run's); this run starts afresh"
        )
    else:
        note = ""
    return OpenedJournal(writer, {}, note, [])


def _refuse_committed(candidates: Sequence[tuple[Path, int]]) -> None:
    """Remove the first candidate, whose run is committed, and every one no newer (what its
    commit would have removed; each is opened and locked), then refuse to resume."""
    committed = candidates[0][0]
    committed_mtime = committed.stat().st_mtime
    removed = 0
    for path, handle in candidates:
        try:
            if path.stat().st_mtime <= committed_mtime:
                path.unlink()
                removed += 1
        finally:
            os.close(handle)
    older = f" (and {removed - 1} older journal(s) of this series)" if removed > 1 else ""
    raise RuntimeSpecError(
        f"{committed}: cannot resume from this journal: its run {committed.stem} is already committed to "
        "history (the run was stopped after its commit, before its journal was removed), so resuming "
        f"would commit that run a second time. The journal{older} is removed; nothing is left to resume: "
        "run without --resume to start a new run"
    )


def _take_over(found: tuple[Path, int], target: Path, identity: JournalIdentity) -> OpenedJournal:
    path, handle = found
    try:
        contents = read_journal(path)
        if contents.identity is None:
            raise RuntimeSpecError(
                f"{path}: not a journal (no header that checks); remove it to start afresh"
            )
        differences = contents.identity.differences(identity)
        if None in (identity.runtime_version, contents.identity.runtime_version):
            raise RuntimeSpecError(
                f"{path}: cannot resume from this journal: the runtime version of {identity.runtime!r} "
                "could not be told (now or when it was written), so its answers cannot be matched to "
                "this runtime; run without --resume to start afresh"
            )
        if differences:
            raise RuntimeSpecError(
                f"{path}: cannot resume from this journal: it was written for "
                + "; ".join(differences)
                + ". Its answers are not answers to this run; run without --resume to start afresh"
            )
        os.ftruncate(handle, contents.good_end)  # a torn tail is cut off before anything is appended
        if path != target:
            os.rename(path, target)
    except BaseException:
        os.close(handle)
        raise
    return OpenedJournal(JournalWriter(target, handle), contents.sessions, "", contents.warnings, path)


def remove_journals(root: Path, lane: str, case_set: str, runtime: str) -> list[Path]:
    """Remove the series' journals no live run holds (its run is committed: nothing to resume)."""
    removed = []
    for path, handle in _unlocked_journals(series_folder(root, lane, case_set, runtime)):
        try:
            path.unlink(missing_ok=True)
            removed.append(path)
        finally:
            os.close(handle)
    return removed


def session_turns(rows: Sequence[Mapping[str, Any]]) -> list[tuple[Any, Any, Any]]:
    """What identifies a session's turns: (case_id, turn_index, prompt) of each row, in order."""
    return [(row.get("case_id"), row.get("turn_index"), row.get("prompt")) for row in rows]
