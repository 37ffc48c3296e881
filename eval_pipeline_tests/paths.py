"""Where this repository's own files are, for the tests that read them (the package itself
finds its project from the working directory: eval_pipeline/core/settings.py)."""

from __future__ import annotations

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
