"""Bounds the command line, the lane and target declarations and the run resource share: constants
only, so the command line can declare its options without loading what they bound."""

MAX_REPEAT = 1000  # samples of one case in one run
MAX_CONCURRENCY = 1024  # sessions one run has in flight at once
