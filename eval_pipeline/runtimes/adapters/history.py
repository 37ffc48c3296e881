"""``history:RUN_ID``: re-score a committed run's recorded transcripts without calling any runtime.

RUN_ID is a run id or any unique prefix of one. The run's transcripts are read from history
(``root`` option, else the history root) and replayed through :mod:`replay`, every sample of
every case, each answer with the seed it was produced with, so the tables a lane computes
from them are the run's own under today's predicates and contract. The re-score is a series
of its own: target ``rescore-of-<run id>`` (see :func:`eval_pipeline.runtimes.targets.rescore_name`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from eval_pipeline.runtimes.adapters.replay import (
    RecordedTurn,
    ReplayRuntime,
    recorded_turns,
    rows_to_turns,
    typed_recording,
)
from eval_pipeline.runtimes.base import CommittedRun, RuntimeSpecError
from eval_pipeline.runtimes.options import validate_options
from eval_pipeline.runtimes.registry import register_runtime

RECORDED_FIELDS = frozenset(RecordedTurn.model_fields)


class HistoryOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    root: str = ""  # the history root (folder or fsspec URL); empty: the configured one


def read_recorded_run(root: str, run_id_or_prefix: str) -> ReplayRuntime:
    """The transcripts of the committed run ``run_id_or_prefix`` names, as a recording that
    declares that run (RuntimeSpecError when there is no such run, several match, or it kept no
    transcripts)."""
    from eval_pipeline.history import connect
    from eval_pipeline.history.runs import resolve_run_id

    con = connect(root)
    try:
        run_id = resolve_run_id(con, run_id_or_prefix)
    except KeyError as exc:
        raise RuntimeSpecError(f"history:{run_id_or_prefix}: {exc.args[0]} (history root {root})") from None
    runs = con.execute("SELECT lane, split FROM runs WHERE run_id = ?", [run_id]).fetchall()
    kept = con.sql("SELECT * FROM transcripts WHERE run_id = ?", params=[run_id]).to_arrow_table()
    if not kept.num_rows:
        raise RuntimeSpecError(
            f"history:{run_id_or_prefix}: run {run_id} kept no transcripts (the history resource's "
            "keep_transcripts was off), so it cannot be re-scored"
        )
    name = f"history run {run_id}"
    recording = typed_recording(kept)
    if recording is None:  # rows validated one by one: each problem named at its row
        rows = kept.to_pylist()
        recorded = [{k: v for k, v in row.items() if k in RECORDED_FIELDS and v is not None} for row in rows]
        recording = recorded_turns(name, *rows_to_turns(name, recorded))
    lane, split = runs[0]
    return ReplayRuntime(
        name, recording, spec=f"history:{run_id}", committed_run=CommittedRun(run_id, lane, split)
    )


@register_runtime("history", HistoryOptions)
def history_runtime(argument: str, options: Mapping[str, Any]) -> ReplayRuntime:
    if not argument.strip():
        raise RuntimeSpecError(
            "history needs a run: history:RUN_ID (any unique prefix of a committed run id)"
        )
    config = validate_options("history", HistoryOptions, options)
    from eval_pipeline.core.settings import history_root

    return read_recorded_run(config.root or history_root(), argument.strip())
