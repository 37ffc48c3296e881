"""A room's face: its ``__init__`` names what other rooms use (``_EXPORTS``: each name and the
module of the room that defines it) and loads a name's module on its first use, so importing
one module of a room never imports the rest of it (``--help`` loads no pandas, no Dagster).

Nothing here imports another module of this package: every face imports this one first."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` (PEP 562) of ``package``'s face: a name of ``exports`` is
    read from its module, imported now (Python then keeps it as the module's attribute too);
    any other name is an AttributeError, as for any module."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    return __getattr__
