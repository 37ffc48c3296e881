"""Batches are worked on with the cyclic collector paused, and it runs again between them."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from eval_pipeline.core.collector import each_without_collector, frozen_after


def test_the_collector_is_paused_for_each_item_and_back_between_and_after() -> None:
    assert gc.isenabled()
    seen_inside: list[bool] = []
    seen_while_made: list[bool] = []

    def items():  # type: ignore[no-untyped-def]
        for item in range(3):
            seen_while_made.append(gc.isenabled())
            yield item

    for _ in each_without_collector(items()):
        seen_inside.append(gc.isenabled())
    assert seen_inside == [False, False, False]
    assert seen_while_made == [False, False, False]
    assert gc.isenabled()


def test_the_collector_comes_back_when_the_caller_stops_early_or_fails() -> None:
    for _ in each_without_collector(range(5)):
        break
    assert gc.isenabled()
    with pytest.raises(ValueError):
        for _ in each_without_collector(range(5)):
            raise ValueError("a failing batch")
    assert gc.isenabled()


def test_a_collector_turned_off_by_its_owner_stays_off() -> None:
    gc.disable()
    try:
        assert list(each_without_collector(range(2))) == [0, 1]
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_at_exit_the_heap_is_frozen_after_the_later_exit_handlers_ran(tmp_path: Path) -> None:
    """The final collection is skipped (the heap is frozen when the interpreter exits), and exit
    handlers registered after the hook still run before it, with the collector as usual."""
    log = tmp_path / "exit.log"
    script = textwrap.dedent(
        f"""
        import atexit, gc
        log = open({str(log)!r}, "a", encoding="utf-8")
        atexit.register(lambda: (log.write(f"last frozen={{gc.get_freeze_count() > 0}}\\n"), log.close()))
        from eval_pipeline.core.collector import no_final_collection
        no_final_collection()
        atexit.register(lambda: log.write(f"later frozen={{gc.get_freeze_count() > 0}}\\n"))
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True)
    assert log.read_text(encoding="utf-8").splitlines() == ["later frozen=False", "last frozen=True"]


def test_what_a_start_up_made_is_frozen_before_the_collector_is_back() -> None:
    """Inside, the collector is off; after, it is on and the objects made inside are frozen
    before it is: its next young collection does not come at once, to walk them all."""
    collections: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "stop":
            collections.append(info["generation"])

    frozen_before = gc.get_freeze_count()
    gc.callbacks.append(count)
    try:
        with frozen_after():
            assert not gc.isenabled()
            made = [[index] for index in range(50_000)]  # tracked objects, alive after
        assert gc.isenabled()
        assert collections == []
        soon = [[index] for index in range(50)]  # well under a young generation's threshold
        assert collections == []
        assert gc.get_freeze_count() >= frozen_before + len(made)
        del soon
    finally:
        gc.callbacks.remove(count)
        gc.unfreeze()  # back into the oldest generation, as they were before the test


def test_a_start_up_under_an_owner_who_turned_the_collector_off_leaves_it_off() -> None:
    gc.disable()
    try:
        with frozen_after():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
        gc.unfreeze()


def test_the_command_line_loads_its_commands_frozen_and_runs_with_the_collector_on() -> None:
    probe = textwrap.dedent(
        """
        import gc, sys
        from eval_pipeline.cli import main
        sys.argv = ["eval-pipeline", "--help"]
        try:
            main()
        except SystemExit:
            pass
        print("RESULT", gc.get_freeze_count() > 10_000, gc.isenabled())
        """
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines()[-1] == "RESULT True True"
