"""``history --sql``: a person's query over the history views, on a connection that can only read.

Read-only is a property of the connection, not of the statement. The connection reaches the
history through one filesystem, :class:`ReadOnlyHistory`: the root's files by paths relative to
it, opened for reading only, with no way to make, move, replace or delete a file. It is the
only place the connection may touch (``allowed_directories`` names it alone,
``enable_external_access = false`` refuses every other path, extension installs and
``ATTACH``, and the temporary directory, which DuckDB would otherwise allow as well, is
off), and the configuration is locked so a query cannot undo that. On a local disk a path is
where it resolves: a symbolic link inside the root that leads out of it is not followed, and a
file with more than one name (a hard link) is not read, since its other name may be outside the
root, nor is a pipe or a device (a read would wait on it forever) (the store writes every file under one name; a copy of history made of hard links, such as
a backup snapshot, is read through a plain copy). So no statement, however it is wrapped (``EXPLAIN ANALYZE COPY …``, a table function, a pragma),
can write anywhere or read outside the root. Statements other than queries are also refused up front, so that
``COPY`` or ``CREATE`` gets a plain message rather than DuckDB's permission error.
"""

from __future__ import annotations

import os
import posixpath
import stat
from typing import Any

import duckdb
import fsspec
import pandas as pd
from fsspec.implementations.local import LocalFileSystem

from eval_pipeline.history.views import connect

READ_ONLY_STATEMENTS = frozenset({duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN})
READ_ONLY_PROTOCOL = "evalhistory"
ROOT_NAME = "history"
READ_ONLY_ROOT = f"{READ_ONLY_PROTOCOL}://{ROOT_NAME}"  # the root, as the connection names it


class QueryRefused(ValueError):
    """The query is not a read-only query over the history views."""


class ReadOnlyHistory(fsspec.AbstractFileSystem):
    """A history root's files, relative to the root, for reading only.

    The root is ``evalhistory://history``; a path names a file below it and may not leave it
    (``..`` is refused), nor resolve out of it through a symbolic link, nor be a hard link
    (:meth:`_single_name`). Only the
    operations that read are passed on; opening in any mode but ``rb`` raises
    ``PermissionError``, and every operation that would change a file is either refused by
    ``AbstractFileSystem`` itself (it implements none of them) or, for ``mkdir``, a no-op.
    """

    protocol = READ_ONLY_PROTOCOL
    cachable = False  # one instance per root, never shared through fsspec's instance cache

    def __init__(self, root: str) -> None:
        super().__init__()
        self._fs, path = fsspec.core.url_to_fs(root)
        # On a local disk the OS follows symbolic links: the root is its real path, and so is
        # every path below it that is opened or listed (see _resolved).
        self._local = isinstance(self._fs, LocalFileSystem)
        self._root = os.path.realpath(path) if self._local else path.rstrip("/")

    def _inner(self, path: str) -> str:
        parts = [part for part in self._strip_protocol(path).split("/") if part not in ("", ".")]
        if parts[:1] != [ROOT_NAME] or ".." in parts:
            raise PermissionError(f"{path}: outside the history root")
        inner = self._resolved(posixpath.join(self._root, *parts[1:]))
        if inner is None:
            raise PermissionError(f"{path}: a link out of the history root")
        return inner

    def _resolved(self, inner: str) -> str | None:
        """``inner`` as the OS would resolve it, or None when that is outside the root."""
        if not self._local:
            return inner  # an object store has no links
        real = os.path.realpath(inner)
        return real if real == self._root or real.startswith(self._root.rstrip("/") + "/") else None

    def _single_name(self, inner: str, *, folder_too: bool = True) -> bool:
        """Whether ``inner`` is a file the store could have written: a regular file of one name
        (not a hard link, one name inside the root and another perhaps outside it; not a pipe
        or a device, which a read would wait on forever), or (``folder_too``) a folder."""
        if not self._local:
            return True  # an object store has neither links nor pipes
        try:
            found = os.stat(inner)
        except OSError:
            return True  # opening it says what is wrong
        if stat.S_ISDIR(found.st_mode):
            return folder_too
        return stat.S_ISREG(found.st_mode) and found.st_nlink == 1

    def _outer(self, inner: str) -> str:
        relative = self._fs._strip_protocol(inner).rstrip("/")[len(self._root) :].strip("/")
        return f"{ROOT_NAME}/{relative}" if relative else ROOT_NAME

    @classmethod
    def _strip_protocol(cls, path: str) -> str:
        return path.removeprefix(f"{READ_ONLY_PROTOCOL}://").strip("/")

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> list[Any]:
        # An entry that links out of the root is left out, so a glob over the root never meets it.
        entries = self._fs.ls(self._inner(path), detail=True, **kwargs)
        inside = [
            entry
            for entry in entries
            if self._resolved(entry["name"]) is not None and self._single_name(entry["name"])
        ]
        if not detail:
            return [self._outer(entry["name"]) for entry in inside]
        return [{**entry, "name": self._outer(entry["name"])} for entry in inside]

    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        entry = self._fs.info(self._inner(path), **kwargs)
        return {**entry, "name": self._outer(entry["name"])}

    def modified(self, path: str) -> Any:
        return self._fs.modified(self._inner(path))

    def _open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
        if mode != "rb":
            raise PermissionError(f"{path}: history --sql only reads (asked to open it for {mode!r})")
        inner = self._inner(path)
        if not self._single_name(inner, folder_too=False):
            raise PermissionError(
                f"{path}: not a file the history store wrote: a file with several names (a hard link, "
                "perhaps to a file outside the history root), a pipe or a device"
            )
        return self._fs.open(inner, "rb", **kwargs)

    def mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        raise PermissionError(f"{path}: history --sql only reads")

    makedirs = mkdir


def read_only_connection(root: str) -> duckdb.DuckDBPyConnection:
    """The history views over ``root`` on a connection that can read ``root`` and nothing else."""
    con = connect(READ_ONLY_ROOT, filesystem=ReadOnlyHistory(root))
    con.execute("SET temp_directory = ''")  # else '.tmp' below the working directory is allowed
    con.execute("SET allowed_directories = ?", [[f"{READ_ONLY_ROOT}/"]])
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con


def run_query(con: duckdb.DuckDBPyConnection, sql: str) -> pd.DataFrame:
    """The result of one read-only statement (SELECT, WITH … SELECT, FROM …, DESCRIBE, EXPLAIN)."""
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryRefused(str(exc)) from None
    if len(statements) != 1:
        raise QueryRefused(f"expected one SQL statement, got {len(statements)}")
    (statement,) = statements
    if statement.type not in READ_ONLY_STATEMENTS:
        raise QueryRefused(
            f"{statement.type.name} statements are not allowed: history --sql only reads (SELECT, EXPLAIN)"
        )
    return con.execute(sql).df()
