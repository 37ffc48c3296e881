"""A CPU-bound bot with an import-time start-up, like a runtime that loads a model on import.

``SLOW_START_S`` seconds of start-up when the module is imported, then each process that
imported it appends its pid to ``SLOW_START_LOG`` (if set). Each turn burns ``SLOW_TURN_MS``
of CPU (default 0) and answers with the reference runtime's surface; a prompt equal to
``SLOW_CRASH_PROMPT`` kills the process (a worker crash). Used by the warm-pool tests and
``benchmarks/scale.py``'s CPU-bound figures.
"""

from __future__ import annotations

import os
import time

from eval_pipeline.runtimes.reference import ReferenceRuntime

time.sleep(float(os.environ.get("SLOW_START_S", "0")))
if os.environ.get("SLOW_START_LOG"):
    with open(os.environ["SLOW_START_LOG"], "a", encoding="utf-8") as log:
        log.write(f"{os.getpid()}\n")


def burn(seconds: float) -> None:
    """Busy CPU for ``seconds`` of process time (not wall time: other processes may share the core)."""
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


class SlowStartBot:
    def __init__(self) -> None:
        self._session = ReferenceRuntime().open_session("slow")

    def chat(self, prompt: str) -> dict[str, object]:
        if prompt == os.environ.get("SLOW_CRASH_PROMPT"):
            os._exit(3)
        burn(float(os.environ.get("SLOW_TURN_MS", "0")) / 1000.0)
        response = self._session.send(prompt)
        return {"surface": response.surface, "grounding_source": response.grounding_source}
