"""Batches are worked on with the cyclic collector paused, and it runs again between them."""

from __future__ import annotations

import gc

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
