"""The tags of a lane run, named once.

The Dagster UI shows a run's tags in its tag strip, except those under Dagster's hidden prefix
``.dagster/`` (no public API names it). A run shows the few a person reads: Dagster's partition
tags (the series: case set and runtime target; the job names the lane), the night and the
verdict. What code reads to find runs is kept out of sight. (No Dagster import here: the
commands that only look for dead runs read these names before Dagster is loaded.)
"""

HIDDEN_TAG_PREFIX = ".dagster/eval_pipeline/"
DATE_TAG = "eval_pipeline/date"  # the night a run belongs to (YYYY-MM-DD); default: the day it started
VERDICT_TAG = "eval_pipeline/verdict"  # pass, warn, fail or void: added when the run is in history
LANE_TAG = f"{HIDDEN_TAG_PREFIX}lane"
SERIES_TAG = f"{HIDDEN_TAG_PREFIX}series"  # Series.key: lane/split/runtime/case_set
HOST_TAG = f"{HIDDEN_TAG_PREFIX}host"
PID_TAG = f"{HIDDEN_TAG_PREFIX}pid"  # the process running an in-process (CLI) run: dead → the run failed
