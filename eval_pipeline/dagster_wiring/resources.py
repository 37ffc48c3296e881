"""Resources: which runtime to evaluate and where history goes.

Both resolve their environment defaults when a run uses them, never at import time, so
the same code location serves the UI, the CLI and the nightly schedule.
"""

from __future__ import annotations

import os
from typing import Any

import dagster as dg
from pydantic import Field

from eval_pipeline.runtimes.base import ChatRuntime
from eval_pipeline.runtimes.options import parse_runtime_options_json
from eval_pipeline.runtimes.registry import build_runtime
from eval_pipeline.settings import history_root, runtime_spec

RUNTIME_OPTIONS_ENV = "EVAL_PIPELINE_RUNTIME_OPTIONS"


class RuntimeResource(dg.ConfigurableResource):
    """The ChatRuntime under evaluation, by spec (``reference``, ``openai:URL``, ``replay:PATH`` …)."""

    spec: str = Field(
        default="",
        description="Runtime spec; empty means $EVAL_PIPELINE_RUNTIME, else 'reference'.",
    )
    options_json: str = Field(
        default="",
        description="Adapter options as a JSON object; empty means $EVAL_PIPELINE_RUNTIME_OPTIONS. "
        "Secrets never go here: name the environment variable that holds them.",
    )
    concurrency: int | None = Field(
        default=None,
        description="Sessions (cases) evaluated at once; empty means the runtime's own preference "
        "(its worker count or request limit), else 1.",
    )

    def resolved_spec(self) -> str:
        return self.spec or runtime_spec()

    def options(self) -> dict[str, Any]:
        return parse_runtime_options_json(self.options_json or os.environ.get(RUNTIME_OPTIONS_ENV))

    def build(self) -> ChatRuntime:
        return build_runtime(self.resolved_spec(), self.options())


class HistoryResource(dg.ConfigurableResource):
    """Where every run's metrics, case predicates and transcripts are appended."""

    root: str = Field(
        default="",
        description="Local folder or fsspec URL; empty means $EVAL_PIPELINE_HISTORY, else .eval_pipeline/history.",
    )
    keep_transcripts: bool = Field(default=True, description="Also keep transcripts in history.")

    def resolved_root(self) -> str:
        return self.root or history_root()
