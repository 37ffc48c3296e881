"""One small registry pattern: names → objects, filled by decorators in discovered modules.

A registry knows the package its entries live in. The first lookup imports every module of
that package, so a new predicate (or assertion, lane kind, runtime adapter) is a decorated
function in a new module there: no registration import to forget.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import pkgutil
import traceback
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from eval_pipeline.core.problems import CaseProblem, ModuleProblemError

T = TypeVar("T")


class Registry(Generic[T]):
    """Entries of one sort (``what``: used in error messages), discovered under ``package``."""

    def __init__(self, what: str, package: str) -> None:
        self.what = what
        self.package = package
        self._entries: dict[str, T] = {}
        self._discovered = False

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: file the decorated object under ``name`` (a name used twice is an error)."""

        def decorate(entry: T) -> T:
            self.add(name, entry)
            return entry

        return decorate

    def add(self, name: str, entry: T) -> None:
        if name in self._entries and self._entries[name] is not entry:
            raise ValueError(f"{self.what} {name!r} registered twice")
        self._entries[name] = entry

    def get(self, name: str) -> T:
        self.discover()
        try:
            return self._entries[name]
        except KeyError:
            raise KeyError(f"unknown {self.what} {name!r}; known: {self.names()}") from None

    def __contains__(self, name: object) -> bool:
        self.discover()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def names(self) -> list[str]:
        self.discover()
        return sorted(self._entries)

    def discover(self) -> None:
        """Import every module of the package once (each module registers its own entries)."""
        if self._discovered:
            return
        self._discovered = True
        package = importlib.import_module(self.package)
        for module in pkgutil.iter_modules(package.__path__):
            name = f"{self.package}.{module.name}"
            try:
                importlib.import_module(name)
            except Exception as exc:
                # A module someone added (a new predicate) that cannot be imported is a problem
                # in that file, reported at its line like any bad input, not a traceback.
                self._discovered = False
                raise module_problem(name, exc) from None


def module_problem(name: str, exc: BaseException) -> Exception:
    """The bad-input error (:class:`~eval_pipeline.core.problems.ModuleProblemError`, reported
    as a lane file's problems are) naming the file and line of module ``name`` where importing it raised ``exc``."""

    spec = importlib.util.find_spec(name)
    origin = spec.origin if spec is not None and spec.origin else name
    line = 1
    if isinstance(exc, SyntaxError) and exc.lineno:
        line = exc.lineno
    else:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == origin]
        if frames and frames[-1].lineno:
            line = frames[-1].lineno
    message = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    shown = os.path.relpath(origin) if os.path.isabs(origin) and _under_cwd(origin) else origin
    return ModuleProblemError([CaseProblem(shown, line, "(import)", f"cannot import {name}: {message}")])


def _under_cwd(path: str) -> bool:
    return os.path.commonpath([os.path.abspath(path), os.getcwd()]) == os.getcwd()
