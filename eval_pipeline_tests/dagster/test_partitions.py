"""Dynamic partition keys remembered for the length of a run (``partitions_remembered``)."""

from __future__ import annotations

import dagster as dg

from eval_pipeline.dagster_wiring.partitions import RUNTIME_TARGETS, partitions_remembered


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
