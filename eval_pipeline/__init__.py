"""eval-pipeline: deterministic evaluation lanes for chat runtimes, wired by Dagster."""

__version__ = "0.1.0"
