"""The assertion registry: a name in a case file maps to one check function (no if/elif chain).

A check is a pure function ``(case, spec, candidate) -> findings``; every family module
registers its check with :func:`assertion_check`. :mod:`eval_pipeline.i18n.checks` stamps the
findings into §6 AssertionResults.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from eval_pipeline.i18n.results import Candidate, Finding

if TYPE_CHECKING:
    from eval_pipeline.i18n.case import EvalCase

AssertionCheck = Callable[["EvalCase", Any, Candidate], list[Finding]]

_CHECKS: dict[str, AssertionCheck] = {}


def assertion_check(name: str) -> Callable[[AssertionCheck], AssertionCheck]:
    def decorate(check: AssertionCheck) -> AssertionCheck:
        if name in _CHECKS:
            raise ValueError(f"assertion {name!r} registered twice")
        _CHECKS[name] = check
        return check

    return decorate


def get_check(name: str) -> AssertionCheck:
    try:
        return _CHECKS[name]
    except KeyError:
        raise KeyError(f"no check registered for assertion {name!r}; known: {sorted(_CHECKS)}") from None


def registered_assertions() -> list[str]:
    return sorted(_CHECKS)
