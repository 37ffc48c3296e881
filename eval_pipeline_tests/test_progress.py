"""The progress observers: throttled updates still end on the final tally."""

from __future__ import annotations

import io

from rich.console import Console
from rich.progress import Progress

from eval_pipeline.progress import RichProgress


def test_a_throttled_bar_still_shows_every_turn_once_the_last_is_in() -> None:
    with Progress(console=Console(file=io.StringIO())) as progress:
        bar = RichProgress(progress, "lane", every_s=3600.0)  # no update is due before the last turn
        bar.start(1000)
        for number in range(1000):
            bar({"error": "boom" if number % 10 == 0 else None})
            if number == 998:
                assert progress.tasks[0].completed == 0, "updates within the interval are skipped"
        task = progress.tasks[0]
        assert task.completed == 1000
        assert task.fields["errors"] == 100
