"""Bounds the command line and the lane declarations share: constants only, so the command line
can declare its options without loading what they bound."""

MAX_REPEAT = 1000  # samples of one case in one run
