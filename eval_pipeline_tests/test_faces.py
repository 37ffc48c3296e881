"""The rooms' faces (``eval_pipeline.<room>``): every name a face exports resolves to the object
its module defines, from a fresh interpreter and through pickling (worker processes and Celery
pickle what they run by module and name); importing a face loads none of its room's modules;
and the seven faces share one ``__getattr__`` (``core.faces.lazy_exports``) instead of a copy each."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from typing import Any

import pytest

from eval_pipeline_tests.paths import PROJECT_ROOT

FACES = ("core", "tables", "metrics", "outcome", "run", "report", "dagster_wiring")

PROBE = """
import importlib, json, pickle, sys
face = importlib.import_module(sys.argv[1])
loaded_by_face = sorted(m for m in sys.modules if m.startswith("eval_pipeline."))
wrong = []
for name, module in face._EXPORTS.items():
    got = getattr(face, name)
    defined = getattr(importlib.import_module(f"{face.__name__}.{module}"), name)
    if got is not defined:
        wrong.append(name)
    elif callable(got) and getattr(got, "__module__", "").startswith("eval_pipeline.") and hasattr(got, "__qualname__"):
        if pickle.loads(pickle.dumps(got)) is not got:
            wrong.append(f"{name} (pickled)")
try:
    face.no_such_name
    missing = None
except AttributeError as exc:
    missing = str(exc)
star = {}
exec(f"from {face.__name__} import *", star)
print(json.dumps({
    "loaded_by_face": loaded_by_face,
    "wrong": wrong,
    "missing": missing,
    "star": sorted(k for k in star if k != "__builtins__"),
    "all": sorted(face.__all__),
    "exports": sorted(face._EXPORTS),
}))
"""


def _probe(face: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, face], cwd=PROJECT_ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    probed: dict[str, Any] = json.loads(done.stdout)
    return probed


@pytest.mark.parametrize("room", FACES)
def test_every_name_a_face_exports_resolves_from_a_fresh_interpreter(room: str) -> None:
    face = f"eval_pipeline.{room}"
    probed = _probe(face)
    assert probed["wrong"] == []
    assert probed["missing"] == f"module {face!r} has no attribute 'no_such_name'"
    assert probed["star"] == probed["all"] == probed["exports"]
    # Importing the face loads the faces' helper (the core face with it) and no other module.
    assert set(probed["loaded_by_face"]) <= {"eval_pipeline.core", "eval_pipeline.core.faces", face}


def test_the_faces_share_one_getattr() -> None:
    for room in FACES:
        face = importlib.import_module(f"eval_pipeline.{room}")
        resolve = face.__getattr__
        assert resolve.__qualname__ == "lazy_exports.<locals>.__getattr__", room
        assert "def __getattr__" not in (PROJECT_ROOT / "eval_pipeline" / room / "__init__.py").read_text(
            encoding="utf-8"
        )
