"""The README's picture: the viewer's page of the tour's red run, taken in headless Chromium.

Run from the repository's root to bring the picture up to date (it makes the tour's two runs
in a scratch state folder first; nothing of yours is read or written)::

    python docs/tools/screenshot.py docs/images/tour-red-run.png

``eval_pipeline_tests/browser/test_readme_picture.py`` runs it on every CI run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from eval_pipeline_tests.browser.chromium import browser_page  # noqa: E402

EVAL_PIPELINE = str(Path(sys.executable).parent / "eval-pipeline")
# The tour's runs (README, "A five-minute tour"): the lane passing, then failing for its reason.
GREEN = ["run", "--lane", "refusal_calibration"]
RED = ["run", "--lane", "refusal_calibration", "--runtime", "reference-no-refusal"]


def tour_runs(state: Path) -> tuple[dict[str, str], str]:
    """The environment of a scratch state folder holding the tour's runs, and the red run's id."""
    (state / "dagster_home").mkdir(parents=True)
    (state / "dagster_home" / "dagster.yaml").write_bytes((ROOT / "dagster.yaml").read_bytes())
    env = {
        **os.environ,
        "EVAL_PIPELINE_STATE": str(state),
        "EVAL_PIPELINE_HISTORY": str(state / "history"),
        "DAGSTER_HOME": str(state / "dagster_home"),
        "COLUMNS": "100",
    }
    for name in ("EVAL_PIPELINE_EVALS", "EVAL_PIPELINE_RUNTIME"):
        env.pop(name, None)
    green = subprocess.run([EVAL_PIPELINE, *GREEN], env=env, capture_output=True, text=True, check=False)
    red = subprocess.run([EVAL_PIPELINE, *RED], env=env, capture_output=True, text=True, check=False)
    if (green.returncode, red.returncode) != (0, 1):
        raise SystemExit(f"the tour's runs exited {green.returncode}, {red.returncode} (expected 0, 1)")
    found = re.search(r"^run ([0-9a-f]{8})", red.stdout, re.MULTILINE)
    if found is None:
        raise SystemExit("the red run printed no run id")
    return env, found.group(1)


def take(picture: Path) -> str:
    """Write the picture; return the text of the page it shows."""
    with tempfile.TemporaryDirectory() as scratch:
        env, red_run = tour_runs(Path(scratch) / "state")
        viewer = subprocess.Popen(
            [EVAL_PIPELINE, "view", "--port", "0"], env=env, stdout=subprocess.PIPE, text=True
        )
        try:
            assert viewer.stdout is not None
            address = re.search(r"http://127\.0\.0\.1:\d+", viewer.stdout.readline())
            if address is None:
                raise SystemExit("the viewer did not start")
            with browser_page(width=1100, height=760) as page:
                ui: object = page
                ui.goto(f"{address.group(0)}/runs/{red_run}")  # type: ignore[attr-defined]
                picture.parent.mkdir(parents=True, exist_ok=True)
                ui.screenshot(path=str(picture))  # type: ignore[attr-defined]
                return str(ui.inner_text("body"))  # type: ignore[attr-defined]
        finally:
            viewer.terminate()
            viewer.wait(timeout=10)


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "images" / "tour-red-run.png"
    take(target)
    print(f"wrote {target}")
