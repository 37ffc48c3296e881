"""Resources: which runtime a partition evaluates, where history goes, who watches progress,
which cases the caller already wrote.

They resolve their environment defaults when a run uses them, never at import time, so
the same code location serves the UI, the CLI and the nightly schedule.

A run's runtime is resolved once: :class:`RuntimeResource` (the configurable resource the
launchpad shows) hands every step one :class:`RunRuntime`, which reads the partition's target
from ``evals/runtimes.yaml`` the first time a step asks and builds its ChatRuntime the first
time one is driven. The CLI, which has resolved and built both before the run starts, hands
the run a :class:`RunRuntime` holding them, and likewise the cases stage file it wrote while
checking every case file (:class:`PreparedCases`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field

from eval_pipeline.core import history_root, targets_file
from eval_pipeline.run import DriveSettings
from eval_pipeline.runtimes import ChatRuntime, RuntimeSpecError, build_runtime
from eval_pipeline.runtimes.redaction import redacted_spec
from eval_pipeline.runtimes.targets import RuntimeTarget, load_targets, rescore_target, resolve_target
from eval_pipeline.runtimes.warm import warm_runtimes
from eval_pipeline.tables import StageFile


class RunRuntime:
    """One run's runtime: its settings, its target resolved once, its ChatRuntime built once.

    Given a ``target`` (and a built ``chat_runtime``) the run neither reads the targets file
    nor builds anything; a runtime it was given is its giver's to close."""

    def __init__(
        self,
        settings: RuntimeResource,
        target: RuntimeTarget | None = None,
        chat_runtime: ChatRuntime | None = None,
    ) -> None:
        self.settings = settings
        self._target = target
        self._chat_runtime = chat_runtime

    def target(self, name: str) -> RuntimeTarget:
        """The target of the partition's runtime key ``name``."""
        if self._target is None:
            self._target = self.settings.resolve(name)
        elif self._target.name != name:
            raise RuntimeSpecError(
                f"this run evaluates runtime {self._target.name!r}, but its partition is runtime {name!r}"
            )
        return self._target

    @contextmanager
    def chat_runtime(self, target: RuntimeTarget) -> Iterator[ChatRuntime]:
        """The ChatRuntime of ``target`` (its :meth:`target`) for the block: the one this run was
        given, else one built now and closed when the block ends."""
        if self._chat_runtime is not None:
            yield self._chat_runtime
            return
        built = build_runtime(target.spec, target.options)
        try:
            yield built
        finally:
            built.close()


class RuntimeResource(dg.ConfigurableResource[RunRuntime], DriveSettings):
    """The runtime under evaluation, and how a run drives it (:class:`DriveSettings`, the same
    fields the command line sets); steps get its :class:`RunRuntime`.

    A partition's ``runtime`` key names a runtime target. With ``spec`` empty (the default,
    and what the launchpad and the schedule use) the target is looked up in
    ``evals/runtimes.yaml``. An ad-hoc run sets ``spec`` and ``options``; their derived
    target name must then be the partition's runtime key, so a result is never filed
    under a runtime that did not produce it.
    """

    spec: str = Field(
        default="",
        description="Runtime spec for an ad-hoc target; empty: the partition's declared target.",
    )
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="Adapter options for an ad-hoc target. Secrets never go here: name the "
        "environment variable that holds them.",
    )
    journal_dir: str = Field(
        default="", description="Where run journals live; empty: the instance's storage folder."
    )

    @staticmethod
    def config_of(target: RuntimeTarget, drive: DriveSettings, journal_dir: str) -> dict[str, Any]:
        """The resource's config for a run of ``target`` (its spec only when it is not declared)."""
        return {
            "spec": "" if target.declared else target.spec,
            "options": {} if target.declared else dict(target.options),
            "journal_dir": journal_dir,
            **drive.model_dump(),
        }

    @contextmanager
    def yield_for_execution(self, context: dg.InitResourceContext) -> Iterator[RunRuntime]:
        """One run's runtime; runtimes built during the run share their worker pools."""
        with warm_runtimes():
            yield RunRuntime(self)

    def resolve(self, name: str) -> RuntimeTarget:
        """The target a partition's runtime key names, read from the targets file
        (RuntimeSpecError when it cannot be)."""
        targets = load_targets(targets_file())
        if self.spec:
            target = resolve_target(self.spec, self.options, targets)
            if target.name != name:
                raise RuntimeSpecError(
                    f"the runtime resource's spec {redacted_spec(self.spec)!r} is target {target.name!r}, but this "
                    f"partition is runtime {name!r}: pick partition {target.name!r} or clear the spec"
                )
            return target
        rescore = rescore_target(name)
        if name not in targets and rescore is not None:  # a launchpad re-score: the key names the run
            return rescore
        if name not in targets:
            raise RuntimeSpecError(
                f"runtime {name!r} is not declared in {targets_file()} (declared: {sorted(targets)}); "
                "an ad-hoc runtime needs its spec in the runtime resource's config"
            )
        return targets[name]

    def journal_root(self, instance: dg.DagsterInstance) -> Path:
        return Path(self.journal_dir) if self.journal_dir else Path(instance.storage_directory()) / "journal"


class PreparedCases:
    """The cases stage file of a run, written by its caller before the run started (``file``),
    which the run's cases step takes instead of validating the same case files again; with no
    file (a run from the UI or the schedule, or on Celery workers) the step writes its own."""

    def __init__(self, file: StageFile | None = None) -> None:
        self.file = file


class HistoryResource(dg.ConfigurableResource):
    """Where every run's metrics, case predicates, turn verdicts and transcripts are appended."""

    root: str = Field(
        default="",
        description="Local folder or fsspec URL; empty means $EVAL_PIPELINE_HISTORY, else .eval_pipeline/history.",
    )
    keep_transcripts: bool = Field(default=True, description="Also keep transcripts in history.")

    def resolved_root(self) -> str:
        return self.root or history_root()
