"""What every page's data shares: the not-found error, verdict words, paging, cell values, and
how a page shows a long text (:class:`Preview`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

import duckdb

from eval_pipeline.history.runs import RunRef, find_runs, is_missing, stored_runtimes
from eval_pipeline.metrics import VERDICT_ORDER, worst_verdict
from eval_pipeline.runtimes.names import decoded_runtimes
from eval_pipeline.viewer.links import TextRef

# Of a transcript text (a surface, a prompt) a page shows this many characters; the rest is a
# link away (the text route serves it whole), so a page stays small whatever a runtime answered.
PREVIEW_CHARS = 4_000


class NotFound(LookupError):
    """What a page names is not in history; the message says what."""


def lane_runs(con: duckdb.DuckDBPyConnection, run_id: str) -> list[RunRef]:
    """Every lane run under ``run_id`` or a unique prefix of it; :class:`NotFound` otherwise."""
    try:
        return find_runs(con, run_id)
    except KeyError as exc:
        raise NotFound(str(exc.args[0]) if exc.args else f"no run {run_id!r} in history") from None


def worst(verdicts: list[str]) -> str:
    """The verdict of several (:func:`eval_pipeline.outcome.run_outcome.worst_verdict`); n/a when none says one."""
    return worst_verdict(verdicts) if set(verdicts) & set(VERDICT_ORDER) else "n/a"


def words(value: object) -> list[str]:
    if value is None or (not isinstance(value, (list, tuple)) and is_missing(value)):
        return []
    return [str(v) for v in value if v is not None]  # type: ignore[attr-defined]


def page_count(rows: int, per_page: int) -> int:
    """Pages of ``per_page`` rows that ``rows`` fill (at least one)."""
    return max(1, -(-rows // per_page))


def float_or_none(value: object) -> float | None:
    return None if is_missing(value) else float(value)  # type: ignore[arg-type]


def day_text(value: date | None) -> str:
    return "?" if value is None else value.isoformat()


def runtime_specs(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """Each runtime target's spec, as its latest committed run stored it (redacted: never a
    secret); a derived name (``reference-53347daa``) says nothing without it, so it is decoded
    (:func:`eval_pipeline.runtimes.names.decoded_runtimes`: its spec and options)."""
    stored = stored_runtimes(con)
    decoded = decoded_runtimes(stored)
    return {name: decoded.get(name, str(spec)) for name, spec, _ in stored}


def decoded_names(con: duckdb.DuckDBPyConnection, names: list[str]) -> dict[str, str]:
    """What those of ``names`` that are derived stand for (their spec and options, as history
    stored them), by name: what ``show``, ``diff`` and ``compare`` print beside them."""
    return decoded_runtimes(stored_runtimes(con, sorted(set(names)))) if names else {}


@dataclass(frozen=True)
class Preview:
    """A transcript text as a page shows it: its first :data:`PREVIEW_CHARS` characters
    (``shown``), how many characters it has in all, and where it is whole (None: the page links
    to no single text)."""

    shown: str
    length: int
    whole: TextRef | None = None

    @property
    def more(self) -> int:
        """The characters the page leaves out."""
        return max(0, self.length - len(self.shown))

    @classmethod
    def of(cls, text: str, whole: TextRef | None = None) -> Preview:
        """The preview of a text already read whole."""
        return cls(text[:PREVIEW_CHARS], len(text), whole)


def preview_sql(text: str) -> str:
    """SQL of two columns: the first :data:`PREVIEW_CHARS` characters of the text expression
    ``text`` and its length in characters (what :func:`preview` takes), so a page never reads
    a long text whole."""
    return f"left({text}, {PREVIEW_CHARS}), length({text})"


def preview(shown: object, length: object, whole: TextRef | None = None) -> Preview | None:
    """A :class:`Preview` from the two columns of :func:`preview_sql`; None for a NULL text."""
    if shown is None or is_missing(shown):
        return None
    return Preview(str(shown), int(length), whole)  # type: ignore[call-overload]
