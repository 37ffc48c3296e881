"""``run --runtime history:RUN_ID``: which lane, split and target a re-score of a recorded run is."""

from __future__ import annotations

from dataclasses import replace

from eval_pipeline.runtimes.base import CommittedRun
from eval_pipeline.runtimes.registry import split_spec
from eval_pipeline.runtimes.targets import HISTORY_SCHEME, RuntimeTarget, rescore_name


def with_history_root(target: RuntimeTarget, history_root: str | None) -> RuntimeTarget:
    """A ``history:`` target reads the run from ``--history`` when given (and no ``root`` option
    says otherwise); any other target is returned as it is."""
    if not history_root or split_spec(target.spec)[0] != HISTORY_SCHEME or "root" in target.options:
        return target
    return replace(target, options={**target.options, "root": history_root})


def rescore_of(recorded: CommittedRun, target: RuntimeTarget) -> RuntimeTarget:
    """The re-score's target: the full run id in its spec and name (a prefix given on the
    command line names the same series), and the history root it was read from."""
    return RuntimeTarget(
        rescore_name(recorded.run_id), f"{HISTORY_SCHEME}:{recorded.run_id}", dict(target.options)
    )


def recorded_lane_and_split(
    recorded: CommittedRun,
    lanes: list[str] | None,
    split: str | None,
    repeat: int | None,
    *,
    samples_per_case: int,
) -> tuple[list[str], str]:
    """The recorded run's lane and split; naming another one, or a repeat (the recording plays
    its ``samples_per_case``), is bad input."""
    if lanes and list(dict.fromkeys(lanes)) != [recorded.lane]:
        raise KeyError(
            f"history:{recorded.run_id[:8]} is a run of lane {recorded.lane!r}: it re-scores only that lane"
        )
    if split is not None and split != recorded.split:
        raise KeyError(f"history:{recorded.run_id[:8]} ran split {recorded.split!r}, not {split!r}")
    if repeat is not None:
        raise KeyError(
            f"--repeat: a re-score replays the {samples_per_case} sample(s) per case the run recorded"
        )
    return [recorded.lane], recorded.split
