"""The partition definitions every lane asset, check, job, schedule and test shares.

A lane's assets are partitioned by **case set** × **runtime**: one partition is one series
(the split's own case files, or a custom case file, evaluated against one runtime target),
and each night's run is a new materialization of it. So a series has one materialization
history, one line per metric, one check history; two runtimes never share a partition; and
the partitions view shows only series that exist. The night a run belongs to is not a
dimension: an evaluation measures a runtime *now*, it does not process a window of dated
data, so the date travels as a run tag and a history column instead.

Both dimensions are dynamic: case sets per lane (``<lane>__case_sets``: its split names, plus
``custom-<hash>`` keys added by ``--cases`` runs), runtime targets shared by every lane
(``runtime_targets``: the declared targets, plus derived names added by ad-hoc runs).
:func:`register_series` adds the keys a run needs before it starts.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg

from eval_pipeline.core import content_sha256
from eval_pipeline.lanes import LaneSpec

CASE_SET = "case_set"
RUNTIME = "runtime"
RUNTIME_TARGETS = "runtime_targets"
CUSTOM_PREFIX = "custom-"

runtime_targets = dg.DynamicPartitionsDefinition(name=RUNTIME_TARGETS)


def case_sets_name(lane: str) -> str:
    return f"{lane}__case_sets"


def lane_partitions(spec: LaneSpec) -> dg.MultiPartitionsDefinition:
    return dg.MultiPartitionsDefinition(
        {
            CASE_SET: dg.DynamicPartitionsDefinition(name=case_sets_name(spec.name)),
            RUNTIME: runtime_targets,
        }
    )


def partition_key(case_set: str, runtime: str) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({CASE_SET: case_set, RUNTIME: runtime})


def custom_case_set(cases_path: str | Path) -> str:
    """The case-set key of a custom case file: ``custom-`` and 12 hex of its content hash."""
    return f"{CUSTOM_PREFIX}{content_sha256([Path(cases_path)])[:12]}"


def series_of(key: str | dg.MultiPartitionKey) -> tuple[str, str]:
    """(case_set, runtime) of a lane partition key, whichever form Dagster hands us."""
    if not isinstance(key, dg.MultiPartitionKey):
        parts = dict(zip(sorted([CASE_SET, RUNTIME]), str(key).split("|"), strict=True))
        return parts[CASE_SET], parts[RUNTIME]
    dims = key.keys_by_dimension
    return dims[CASE_SET], dims[RUNTIME]


def register_series(
    instance: dg.DagsterInstance, lane: str, case_sets: Iterable[str], runtimes: Iterable[str]
) -> None:
    """Add the partition keys a run needs (adding an existing key is a no-op)."""
    for name, keys in ((case_sets_name(lane), case_sets), (RUNTIME_TARGETS, runtimes)):
        missing = [k for k in dict.fromkeys(keys) if not instance.has_dynamic_partition(name, k)]
        if missing:
            instance.add_dynamic_partitions(name, missing)


@contextmanager
def partitions_remembered(instance: dg.DagsterInstance) -> Iterator[None]:
    """Within the block, a dynamic partition key ``instance`` once said exists is taken to exist.

    A run asks whether its own partition keys exist several times per step (every input and
    output resolves its key range), and each answer is a query of its own to the instance's
    storage: a small lane run would spend much of its time asking. A run's keys are registered
    before it starts and nothing in it deletes them, so within the run a yes stays a yes; a no
    is asked again. The instance is this process's own object: the answers are remembered on it, for
    the block only."""
    asked = instance.has_dynamic_partition
    known: set[tuple[str, str]] = set()

    def has_dynamic_partition(partitions_def_name: str, partition_key: str) -> bool:
        if (partitions_def_name, partition_key) in known:
            return True
        found = asked(partitions_def_name, partition_key)
        if found:
            known.add((partitions_def_name, partition_key))
        return found

    # Dagster has no public way to cache a run's dynamic-partition lookups: shadow the method.
    setattr(instance, "has_dynamic_partition", has_dynamic_partition)  # noqa: B010
    try:
        yield
    finally:
        delattr(instance, "has_dynamic_partition")
