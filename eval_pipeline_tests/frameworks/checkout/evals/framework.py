"""A small eval framework of the protocol the pipeline runs: a lane is evals/<lane>/ with a
contract.md and a runner.py whose run_lane(cases, **kwargs) returns a report with .metrics and
.case_details (one detail per case, in order)."""
