"""Dynamic partition keys: remembered for the length of a run (``partitions_remembered``), kept to
the declared series by the sensor, and the runtime targets' observations."""

from __future__ import annotations

import dagster as dg

from eval_pipeline.core.settings import targets_file
from eval_pipeline.dagster_wiring.partitions import RUNTIME_TARGETS, case_sets_name, partitions_remembered
from eval_pipeline.dagster_wiring.runtime_targets import DATA_VERSION_TAG, RUNTIME_TARGETS_KEY, observe_target
from eval_pipeline.dagster_wiring.sensors import series_keys_sensor
from eval_pipeline.lanes import find_lane
from eval_pipeline.runtimes.targets import find_target, load_targets
from eval_pipeline.runtimes.versions import runtime_version


def test_a_yes_is_remembered_in_the_block_and_a_no_is_asked_again() -> None:
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(RUNTIME_TARGETS, ["reference"])
        with partitions_remembered(instance):
            assert instance.has_dynamic_partition(RUNTIME_TARGETS, "reference")
            assert not instance.has_dynamic_partition(RUNTIME_TARGETS, "late")
            instance.add_dynamic_partitions(RUNTIME_TARGETS, ["late"])
            assert instance.has_dynamic_partition(RUNTIME_TARGETS, "late")  # a no is not remembered
            instance.delete_dynamic_partition(RUNTIME_TARGETS, "reference")
            assert instance.has_dynamic_partition(RUNTIME_TARGETS, "reference")  # the yes is
        # after the block the instance answers from its storage again
        assert not instance.has_dynamic_partition(RUNTIME_TARGETS, "reference")
        assert instance.has_dynamic_partition(RUNTIME_TARGETS, "late")


def test_the_block_restores_the_instance_method_when_its_body_raises() -> None:
    with dg.DagsterInstance.ephemeral() as instance:
        try:
            with partitions_remembered(instance):
                raise RuntimeError("a run that failed")
        except RuntimeError:
            pass
        assert "has_dynamic_partition" not in vars(instance)


def test_the_sensor_registers_the_declared_series_and_deletes_the_keys_nothing_declares() -> None:
    specs = [find_lane("deterministic_fluency")]
    declared = sorted(load_targets(targets_file()))
    with dg.DagsterInstance.ephemeral() as instance:
        # What an older version left: an ad-hoc runtime and a custom case set, beside a split.
        instance.add_dynamic_partitions(RUNTIME_TARGETS, ["replay-0123abcd", declared[0]])
        instance.add_dynamic_partitions(
            case_sets_name("deterministic_fluency"), ["custom-0123456789ab", "dev"]
        )
        result = series_keys_sensor(specs)(dg.build_sensor_context(instance=instance))
        assert isinstance(result, dg.SensorResult)
        added = {
            r.partitions_def_name: sorted(r.partition_keys)
            for r in result.dynamic_partitions_requests
            if isinstance(r, dg.AddDynamicPartitionsRequest)
        }
        deleted = {
            r.partitions_def_name: sorted(r.partition_keys)
            for r in result.dynamic_partitions_requests
            if isinstance(r, dg.DeleteDynamicPartitionsRequest)
        }
        assert added == {
            RUNTIME_TARGETS: declared[1:],
            case_sets_name("deterministic_fluency"): sorted(set(specs[0].splits) - {"dev"}),
        }
        assert deleted == {
            RUNTIME_TARGETS: ["replay-0123abcd"],
            case_sets_name("deterministic_fluency"): ["custom-0123456789ab"],
        }


def test_a_declared_target_is_observed_without_a_run_and_an_ad_hoc_one_not_at_all() -> None:
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(RUNTIME_TARGETS, ["reference"])
        assert observe_target(instance, find_target("reference"))
        ad_hoc = find_target("reference:gloss")  # not declared: its derived name pins its spec
        assert not ad_hoc.declared and not observe_target(instance, ad_hoc)
        assert instance.get_runs() == []  # the Runs page gains nothing
        record = instance.fetch_observations(RUNTIME_TARGETS_KEY, limit=5).records
        assert [r.partition_key for r in record] == ["reference"]
        observed = record[0].asset_observation
        assert observed is not None
        expected = runtime_version(find_target("reference").spec, {}).digest
        assert observed.tags[DATA_VERSION_TAG] == expected
