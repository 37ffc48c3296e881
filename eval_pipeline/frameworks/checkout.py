"""Which version of a framework checkout a run measures: its git commit, else a digest of its
Python files. A framework lane's runtime is that version (``<name>-<12 hex>``), so each commit
is a series of its own and ``compare`` tells two commits apart."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from eval_pipeline.lanes.runner_spec import RunnerSpec

SHORT = 12
_SKIPPED = {".git", ".venv", "venv", "node_modules", "__pycache__"}


def checkout_version(checkout: Path) -> str:
    """``git:<commit>`` of a git checkout (``+dirty`` with uncommitted changes to tracked files),
    else ``tree:<sha256>`` of its Python files' paths and bytes."""
    try:
        commit = subprocess.run(
            ["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(checkout), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        return f"git:{commit}{'+dirty' if dirty else ''}"
    except (OSError, subprocess.CalledProcessError):
        pass
    digest = hashlib.sha256()
    for path in sorted(
        p for p in checkout.rglob("*.py") if not _SKIPPED & set(p.relative_to(checkout).parts)
    ):
        digest.update(str(path.relative_to(checkout)).encode() + b"\0" + path.read_bytes() + b"\0")
    return f"tree:{digest.hexdigest()}"


def runtime_key(runner: RunnerSpec, version: str) -> str:
    """The runtime a run of ``runner`` at ``version`` is filed under: ``<name>-<12 hex>``
    (``-dirty`` appended for a git checkout with uncommitted changes)."""
    _kind, _, ident = version.partition(":")
    commit, _, dirty = ident.partition("+")
    return f"{runner.name}-{commit[:SHORT]}{'-dirty' if dirty else ''}"


def runtime_spec(runner: RunnerSpec, version: str) -> str:
    """What a framework run's manifest says it ran: ``framework:<lane>@<version>``."""
    return f"framework:{runner.lane}@{version}"
