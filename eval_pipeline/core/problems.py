"""A problem in a file the project reads, at its line: what every reader of case, lane, targets
and notify files (and the modules the registries import) reports, and the command line prints
as bad input (exit 2)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class CaseProblem:
    """One thing wrong with one line of a case file."""

    file: str
    line: int
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.field}: {self.message}"


class FileProblemsError(ValueError):
    """Files the project reads failed validation; ``problems`` lists every problem found.

    A subclass names which files (``files``), so that a caller can tell a case file from a
    targets file; the command line reports any of them as bad input."""

    files = "files"

    def __init__(self, problems: Sequence[CaseProblem]) -> None:
        self.problems = list(problems)
        shown = "\n".join(f"  {p}" for p in self.problems)
        super().__init__(f"{len(self.problems)} problem(s) in {self.files}:\n{shown}")


class ModuleProblemError(FileProblemsError):
    """A module a registry discovers (a predicate module, a lane kind) failed to import."""

    files = "modules"
