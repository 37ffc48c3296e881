"""Two runtimes side by side: the latest committed run of each one's series in a lane.

Both runs are of the same lane, split and case set; only the runtime target differs. The
comparison itself (paired figures per metric, the flipped cases) is
:func:`eval_pipeline.history.comparison.compare_runs`; this module picks the two runs.

Which series: ``split`` defaults to the only split both runtimes ran; ``case_set`` to the
split's own cases when both have them, else to the only case set both have. Anything
ambiguous or unknown is a ``KeyError`` whose message names what history holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import duckdb
import pandas as pd

from eval_pipeline.history.comparison import RunComparison, compare_runs
from eval_pipeline.history.runs import RunRef, latest_runs, ref_from_row
from eval_pipeline.lanes.metric_rows import MetricRows
from eval_pipeline.metrics import ALPHA


def compare_runtimes(
    con: duckdb.DuckDBPyConnection,
    *,
    lane: str,
    runtimes: Sequence[str],
    metric_rows: Mapping[str, MetricRows],
    split: str | None = None,
    case_set: str | None = None,
    alpha: float = ALPHA,
) -> RunComparison:
    """The latest runs of ``runtimes[0]`` and ``runtimes[1]`` in one series of ``lane``, compared
    (:func:`eval_pipeline.history.comparison.compare_runs`)."""
    a, b = latest_pair(con, lane=lane, runtimes=runtimes, split=split, case_set=case_set)
    return compare_runs(con, a, b, metric_rows, alpha=alpha)


def latest_pair(
    con: duckdb.DuckDBPyConnection,
    *,
    lane: str,
    runtimes: Sequence[str],
    split: str | None = None,
    case_set: str | None = None,
) -> tuple[RunRef, RunRef]:
    """The latest committed run of each runtime's series (see the module docstring)."""
    if len(runtimes) != 2 or runtimes[0] == runtimes[1]:
        raise KeyError(
            "give two different runtimes (--runtime A --runtime B) or two runs (--run A --run B); "
            f"got runtimes {list(runtimes)}"
        )
    latest = latest_runs(con, lane=lane, last=1)
    if latest.empty:
        lanes = [row[0] for row in con.execute("SELECT DISTINCT lane FROM runs ORDER BY 1").fetchall()]
        raise KeyError(f"no committed runs of lane {lane!r} in history; lanes with runs: {_names(lanes)}")
    known = sorted(set(latest["runtime"]))
    for runtime in runtimes:
        if runtime not in known:
            raise KeyError(
                f"lane {lane!r} has no runs of runtime {runtime!r}; runtimes with runs: {_names(known)}"
            )
    first, second = (latest[latest["runtime"] == r] for r in runtimes)
    split = _choose("split", split, first, second, runtimes, preferred=None, scope=f"lane {lane!r}")
    first, second = first[first["split"] == split], second[second["split"] == split]
    scope = f"lane {lane!r}, split {split!r}"
    case_set = _choose("case_set", case_set, first, second, runtimes, preferred=split, scope=scope)
    a = first[first["case_set"] == case_set].iloc[0]
    b = second[second["case_set"] == case_set].iloc[0]
    return ref_from_row(a), ref_from_row(b)


def _choose(
    column: str,
    given: str | None,
    runs_a: pd.DataFrame,
    runs_b: pd.DataFrame,
    runtimes: Sequence[str],
    *,
    preferred: str | None,
    scope: str,
) -> str:
    """The value of ``column`` both runtimes' runs have: ``given``, else ``preferred`` or the
    only one in common."""
    of_a, of_b = sorted(set(runs_a[column])), sorted(set(runs_b[column]))
    common = sorted(set(of_a) & set(of_b))
    holdings = f"{runtimes[0]!r} has {_names(of_a)}, {runtimes[1]!r} has {_names(of_b)}"
    what = column.replace("_", " ")
    option = "--" + column.replace("_", "-")
    if given is not None:
        if given not in common:
            raise KeyError(f"{scope}: not both runtimes ran {what} {given!r}: {holdings}")
        return given
    if preferred in common:
        return str(preferred)
    if len(common) == 1:
        return common[0]
    if not common:
        raise KeyError(f"{scope}: the runtimes share no {what}: {holdings}")
    raise KeyError(f"{scope}: the runtimes share several {what}s, give {option}: one of {_names(common)}")


def _names(values: Sequence[str]) -> str:
    return ", ".join(values) if values else "none"
