"""A framework lane's runtime and transcripts step: its runtime is the checkout's version
(``<name>-<12 hex of its commit>``, :mod:`eval_pipeline.frameworks.checkout`), never a target
of ``evals/runtimes.yaml``; its transcripts are one run of its upstream runner
(:func:`eval_pipeline.run.run_framework`), with no chat runtime, journal or budget."""

# No `from __future__ import annotations`: Dagster reads the asset's parameter annotations.
from typing import Any

import dagster as dg

from eval_pipeline.dagster_wiring.partitions import series_of
from eval_pipeline.dagster_wiring.resources import RunRuntime
from eval_pipeline.frameworks.checkout import checkout_version, runtime_key, runtime_spec
from eval_pipeline.lanes import LaneSpec
from eval_pipeline.run import run_framework, runner_metadata
from eval_pipeline.runtimes import RuntimeSpecError
from eval_pipeline.runtimes.targets import RuntimeTarget
from eval_pipeline.tables import StageFile, faulted


def framework_target(spec: LaneSpec) -> RuntimeTarget:
    """The runtime a framework lane runs against now: its checkout at its current version
    (RuntimeSpecError when the checkout cannot be found)."""
    assert spec.runner is not None
    try:
        checkout = spec.runner.checkout_path(spec.folder)
    except ValueError as exc:
        raise RuntimeSpecError(f"lane {spec.name!r}: {exc}") from None
    if not checkout.is_dir():
        raise RuntimeSpecError(f"lane {spec.name!r}: its checkout {checkout} is not a folder")
    version = checkout_version(checkout)
    return RuntimeTarget(
        runtime_key(spec.runner, version),
        runtime_spec(spec.runner, version),
        declared=True,
        description=f"{spec.runner.name} at {version}",
    )


def lane_target(spec: LaneSpec, runtime: RunRuntime, name: str) -> RuntimeTarget:
    """The target of a lane run's runtime key ``name``: a chat lane's from the run's runtime, a
    framework lane's from its checkout, which must still be at the version the key names."""
    if spec.runner is None:
        return runtime.target(name)
    target = framework_target(spec)
    if target.name != name:
        raise RuntimeSpecError(
            f"lane {spec.name!r}: its checkout is now {target.name}, but this partition is runtime {name!r}; "
            f"a framework lane runs its checkout's current version: pick partition {target.name!r}"
        )
    return target


def framework_transcripts_asset(
    spec: LaneSpec, ins: dict[str, dg.AssetIn], common: dict[str, Any], columns: dg.TableSchema
) -> Any:
    """The transcripts asset of a framework lane: one run of its runner over the cases
    (``columns``: the transcripts' column schema, shown in the UI)."""

    @dg.asset(
        name="transcripts",
        description="One run of the upstream runner over the cases: a row per case (its detail in raw), "
        "a row per turn of a detail's turn list; a failed runner's reason on every case.",
        ins=ins,
        kinds={"python", "parquet"},
        metadata={"dagster/column_schema": columns},
        **common,
    )
    def transcripts(
        context: dg.AssetExecutionContext, runtime: dg.ResourceParam[RunRuntime], cases: StageFile
    ) -> dg.Output[StageFile]:
        case_set, key = series_of(context.partition_key)
        target = lane_target(spec, runtime, key)
        splits = cases.distinct("split")
        run_columns = {
            "run_id": context.run.run_id,
            "lane": spec.name,
            "split": str(splits[0]) if len(splits) else "",
            "runtime": key,
            "case_set": case_set,
        }
        context.log.info(f"running {target.spec} over {cases.row_count} cases")
        table, outcome = run_framework(spec, cases, run_columns)
        if outcome.failure:
            context.log.error(outcome.failure)
        metadata = runner_metadata(outcome)
        return dg.Output(
            table,
            metadata={
                "dagster/row_count": table.row_count,
                "turns": table.row_count,
                "errors": len(table.read(["case_id", "error"], where=faulted())),
                "runtime": key,
                "runtime_spec": target.spec,
                "runner_seconds": metadata.seconds,
                "runner_failure": metadata.failure,
                "runner_metrics": dg.MetadataValue.json(metadata.other),
                "runner_scalars": dg.MetadataValue.json(metadata.scalars),
            },
        )

    return transcripts
