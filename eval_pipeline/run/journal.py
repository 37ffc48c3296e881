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
run's lock goes with its process. A run picks (or creates) its journal holding the series'
lock file, so a second ``--resume`` of a series waits for the first to take its journal, then
is refused while that run lives. A journal is created under a temporary name and renamed once
its header is written: none is ever seen empty.

Format: JSON lines, append-only. Each line is ``<length> <crc32> <json>``, the length in bytes
of the JSON and its CRC-32 (8 hex), so a torn tail (a kill mid-write) or a hand-edited line
is detected, skipped with a warning and its session sent again, never read as an answer; so
is a line that checks but does not fit the record's schema (a transcript row's columns and
types). Each record is written to the file as its session ends (a kill loses only the
sessions in flight) and fsynced at least every :data:`FSYNC_EVERY_S`. Resuming reads the
file a line at a time and keeps where each session's record lies, reading it when the
session comes up.

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
import stat
import threading
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from eval_pipeline.runtimes import RuntimeSpecError
from eval_pipeline.tables import TRANSCRIPTS, lane_columns, row_shape

FORMAT_VERSION = 1
FSYNC_EVERY_S = 0.5  # at least every second, with room for a slow disk
SUFFIX = ".journal"
SERIES_LOCK = ".series.lock"  # held by a run picking or creating its journal (never a *.journal)
CREATING = ".tmp"  # a journal being created: ".<run_id>.journal.tmp" until its header is written

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
    except RecursionError:
        raise CorruptRecord("not a record: nested too deep") from None
    if not isinstance(record, dict):
        raise CorruptRecord("not a JSON object")
    return record


# What a journaled turn holds: a transcript row's lane columns, and no other; a journal written
# before a column existed lacks it (read as null).
ADDED_COLUMNS = ("finish_reason",)
TRANSCRIPT_ROW = row_shape(TRANSCRIPTS, lane_columns(TRANSCRIPTS), only=True, optional=ADDED_COLUMNS)


def session_misfit(record: Mapping[str, Any]) -> str | None:
    """Why a session record does not fit its schema (None: it does): ``session`` text,
    ``sample_index`` a whole number, ``rows`` a list of transcript rows (every lane column and
    no other, each of its type, an answered turn with its surface)."""
    key, sample, rows = record.get("session"), record.get("sample_index"), record.get("rows")
    if not isinstance(key, str) or isinstance(sample, bool) or not isinstance(sample, int):
        return "not a session record (session, sample_index, rows)"
    if not isinstance(rows, list):
        return "its rows are not a list of turns"
    for number, row in enumerate(rows, start=1):
        problem = TRANSCRIPT_ROW.misfit(row)
        if problem is None and row["error"] is None and row["surface"] is None:
            problem = "an answered turn has no surface"
        if problem is not None:
            return f"turn {number}: {problem}"
    return None


class JournalSessions(Mapping[tuple[str, int], SessionRows]):
    """The sessions a journal holds, by (session, sample): where each one's record lies in the
    file, read (its checksum checked again) when asked, so a big journal is never held in memory."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._where: dict[tuple[str, int], tuple[int, int]] = {}  # (offset, length) of the line

    def __getitem__(self, key: tuple[str, int]) -> SessionRows:
        return self._read(*self._where[key])

    def __iter__(self) -> Iterator[tuple[str, int]]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)

    def locate(self, key: tuple[str, int], offset: int, length: int) -> None:
        self._where[key] = (offset, length)

    def pop(self, key: tuple[str, int]) -> SessionRows | None:
        """The rows of ``key``, no longer held (None: not held); CorruptRecord when its line no
        longer checks. Safe from several threads, each popping its own session."""
        where = self._where.pop(key, None)
        return None if where is None else self._read(*where)

    def _read(self, offset: int, length: int) -> SessionRows:
        """The rows of the record at ``offset``: it fit its schema when it was indexed, and its
        checksum says it is the same line."""
        with self.path.open("rb") as handle:
            handle.seek(offset)
            record = decode_record(handle.read(length))
        rows: SessionRows = record["rows"]
        return rows


@dataclass
class JournalContents:
    """What a journal file holds that checks: its identity, the sessions' rows by (session, sample)."""

    identity: JournalIdentity | None
    sessions: JournalSessions
    warnings: list[str] = field(default_factory=list)
    good_end: int = 0  # the byte offset after the last whole line (a torn tail starts here)


