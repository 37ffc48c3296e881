"""``import-lanes``: a framework checkout's lanes as ``framework_runner`` lane folders.

A lane of the framework is ``evals/<lane>/`` with a ``contract.md``, a ``runner.py`` defining
(or importing) ``run_lane``, and case files (``dev/cases.jsonl``, ``public/<version>/cases.jsonl``).
Each becomes a lane folder: its case files copied (an ``id`` added where the cases have none),
a ``contract.md`` that links the upstream one and quotes it, and a ``lane.yaml`` whose metrics
are the runner's own (the keys of the ``metrics`` it builds, read from its source) plus the pass
rate of its details' ``passed``; thresholds are left for the maintainer to state, and kept when
the lanes are imported again. Every other folder with a runner is listed with why it was skipped.
Nothing is written for a lane until all of it is known; a file is replaced whole.
"""

from __future__ import annotations

import ast
import json
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from eval_pipeline.lanes.runner_spec import FRAMEWORK_KIND


@dataclass(frozen=True)
class ImportOptions:
    """How the lane files name the checkout: ``checkout`` as written in lane.yaml (a path, or
    ``${VAR}``), the interpreter, the checkout's short name, the engine-state variable."""

    checkout: str
    name: str = "framework"
    python: str | None = None
    state_env: str | None = None
    deadline_s: float | None = None


@dataclass
class ImportedLane:
    """One upstream lane as a lane folder: its files (relative path → text), or why it was skipped."""

    upstream: str
    folder: str = ""
    files: dict[str, str] = field(default_factory=dict)
    skipped: str = ""
    changes: list[str] = field(default_factory=list)


def _name(text: str) -> str:
    cleaned = re.sub(r"[^a-z0-9_]+", "_", text.lower()).strip("_")
    return cleaned if re.match(r"^[a-z]", cleaned) else f"m_{cleaned}"


def _source_of(lane: Path) -> ast.Module | None:
    try:
        return ast.parse((lane / "runner.py").read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None


def _has_run_lane(module: ast.Module) -> bool:
    for node in module.body:
        if isinstance(node, ast.FunctionDef) and node.name == "run_lane":
            return True
        if isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == "run_lane" for a in node.names):
            return True
    return False


def _delegate(module: ast.Module, evals: Path) -> Path | None:
    """The upstream lane whose runner this one's ``run_lane`` comes from (``from evals.X.runner import``)."""
    for node in ast.walk(module):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("evals."):
            parts = node.module.split(".")
            if len(parts) == 3 and parts[2] == "runner" and (evals / parts[1] / "runner.py").is_file():
                return evals / parts[1]
    return None


