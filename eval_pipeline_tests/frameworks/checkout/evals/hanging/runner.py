"""A runner that hangs."""

import time
from typing import Any


def run_lane(cases: list[dict[str, Any]], **kwargs: Any) -> Any:
    while True:
        time.sleep(1)
