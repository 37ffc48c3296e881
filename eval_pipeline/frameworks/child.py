"""Run one upstream lane runner and write what it returned as JSON: the script a framework
checkout's own interpreter runs (``python child.py REQUEST OUTPUT``), so it imports nothing but
the standard library and the checkout.

REQUEST is a JSON file: ``{"checkout", "lane", "cases", "kwargs", "drop"}`` (``drop``: a field
to remove from each case before the runner sees it). OUTPUT receives ``{"metrics": {...},
"case_details": [...]}``; values JSON cannot hold are written as JSON can (an enum as its value,
a dataclass as an object, a set as a sorted list, anything else as its text). A runner that
raises exits 1 with its traceback on stderr and writes nothing.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib.util
import json
import math
import sys
from pathlib import Path
from typing import Any


def _jsonable(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return _jsonable(value.value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((_jsonable(v) for v in value), key=repr)
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN: a number that is not one is missing
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def _runner(checkout: Path, lane: str) -> Any:
    """The lane's runner module, loaded as the framework loads it (``evals.<lane>.runner``)."""
    path = checkout / "evals" / lane / "runner.py"
    name = f"evals.{lane}.runner"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def main(request_path: str, output_path: str) -> None:
    request = json.loads(Path(request_path).read_text(encoding="utf-8"))
    checkout = Path(request["checkout"])
    sys.path.insert(0, str(checkout))
    drop = request.get("drop")
    cases = [{k: v for k, v in case.items() if k != drop} for case in request["cases"]]
    report = _runner(checkout, request["lane"]).run_lane(cases, **request.get("kwargs", {}))
    document = {"metrics": _jsonable(report.metrics), "case_details": _jsonable(report.case_details)}
    text = json.dumps(document, ensure_ascii=False, allow_nan=False, default=str)
    Path(output_path).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