def _metric_keys(module: ast.Module) -> list[str]:
    """The text keys of the dicts a runner builds as its ``metrics``: a dict assigned to
    ``metrics`` or passed as ``metrics=``, or (``metrics=name``) every dict assigned to that
    name and every text key set on it (``name["key"] = ...``)."""
    keys: list[str] = []
    names = {"metrics"}
    for node in ast.walk(module):
        if isinstance(node, ast.keyword) and node.arg == "metrics" and isinstance(node.value, ast.Name):
            names.add(node.value.id)
    for node in ast.walk(module):
        found: ast.AST | None = None
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id in names for t in targets):
                found = node.value
            keys += [
                t.slice.value
                for t in targets
                if isinstance(t, ast.Subscript)
                and isinstance(t.value, ast.Name)
                and t.value.id in names
                and isinstance(t.slice, ast.Constant)
                and isinstance(t.slice.value, str)
            ]
        elif isinstance(node, ast.keyword) and node.arg == "metrics":
            found = node.value
        if isinstance(found, ast.Dict):
            keys += [k.value for k in found.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    return list(dict.fromkeys(keys))


def _has_passed(module: ast.Module) -> bool:
    return any(
        isinstance(node, ast.Dict)
        and any(isinstance(k, ast.Constant) and k.value == "passed" for k in node.keys)
        for node in ast.walk(module)
    )


def _case_files(lane: Path) -> dict[str, Path]:
    """The lane's splits and their one case file each: dev, public_<version> (empty files skipped)."""
    found: dict[str, Path] = {}
    if (lane / "dev" / "cases.jsonl").is_file():
        found["dev"] = lane / "dev" / "cases.jsonl"
    public = lane / "public"
    for version in sorted(p for p in public.iterdir() if p.is_dir()) if public.is_dir() else []:
        if (version / "cases.jsonl").is_file():
            found[f"public_{_name(version.name)}"] = version / "cases.jsonl"
    return {split: path for split, path in found.items() if path.read_text(encoding="utf-8").strip()}


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _id_field(splits: Mapping[str, list[dict[str, Any]]], *, across: bool) -> str | None:
    """The case field holding a unique text id in every case of every split (unique across
    the splits too with ``across``: a lane's case ids are), or None."""
    for candidate in ("id", "case_id"):
        ids = [[case.get(candidate) for case in cases] for cases in splits.values()]
        every = [i for of_split in ids for i in of_split]
        texts = all(isinstance(i, str) and i for i in every)
        unique = all(len(set(of_split)) == len(of_split) for of_split in ids)
        if texts and unique and (not across or len(set(every)) == len(every)):
            return candidate
    return None


def _with_ids(splits: dict[str, list[dict[str, Any]]]) -> tuple[str, bool, dict[str, list[dict[str, Any]]]]:
    """(id field, whether it was added, the cases): the cases' own ids when unique across the
    lane; else an added field, ``<split>.<own id>`` where each split's ids are unique, or
    ``<split>-<line>``."""
    own = _id_field(splits, across=True)
    if own is not None:
        return own, False, splits
    upstream = _id_field(splits, across=False)
    added = "id" if not any("id" in c for cases in splits.values() for c in cases) else "eval_case_id"

    def ident(split: str, n: int, case: dict[str, Any]) -> str:
        return f"{split}.{case[upstream]}" if upstream else f"{split}-{n:04d}"

    return (
        added,
        True,
        {s: [{added: ident(s, n, c), **c} for n, c in enumerate(cases, 1)] for s, cases in splits.items()},
    )


def import_lane(lane: Path, options: ImportOptions) -> ImportedLane:
    """One upstream lane folder as a lane folder's files, or why it cannot be one."""
    imported = ImportedLane(upstream=lane.name, folder=f"{_name(options.name)}_{_name(lane.name)}")
    module = _source_of(lane)
    if not (lane / "contract.md").is_file():
        imported.skipped = "no contract.md"
    elif module is None:
        imported.skipped = "runner.py does not parse"
    elif not _has_run_lane(module):
        imported.skipped = "runner.py has no run_lane"
    if imported.skipped:
        return imported
    assert module is not None
    paths = _case_files(lane)
    if not paths:
        imported.skipped = "no case files (dev/cases.jsonl, public/<version>/cases.jsonl)"
        return imported
    try:
        splits = {split: _records(path) for split, path in paths.items()}
    except ValueError as exc:
        imported.skipped = f"a case file is not JSON lines: {exc}"
        return imported
    delegate = _delegate(module, lane.parent)
    scanned = [module, *([m] if delegate is not None and (m := _source_of(delegate)) else [])]
    metrics = _metrics(scanned)
    if not metrics:
        imported.skipped = "no metric found in runner.py (no metrics dict, no passed field)"
        return imported
    id_field, added, splits = _with_ids(splits)
    for split, cases in splits.items():
        imported.files[f"{split}/cases.jsonl"] = "".join(
            json.dumps(c, ensure_ascii=False) + "\n" for c in cases
        )
    imported.files["contract.md"] = _contract(lane, options)
    imported.files["lane.yaml"] = _lane_yaml(
        imported.folder, lane, sorted(splits), metrics, id_field, added, options
    )
    return imported


def _metrics(modules: list[ast.Module]) -> dict[str, dict[str, str]]:
    metrics: dict[str, dict[str, str]] = {}
    if any(_has_passed(m) for m in modules):
        metrics["case_pass_rate"] = {"rate_of": "passed"}
    for module in modules:
        for key in _metric_keys(module):
            metrics.setdefault(_name(key), {"value": key})
    return metrics


def _contract(lane: Path, options: ImportOptions) -> str:
    upstream = (lane / "contract.md").read_text(encoding="utf-8")
    quoted = "\n".join(f"> {line}" if line else ">" for line in upstream.splitlines())
    return (
        f"# {lane.name} (imported from {options.name})\n\n"
        f"The upstream contract is `evals/{lane.name}/contract.md` in the checkout ({options.checkout}); "
        "it is quoted below as it was when this lane was imported. The lane runs the upstream runner "
        "as it is: its thresholds are for the maintainer to state in lane.yaml, citing this contract.\n\n"
        f"{quoted}\n"
    )


def _lane_yaml(
    folder: str,
    lane: Path,
    splits: list[str],
    metrics: dict[str, dict[str, str]],
    id_field: str,
    added: bool,
    options: ImportOptions,
) -> str:
    public = [s for s in splits if s.startswith("public_")]
    runner: dict[str, Any] = {"checkout": options.checkout, "lane": lane.name, "name": options.name}
    if options.python:
        runner["python"] = options.python
    runner["id_field"] = id_field
    if added:
        runner["added_id"] = True
    if options.state_env:
        runner["state_env"] = options.state_env
    if options.deadline_s:
        runner["deadline_s"] = options.deadline_s
    if "case_pass_rate" in metrics:
        runner["case_rows"] = {"hard": ["passed"]}
    runner["metrics"] = metrics
    document = {
        "name": folder,
        "kind": FRAMEWORK_KIND,
        "version": "1",
        "title": f"{lane.name} ({options.name})",
        "description": f"The upstream lane {lane.name}, run by its own runner.",
        "splits": {split: [f"{split}/cases.jsonl"] for split in splits},
        "nightly_splits": ["public_v1"] if "public_v1" in public else public[:1] or splits[:1],
        "runner": runner,
        "thresholds": [],
    }
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=100)