def read_journal(path: Path) -> JournalContents:
    """The records of ``path`` that check, read a line at a time; each line that does not is a
    warning (``file:line``)."""
    contents = JournalContents(identity=None, sessions=JournalSessions(path))
    offset = 0
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            torn = not line.endswith(b"\n")  # the last piece, with no newline: written in part
            try:
                if torn:
                    raise CorruptRecord("the line was cut off (written in part)")
                _take(contents, decode_record(line[:-1]), offset, len(line) - 1)
            except CorruptRecord as exc:
                contents.warnings.append(f"{path}:{number}: skipped, its session is sent again: {exc}")
            offset += len(line)
            if not torn:
                contents.good_end = offset
    return contents


def _take(contents: JournalContents, record: dict[str, Any], offset: int, length: int) -> None:
    if "identity" in record:
        if contents.identity is not None or record.get("journal") != FORMAT_VERSION:
            raise CorruptRecord("a second header, or a header of another journal format")
        fields = record["identity"]
        try:
            identity = JournalIdentity(**fields)
        except TypeError as exc:
            raise CorruptRecord(f"not a journal header: {exc}") from None
        misfit = next(
            (name for name, value in asdict(identity).items() if not _fits_identity(name, value)), None
        )
        if misfit is not None:
            raise CorruptRecord(f"not a journal header: {misfit} is {fields[misfit]!r}")
        contents.identity = identity
        return
    problem = session_misfit(record)
    if problem is not None:
        raise CorruptRecord(problem)
    if contents.identity is None:
        raise CorruptRecord("a session record before the journal's header")
    contents.sessions.locate((record["session"], record["sample_index"]), offset, length)


def _fits_identity(name: str, value: Any) -> bool:
    """Whether a header's field holds what :class:`JournalIdentity` says it does."""
    if name in ("runtime_version", "seed") and value is None:
        return True
    if name in ("samples", "seed"):
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, str)


class JournalWriter:
    """Appends records to an open, locked journal file. Each record is handed to the file as it
    is appended (a killed process loses none of them); a background thread fsyncs at least
    every :data:`FSYNC_EVERY_S` (what a power cut may lose). :meth:`close` fsyncs the rest."""

    def __init__(self, path: Path, handle: int) -> None:
        self.path = path
        self._handle = handle
        self._unsynced = False
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._syncer = threading.Thread(target=self._sync_loop, name="eval-journal", daemon=True)
        self._syncer.start()

    def append(self, record: Mapping[str, Any]) -> None:
        line = encode_record(record)
        with self._lock:
            if self._closing.is_set():  # its descriptor may already name another file
                raise RuntimeError(f"{self.path}: the journal is closed")
            _write_all(self._handle, line)
            self._unsynced = True

    def append_session(self, key: str, sample_index: int, rows: SessionRows) -> None:
        self.append({"session": key, "sample_index": sample_index, "rows": rows})

    def _sync(self) -> None:
        with self._lock:
            unsynced, self._unsynced = self._unsynced, False
        if unsynced:
            os.fsync(self._handle)

    def _sync_loop(self) -> None:
        while not self._closing.wait(FSYNC_EVERY_S):
            self._sync()

    def close(self) -> None:
        """Fsync what is written, then release the file (and its lock)."""
        with self._lock:
            if self._closing.is_set():
                return
            self._closing.set()
        self._syncer.join()
        try:
            self._sync()
        finally:
            os.close(self._handle)


