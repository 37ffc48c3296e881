"""Runtime targets: named runtimes, declared once in ``evals/runtimes.yaml``.

A target is what a result is measured against: its name is part of every series (lane,
split, runtime, case set), a Dagster partition key and a history column, so it must stay
stable while the spec behind it may change. ::

    targets:
      reference:
        spec: reference
        nightly: true
      staging-gpt:
        spec: openai:https://gateway.example/v1
        options: {model: gpt-4.1, api_key_env: STAGING_KEY}   # secrets only by env var name
        nightly: true
        pool_limit: 2          # at most two lane runs drive it at once (Dagster pool runtime-staging-gpt)
        budget: {max_turns: 20000}   # what one run may send (see eval_pipeline.runtimes.budget)
        cache: true            # answer a session asked before from the response cache
        price: {input: 2.0, output: 8.0}   # per million prompt / completion tokens: each turn's cost

``--runtime NAME`` picks a declared target. A raw spec (``--runtime openai:URL -o model=x``)
still works: if a declared target has exactly that spec and those options it *is* that
target; otherwise it gets a stable derived name, ``<scheme>-<8 hex of the spec and options>``,
so ad-hoc runs form their own series and never enter a nightly one.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from eval_pipeline.cases import CaseProblem, FileProblemsError
from eval_pipeline.cases.strict_yaml import Location, location, read_yaml_file
from eval_pipeline.core import MAX_CONCURRENCY, MAX_REPEAT
from eval_pipeline.metrics import Price
from eval_pipeline.runtimes.base import RuntimeSpecError
from eval_pipeline.runtimes.budget import Budget
from eval_pipeline.runtimes.names import derived_prefix
from eval_pipeline.runtimes.registry import RUNTIME_ADAPTERS, spec_problems, spec_schemes, split_spec

TARGETS_FILE = "runtimes.yaml"
TARGET_NAME = r"^[a-z0-9][a-z0-9_-]{0,62}$"
_TARGET_NAME = re.compile(TARGET_NAME)
QUEUE_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$"


class TargetsFileError(FileProblemsError):
    """The runtime targets file (``evals/runtimes.yaml``) failed validation."""

    files = "the runtime targets file"


class BudgetDeclaration(BaseModel):
    """A target's ``budget:``: the most one run may spend (see :mod:`eval_pipeline.runtimes.budget`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    max_cost: float | None = Field(
        default=None, ge=0.0, allow_inf_nan=False, description="Cost (needs a price)."
    )
    max_turns: int | None = Field(default=None, ge=1, description="Turns sent.")

    def budget(self) -> Budget:
        return Budget(self.max_cost, self.max_turns)


