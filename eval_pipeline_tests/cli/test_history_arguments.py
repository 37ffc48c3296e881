"""Each history command hands its parsed arguments whole to the function that does its work
(``ctx.params``), so the two must name the same arguments: one more option on either side is a
TypeError the first time someone runs the command."""

from __future__ import annotations

import inspect
from collections.abc import Callable

import pytest

from eval_pipeline.cli import history, history_output

COMMAND_WORK: dict[Callable[..., None], Callable[..., None]] = {
    history.history: history_output.print_history,
    history.history_compact: history_output.print_compacted,
    history.diff: history_output.print_diff,
    history.flaky: history_output.print_flaky,
    history.first_failure: history_output.print_first_failures,
    history.compare: history_output.print_comparison,
    history.report: history_output.write_report_and_open,
}


@pytest.mark.parametrize("command", list(COMMAND_WORK), ids=lambda command: command.__name__)
def test_a_history_command_and_its_work_name_the_same_arguments(command: Callable[..., None]) -> None:
    declared = set(inspect.signature(command).parameters) - {"ctx"}
    taken = set(inspect.signature(COMMAND_WORK[command]).parameters)
    assert declared == taken
