"""Batches are worked on with the cyclic collector paused, and it runs again between them."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from eval_pipeline.collector import each_without_collector


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
        from eval_pipeline.collector import no_final_collection
        no_final_collection()
        atexit.register(lambda: log.write(f"later frozen={{gc.get_freeze_count() > 0}}\\n"))
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True)
    assert log.read_text(encoding="utf-8").splitlines() == ["later frozen=False", "last frozen=True"]