class TargetDeclaration(BaseModel):
    """One entry under ``targets:``."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    spec: str = Field(min_length=1, description="Runtime spec: reference, openai:URL, python:…, exec:…")
    options: dict[str, Any] = Field(
        default_factory=dict,
        description="Adapter options (secrets only as the name of an environment variable).",
    )
    nightly: bool = Field(default=False, description="Evaluated by every lane's nightly schedule.")
    concurrency: int | None = Field(default=None, ge=1, le=MAX_CONCURRENCY, description="Sessions at once.")
    queue: str | None = Field(
        default=None,
        pattern=QUEUE_NAME,
        description="Celery queue its steps run on (with the Celery executor); default: the shared queue.",
    )
    pool_limit: int | None = Field(
        default=None, ge=1, le=1024, description="Lane runs driving this target at once (its Dagster pool)."
    )
    max_error_rate: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="Overrides every lane's max_error_rate for this target (a flaky gateway may need more).",
    )
    repeat: int | None = Field(
        default=None,
        ge=1,
        le=MAX_REPEAT,
        description="Samples per case (each in a fresh session); overrides the lane's.",
    )
    budget: BudgetDeclaration | None = Field(
        default=None, description="What one run against this target may spend; the command line's wins."
    )
    cache: bool = Field(
        default=False, description="Answer sessions asked before from the response cache (nothing sent)."
    )
    price: Price | None = Field(
        default=None,
        description="Per million tokens, input (prompt) and output (completion): each turn's cost.",
    )
    description: str = ""


@dataclass(frozen=True)
class RuntimeTarget:
    """A resolved target: its name and what it runs."""

    name: str
    spec: str
    options: Mapping[str, Any] = field(default_factory=dict)
    nightly: bool = False
    concurrency: int | None = None
    declared: bool = False
    description: str = ""
    queue: str | None = None
    pool_limit: int | None = None
    max_error_rate: float | None = None  # None: the lane's own
    repeat: int | None = None  # None: the lane's own
    budget: Budget = field(default_factory=Budget)  # what one run may spend (no limit by default)
    cache: bool = False  # answer sessions asked before from the response cache
    price: Price | None = None  # None: a turn's cost is unknown

    def samples_for(self, lane_repeat: int) -> int:
        """Samples per case a run against this target takes (its own ``repeat``, else the lane's)."""
        return lane_repeat if self.repeat is None else self.repeat

    def error_budget(self, lane_max_error_rate: float) -> float:
        """The share of faulted turns above which a run against this target is void."""
        return lane_max_error_rate if self.max_error_rate is None else self.max_error_rate


def load_targets(path: Path) -> dict[str, RuntimeTarget]:
    """The declared targets by name; every problem is reported as ``file:line: field: message``.

    A missing file declares only ``reference``, so a checkout without one still runs.
    """
    if not path.exists():
        return {"reference": RuntimeTarget("reference", "reference", nightly=True, declared=True)}
    document = read_yaml_file(path, TargetsFileError)
    root = document.data
    if not isinstance(root, dict) or not isinstance(root.get("targets"), dict):
        loc: Location = ("targets",) if isinstance(root, dict) and "targets" in root else ()
        raise TargetsFileError(
            [
                CaseProblem(
                    str(path), document.line_of(loc), "targets", "expected a mapping of target name → spec"
                )
            ]
        )
    problems = [*document.key_problems]
    problems += [
        document.problem((key,), "unknown key (expected: targets)") for key in root if key != "targets"
    ]
    targets: dict[str, RuntimeTarget] = {}
    for name, entry in root["targets"].items():
        if not isinstance(name, str):
            continue  # a key problem already
        if not _TARGET_NAME.match(name):
            problems.append(document.problem(("targets", name), f"a target name must match {TARGET_NAME}"))
            continue
        if not isinstance(entry, dict):
            problems.append(document.problem(("targets", name), "expected a mapping (spec, options, …)"))
            continue
        try:
            declared = TargetDeclaration.model_validate(entry)
        except ValidationError as exc:
            problems += [
                document.problem(("targets", name, *error["loc"]), error["msg"]) for error in exc.errors()
            ]
            continue
        # Every target's options are checked now, selected or not, each at its own line.
        found = spec_problems(declared.spec, declared.options) or outside_project(
            declared.spec, declared.options, project=path.parent.parent
        )
        if found:
            problems += [
                document.problem(("targets", name, *location(field)), message) for field, message in found
            ]
            continue
        targets[name] = RuntimeTarget(
            name,
            declared.spec,
            declared.options,
            declared.nightly,
            declared.concurrency,
            declared=True,
            description=declared.description,
            queue=declared.queue,
            pool_limit=declared.pool_limit,
            max_error_rate=declared.max_error_rate,
            repeat=declared.repeat,
            budget=declared.budget.budget() if declared.budget else Budget(),
            cache=declared.cache,
            price=declared.price,
        )
    if problems:
        raise TargetsFileError(sorted(problems, key=lambda p: p.line))
    if not targets:
        raise TargetsFileError([CaseProblem(str(path), 1, "targets", "declares no target")])
    return targets


# The options that name a path, by spec scheme (``replay:`` names its file in the spec itself).
# An ``exec:`` command is not among them: it names programs, which live anywhere on the system.
PATH_OPTIONS: Mapping[str, tuple[str, ...]] = {"python": ("paths",), "exec": ("cwd",), "reference": ("pack",)}


def outside_project(spec: str, options: Mapping[str, Any], *, project: Path) -> list[tuple[str, str]]:
    """(field, message) for every path a declared target names that leads outside ``project``
    (the folder holding ``evals/``), symbolic links followed. A relative path is taken from the
    working directory, as the adapter reads it, so what is checked is what would be read."""
    scheme, argument = split_spec(spec)
    named = [("spec", argument)] if scheme == "replay" else []
    for key in PATH_OPTIONS.get(scheme, ()):
        value = options.get(key)
        if isinstance(value, str):
            named.append((f"options.{key}", value))
        elif isinstance(value, list):
            named += [(f"options.{key}[{i}]", item) for i, item in enumerate(value) if isinstance(item, str)]
    root = project.resolve()
    return [
        (field, f"{path!r} leads outside the project ({root}): a target reads files of the project only")
        for field, path in named
        if not Path(path).expanduser().resolve().is_relative_to(root)
    ]


def derived_name(spec: str, options: Mapping[str, Any]) -> str:
    """The stable name of an undeclared (spec, options) pair: ``<scheme>-<8 hex>`` (decoded
    wherever it is shown by :mod:`eval_pipeline.runtimes.names`)."""
    canonical = json.dumps({"spec": spec.strip(), "options": dict(options)}, sort_keys=True, default=str)
    digest = hashlib.sha256(canonical.encode()).hexdigest()[:8]
    return f"{derived_prefix(spec)}-{digest}"


def resolve_target(
    name_or_spec: str, options: Mapping[str, Any], targets: Mapping[str, RuntimeTarget]
) -> RuntimeTarget:
    """The target ``--runtime`` names: a declared name (options then override the declared
    ones), or a raw spec (the declared target with the same spec and options, else ad hoc)."""
    text = name_or_spec.strip()
    if not text:
        raise RuntimeSpecError("--runtime: expected a target name or a runtime spec, got an empty string")
    if text in targets:
        declared = targets[text]
        if not options:
            return declared
        merged = {**declared.options, **options}
        return RuntimeTarget(
            derived_name(declared.spec, merged),
            declared.spec,
            merged,
            max_error_rate=declared.max_error_rate,
            queue=declared.queue,
            repeat=declared.repeat,
            budget=declared.budget,
            cache=declared.cache,
            price=declared.price,
        )
    for declared in targets.values():
        if declared.spec == text and dict(declared.options) == dict(options):
            return declared
    scheme, argument = split_spec(text)
    if scheme not in RUNTIME_ADAPTERS:
        raise RuntimeSpecError(unknown_runtime_message(text, targets))
    if scheme == HISTORY_SCHEME and argument.strip():  # its name says which run it re-scores
        return RuntimeTarget(rescore_name(argument), text, dict(options))
    return RuntimeTarget(derived_name(text, options), text, dict(options))


def unknown_runtime_message(text: str, targets: Mapping[str, RuntimeTarget]) -> str:
    """Why ``text`` names no runtime: the declared targets (and the closest), and the spec schemes."""
    close = difflib.get_close_matches(text, list(targets), n=1, cutoff=0.6)
    return (
        f"unknown runtime {text!r}: neither a target declared in evals/runtimes.yaml "
        f"({', '.join(targets) or 'none'}) nor a runtime spec ({spec_schemes()})"
        + (f"; did you mean {close[0]!r}?" if close else "")
    )


# A re-score of a committed run (``history:RUN_ID``) is a series of its own, named after the run.
# ``rescore-of:<run>`` would read better, but a target name is a Dagster partition key and a
# path part of stage files, so it keeps to TARGET_NAME: ``rescore-of-<full run id>`` (47
# characters), stable and unique, and the launchpad can turn the key back into the spec.
RESCORE_PREFIX = "rescore-of-"
HISTORY_SCHEME = "history"


def rescore_name(run_id: str) -> str:
    """The target name of the re-score of committed run ``run_id`` (a full id)."""
    return f"{RESCORE_PREFIX}{run_id.strip().lower()}"


def rescore_target(name: str, options: Mapping[str, Any] | None = None) -> RuntimeTarget | None:
    """The target a ``rescore-of-<run id>`` key names (None for any other name)."""
    if not name.startswith(RESCORE_PREFIX) or len(name) == len(RESCORE_PREFIX):
        return None
    return RuntimeTarget(name, f"{HISTORY_SCHEME}:{name[len(RESCORE_PREFIX) :]}", dict(options or {}))


def nightly_targets(targets: Mapping[str, RuntimeTarget]) -> list[RuntimeTarget]:
    return [t for t in targets.values() if t.nightly]


def find_target(name_or_spec: str, options: Mapping[str, Any] | None = None) -> RuntimeTarget:
    """:func:`resolve_target` against the project's targets file (``evals/runtimes.yaml``)."""
    from eval_pipeline.core.settings import targets_file

    return resolve_target(name_or_spec, options or {}, load_targets(targets_file()))