def _write_all(handle: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(handle, view) :]


def series_folder(root: Path, lane: str, case_set: str, runtime: str) -> Path:
    return root / lane / case_set / runtime


def journal_path(root: Path, lane: str, case_set: str, runtime: str, run_id: str) -> Path:
    return series_folder(root, lane, case_set, runtime) / f"{run_id}{SUFFIX}"


def _locked(path: Path) -> int | None:
    """``path`` (which exists) opened for appending with an exclusive lock taken, or None: a
    live run holds it. FileNotFoundError when it is gone."""
    handle = os.open(path, os.O_RDWR | os.O_APPEND)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(handle)
        return None
    return handle


@contextmanager
def _series_locked(folder: Path) -> Iterator[None]:
    """Hold the series' lock while a run picks or creates its journal, or removes journals: a
    second run of the series waits the moment that takes, then sees what the first did."""
    folder.mkdir(parents=True, exist_ok=True)
    handle = os.open(folder / SERIES_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)


def _modified(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return 0.0


@dataclass
class SeriesJournals:
    """A series' journals, newest first: those no live run holds (opened and locked), and those a live run holds."""

    unlocked: list[tuple[Path, int]]
    live: list[Path]

    def close(self) -> None:
        for _, handle in self.unlocked:
            os.close(handle)


def _series_journals(folder: Path) -> SeriesJournals:
    """The series' journals (call it holding the series' lock): regular files only, never a
    folder, link or pipe that happens to bear the name."""
    found = SeriesJournals([], [])
    for path in sorted(folder.glob(f"*{SUFFIX}"), key=_modified, reverse=True):
        try:
            if not stat.S_ISREG(path.lstat().st_mode):
                continue
            handle = _locked(path)
        except FileNotFoundError:
            continue
        if handle is None:
            found.live.append(path)
        else:
            found.unlocked.append((path, handle))
    return found


@dataclass
class OpenedJournal:
    """A run's journal, open for appending, and what it was resumed with."""

    writer: JournalWriter
    answered: JournalSessions
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
    series' newest journal (the parent run's first, for a re-execution) is taken over: renamed
    to this run's, its torn tail cut off, its sessions the answers; none there starts a fresh
    journal and says so. A file with no header (an empty one left by a run killed as it
    created it is removed) is skipped with a warning for the next one.

    Refused (RuntimeSpecError; nothing is taken over): a journal of another identity (saying
    what differs); any journal of the series while a live run holds one (a second ``--resume``
    of it, or a run under way: resuming waits for it to end); a journal whose run
    ``is_committed`` to history (a kill between the commit and the journal's removal): its
    answers are a committed run's, so it is removed, with the older journals the commit would
    have removed."""
    folder = series_folder(root, identity.lane, identity.case_set, identity.runtime)
    target = journal_path(root, identity.lane, identity.case_set, identity.runtime, run_id)
    with _series_locked(folder):
        warnings: list[str] = []
        if resume:
            found = _series_journals(folder)
            if found.live:
                found.close()
                raise RuntimeSpecError(
                    f"{found.live[0]}: a live run of this series holds this journal (another --resume of "
                    "it, or a run under way); --resume takes a journal over only once its run has ended: "
                    "wait for that run, then resume if it was interrupted"
                )
            candidates = found.unlocked
            if parent_run_id is not None:  # the parent's own journal first
                candidates.sort(key=lambda candidate: candidate[0].stem != parent_run_id)
            opened = _resume_from(candidates, target, identity, is_committed, warnings)
            if opened is not None:
                return opened
        handle = _created(target, identity)
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
    return OpenedJournal(JournalWriter(target, handle), JournalSessions(target), note, warnings)


def _created(target: Path, identity: JournalIdentity) -> int:
    """A fresh journal at ``target``, its header written, opened and locked. It is written under
    a temporary name and renamed into place, so no journal is ever seen without its header."""
    try:
        existing = _locked(target)
    except FileNotFoundError:
        existing = -1
    if existing is None:
        raise RuntimeSpecError(f"{target}: another live run holds this journal")
    temp = target.with_name(f".{target.name}{CREATING}")
    handle = os.open(temp, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        _write_all(handle, encode_record({"journal": FORMAT_VERSION, "identity": asdict(identity)}))
        os.rename(temp, target)  # over a dead run's journal of this id, if there was one
    except BaseException:
        os.close(handle)
        temp.unlink(missing_ok=True)
        raise
    finally:
        if existing >= 0:
            os.close(existing)
    return handle


def _resume_from(
    candidates: list[tuple[Path, int]],
    target: Path,
    identity: JournalIdentity,
    is_committed: Callable[[str], bool],
    warnings: list[str],
) -> OpenedJournal | None:
    """Take over the first candidate with a header (closing the others); None when none has
    one. Headerless ones are skipped with a warning each in ``warnings``."""
    remaining = list(candidates)  # those still open, this function's to close
    try:
        while remaining:
            path, handle = remaining[0]
            if is_committed(path.stem):
                committed, remaining = remaining, []
                _refuse_committed(committed)
            contents = read_journal(path)
            if contents.identity is not None:
                others, remaining = remaining[1:], []
                for _, other in others:
                    os.close(other)
                return _take_over(path, handle, contents, target, identity, warnings)
            remaining.pop(0)
            os.close(handle)
            if path.stat().st_size == 0:
                path.unlink()  # what a run killed as it created its journal left
                warnings.append(f"{path}: an empty journal (its run was stopped as it began): removed")
            else:
                warnings.append(f"{path}: skipped: not a journal (no header that checks); remove it")
        return None
    finally:
        for _, handle in remaining:
            os.close(handle)


def _refuse_committed(candidates: Sequence[tuple[Path, int]]) -> None:
    """Remove the first candidate, whose run is committed, and every one no newer (what its
    commit would have removed; each is opened and locked), then refuse to resume."""
    committed = candidates[0][0]
    committed_mtime = _modified(committed)
    removed = 0
    for path, handle in candidates:
        try:
            if _modified(path) <= committed_mtime:
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


def _take_over(
    path: Path,
    handle: int,
    contents: JournalContents,
    target: Path,
    identity: JournalIdentity,
    warnings: list[str],
) -> OpenedJournal:
    """``path`` (opened and locked as ``handle``, read as ``contents``) renamed to ``target`` and
    its sessions the answers, when it is a journal of ``identity``."""
    try:
        assert contents.identity is not None
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
            contents.sessions.path = target
    except BaseException:
        os.close(handle)
        raise
    return OpenedJournal(
        JournalWriter(target, handle), contents.sessions, "", [*warnings, *contents.warnings], path
    )


def remove_journals(root: Path, lane: str, case_set: str, runtime: str) -> list[Path]:
    """Remove the series' journals no live run holds (its run is committed: nothing to resume)."""
    folder = series_folder(root, lane, case_set, runtime)
    if not folder.is_dir():
        return []
    with _series_locked(folder):
        found = _series_journals(folder)
        try:
            for path, _ in found.unlocked:
                path.unlink(missing_ok=True)
        finally:
            found.close()
        for creating in folder.glob(f".*{SUFFIX}{CREATING}"):  # a run killed as it created its journal
            handle = _locked(creating)
            if handle is not None:
                creating.unlink(missing_ok=True)
                os.close(handle)
    return [path for path, _ in found.unlocked]


def session_turns(rows: Sequence[Mapping[str, Any]]) -> list[tuple[Any, Any, Any]]:
    """What identifies a session's turns: (case_id, turn_index, prompt) of each row, in order."""
    return [(row.get("case_id"), row.get("turn_index"), row.get("prompt")) for row in rows]