def import_checkout(checkout: Path, options: ImportOptions) -> list[ImportedLane]:
    """Every folder of ``checkout/evals`` holding a runner.py, imported or skipped, by name."""
    evals = checkout / "evals"
    if not evals.is_dir():
        raise FileNotFoundError(f"{checkout} has no evals folder: not a framework checkout")
    return [import_lane(lane, options) for lane in sorted(evals.iterdir()) if (lane / "runner.py").is_file()]


def kept_thresholds(files: dict[str, str], existing: Path) -> dict[str, str]:
    """``files`` with the thresholds (and nightly splits) the maintainer stated in the existing lane.yaml kept."""
    path = existing / "lane.yaml"
    if not path.is_file():
        return files
    try:
        old = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError:
        return files
    new = yaml.safe_load(files["lane.yaml"])
    for key in ("thresholds", "nightly_splits"):
        if key in old and (key != "nightly_splits" or all(s in new["splits"] for s in old[key])):
            new[key] = old[key]
    return {**files, "lane.yaml": yaml.safe_dump(new, sort_keys=False, allow_unicode=True, width=100)}


def changes(files: Mapping[str, str], folder: Path) -> list[str]:
    """What writing ``files`` into ``folder`` changes: each file added or changed, and the
    case files of splits no longer upstream."""
    found = []
    for relative, text in files.items():
        path = folder / relative
        if not path.is_file():
            found.append(f"+ {relative}")
        elif path.read_text(encoding="utf-8") != text:
            found.append(f"~ {relative}")
    if folder.is_dir():
        found += [
            f"- {p.relative_to(folder)}"
            for p in sorted(folder.glob("*/cases.jsonl"))
            if str(p.relative_to(folder)) not in files
        ]
    return found


def write_lane(files: Mapping[str, str], folder: Path) -> None:
    """Write each file whole (a temporary file renamed over it); remove case files no longer upstream."""
    for relative, text in files.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temp, path)
    for stale in folder.glob("*/cases.jsonl"):
        if str(stale.relative_to(folder)) not in files:
            stale.unlink()
