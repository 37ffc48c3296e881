"""The assertion registry: a name in a case file maps to one check function (no if/elif chain).

A check is a pure function ``(case, spec, candidate) -> findings``; every family module of
this package registers its check with :func:`assertion_check` and is discovered on the first
lookup. :mod:`eval_pipeline.i18n.checks` stamps the findings into §6 AssertionResults.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from eval_pipeline.core import Registry
from eval_pipeline.i18n.results import Candidate, Finding

if TYPE_CHECKING:
    from eval_pipeline.i18n.case import EvalCase

AssertionCheck = Callable[["EvalCase", Any, Candidate], list[Finding]]

ASSERTIONS: Registry[AssertionCheck] = Registry("assertion", "eval_pipeline.i18n")


def assertion_check(name: str) -> Callable[[AssertionCheck], AssertionCheck]:
    return ASSERTIONS.register(name)


def get_check(name: str) -> AssertionCheck:
    return ASSERTIONS.get(name)


def registered_assertions() -> list[str]:
    return ASSERTIONS.names()
