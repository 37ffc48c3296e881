"""Keep each lane's partition keys in step with what is declared: its splits and the runtime
targets in ``evals/runtimes.yaml``, so the launchpad offers every declared series before
anything has run, and nothing else: a key nothing declares (a target since removed, or the
ad-hoc keys an older version registered for ``--cases`` and command-line runtimes) is
deleted, since a run of it could not be launched."""

from __future__ import annotations

from collections.abc import Sequence

import dagster as dg

from eval_pipeline.dagster_wiring.partitions import RUNTIME_TARGETS, case_sets_name
from eval_pipeline.lanes.spec import LaneSpec
from eval_pipeline.runtimes.targets import load_targets
from eval_pipeline.settings import targets_file

SENSOR_NAME = "register_series_keys"


def series_keys_sensor(specs: Sequence[LaneSpec]) -> dg.SensorDefinition:
    @dg.sensor(
        name=SENSOR_NAME,
        minimum_interval_seconds=60,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Registers every lane split and declared runtime target as partition keys, and "
        "deletes the keys nothing declares.",
    )
    def _register(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
        wanted = {case_sets_name(s.name): sorted(s.splits) for s in specs}
        wanted[RUNTIME_TARGETS] = sorted(load_targets(targets_file()))
        requests: list[dg.AddDynamicPartitionsRequest | dg.DeleteDynamicPartitionsRequest] = []
        for name, keys in wanted.items():
            registered = context.instance.get_dynamic_partitions(name)
            missing = [k for k in keys if k not in registered]
            undeclared = [k for k in registered if k not in keys]
            if missing:
                requests.append(
                    dg.AddDynamicPartitionsRequest(partitions_def_name=name, partition_keys=missing)
                )
            if undeclared:
                requests.append(
                    dg.DeleteDynamicPartitionsRequest(partitions_def_name=name, partition_keys=undeclared)
                )
        if not requests:
            return dg.SkipReason("the registered splits and runtime targets are the declared ones")
        return dg.SensorResult(dynamic_partitions_requests=requests)

    return _register
