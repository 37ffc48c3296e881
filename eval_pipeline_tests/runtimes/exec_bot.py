"""A runtime behind the exec: JSON-lines protocol (a reference session per session id).

Run as ``python exec_bot.py``; ``--crash-on WORD`` exits when a prompt contains WORD,
``--garble-on WORD`` answers such a prompt with a line that is not JSON.
"""

from __future__ import annotations

import argparse
import json
import sys

from eval_pipeline.runtimes.reference import ReferenceRuntime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--crash-on")
    parser.add_argument("--garble-on")
    args = parser.parse_args()
    runtime = ReferenceRuntime()
    sessions = {}
    for line in sys.stdin:
        request = json.loads(line)
        prompt = request["prompt"]
        if args.crash_on and args.crash_on in prompt:
            sys.exit(3)
        if args.garble_on and args.garble_on in prompt:
            print("this is not json", flush=True)
            continue
        session = sessions.setdefault(request["session"], runtime.open_session(request["session"]))
        response = session.send(prompt)
        print(json.dumps(response.model_dump(exclude={"raw"})), flush=True)


if __name__ == "__main__":
    main()
