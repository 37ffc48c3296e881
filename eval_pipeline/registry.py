"""One small registry pattern: names → objects, filled by decorators in discovered modules.

A registry knows the package its entries live in. The first lookup imports every module of
that package, so a new predicate (or assertion, lane kind, runtime adapter) is a decorated
function in a new module there: no registration import to forget.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

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
            importlib.import_module(f"{self.package}.{module.name}")
