"""An ``exec:`` child that answers every request with the lines of a file, as they are.

``python reply_child.py FILE``: for each request it writes FILE's lines (``{id}`` replaced by
the request's id), byte for byte, however wrong they are; a line ``<exit>`` makes it exit with
code 3, and an empty FILE makes it never answer.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main() -> None:
    replies = [line for line in Path(sys.argv[1]).read_bytes().split(b"\n")[:-1]]
    for request in sys.stdin.buffer:
        request_id = str(json.loads(request)["id"]).encode()
        for line in replies:
            if line == b"<exit>":
                sys.exit(3)
            sys.stdout.buffer.write(line.replace(b"{id}", request_id) + b"\n")
        sys.stdout.buffer.flush()


if __name__ == "__main__":
    main()
