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

One file per entry (``<state>/response_cache/<runtime version>/<2 hex>/<key>.json``), written
to a temporary file and renamed into place, so concurrent runs (threads or processes) never see
half an entry and two writers of one key leave one whole file. An entry that is truncated or
corrupt (a kill mid-write on a filesystem that does not order the rename, a hand edit) fails
its checksum or its request check, is skipped with a warning and sent again, and the fresh
answer replaces it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval_pipeline.settings import state_dir

LOG = logging.getLogger(__name__)
CACHE_FOLDER = "response_cache"
ENTRY_FORMAT = 1
ENTRY_SUFFIX = ".json"

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
        canonical = json.dumps(
            [self.runtime_version, self.session, self.sample_index, self.seed, self.turns],
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


class ResponseCache:
    """The cache entries of one runtime version; safe to share between threads."""

    def __init__(self, runtime_version: str, root: Path | None = None) -> None:
        self.runtime_version = runtime_version
        self.folder = (root or cache_root()) / runtime_version
        self._lock = threading.Lock()
        self._counts = CacheCounts()

    @property
    def counts(self) -> CacheCounts:
        with self._lock:
            return self._counts

    def _count(self, **added: int) -> None:
        with self._lock:
            current = self._counts
            self._counts = CacheCounts(**{k: getattr(current, k) + added.get(k, 0) for k in vars(current)})

    def request(
        self, session: str, sample_index: int, seed: int | None, turns: Sequence[tuple[str, int, str, str]]
    ) -> SessionRequest:
        return SessionRequest(self.runtime_version, session, sample_index, seed, tuple(turns))

    def path_of(self, request: SessionRequest) -> Path:
        key = request.key
        return self.folder / key[:2] / f"{key}{ENTRY_SUFFIX}"

    def answers(self, request: SessionRequest) -> list[dict[str, Any]] | None:
        """The stored answers of ``request``'s turns (one dict of :data:`ANSWER_FIELDS` each, in
        order), or None: not stored, or stored corrupt (skipped with a warning)."""
        path = self.path_of(request)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            self._count(misses=1)
            return None
        except OSError as exc:
            self._skip(path, f"cannot read it: {exc.strerror or exc}")
            return None
        try:
            answers = entry_answers(data, request)
        except CorruptEntry as exc:
            self._skip(path, str(exc))
            return None
        self._count(hits=1)
        return answers

    def _skip(self, path: Path, reason: str) -> None:
        LOG.warning("response cache: skipping entry %s (%s); the session is sent again", path, reason)
        self._count(misses=1, skipped=1)
        return None

    def store(self, request: SessionRequest, rows: Sequence[Mapping[str, Any]]) -> None:
        """Keep the answers of ``rows`` (one per turn of ``request``, every one answered)."""
        path = self.path_of(request)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            temporary.write_bytes(entry_bytes(request, rows))
            os.replace(temporary, path)  # atomic: a reader sees the old entry or the new one, whole
        finally:
            temporary.unlink(missing_ok=True)
        self._count(stored=1)


def target_cache(spec: str, options: Mapping[str, Any], root: Path | None = None) -> ResponseCache:
    """The cache of the runtime version ``spec`` with ``options`` has now (RuntimeSpecError when
    it cannot be determined: then nothing could be told apart from an older version)."""
    from eval_pipeline.runtimes.versions import runtime_version

    return ResponseCache(runtime_version(spec, options).digest, root)


def entry_bytes(request: SessionRequest, rows: Sequence[Mapping[str, Any]]) -> bytes:
    """The file of one entry: the key, each turn's request and answer, and their checksum."""
    turns = [
        {**dict(zip(REQUEST_FIELDS, asked, strict=True)), **{name: row.get(name) for name in ANSWER_FIELDS}}
        for asked, row in zip(request.turns, rows, strict=True)
    ]
    return json.dumps(
        {"format": ENTRY_FORMAT, "key": request.key, "turns": turns, "sha256": _checksum(turns)},
        ensure_ascii=False,
        sort_keys=True,
    ).encode("utf-8")


def entry_answers(data: bytes, request: SessionRequest) -> list[dict[str, Any]]:
    """The answers an entry's bytes hold for ``request``; CorruptEntry when they are not whole
    (truncated, edited) or answer another request."""
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise CorruptEntry(f"not a whole JSON document: {exc}") from None
    if not isinstance(document, dict) or document.get("format") != ENTRY_FORMAT:
        raise CorruptEntry(f"not a cache entry of format {ENTRY_FORMAT}")
    turns = document.get("turns")
    if not isinstance(turns, list) or document.get("sha256") != _checksum(turns):
        raise CorruptEntry("its checksum does not match its turns")
    if document.get("key") != request.key:
        raise CorruptEntry("it is stored under a key that is not its own")
    if len(turns) != len(request.turns) or any(
        not isinstance(turn, dict) or tuple(turn.get(name) for name in REQUEST_FIELDS) != asked
        for turn, asked in zip(turns, request.turns, strict=False)
    ):
        raise CorruptEntry("its turns are not the request's")
    return [{name: turn.get(name) for name in ANSWER_FIELDS} for turn in turns]


def _checksum(turns: Any) -> str:
    canonical = json.dumps(turns, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class VersionUsage:
    """The entries kept for one runtime version, and their bytes on disk."""

    runtime_version: str
    entries: int
    bytes: int


def _entries(folder: Path) -> Iterator[Path]:
    return (path for path in folder.glob(f"*/*{ENTRY_SUFFIX}") if not path.name.startswith("."))


def cache_usage(root: Path | None = None) -> list[VersionUsage]:
    """Every runtime version with entries in the cache, by name."""
    base = root or cache_root()
    if not base.is_dir():
        return []
    usage = []
    for folder in sorted(p for p in base.iterdir() if p.is_dir()):
        sizes = [path.stat().st_size for path in _entries(folder)]
        usage.append(VersionUsage(folder.name, len(sizes), sum(sizes)))
    return usage


def clear_cache(root: Path | None = None) -> int:
    """Remove every entry; the number of entries removed."""
    base = root or cache_root()
    removed = sum(usage.entries for usage in cache_usage(base))
    if base.is_dir():
        for folder in (p for p in base.iterdir() if p.is_dir()):
            shutil.rmtree(folder, ignore_errors=True)
    return removed
