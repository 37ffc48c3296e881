"""What identifies a runtime target's behaviour: its **runtime version**.

Results measured against a target stay valid only while the runtime behind its name
behaves the same. Each scheme says what pins that behaviour down:

- ``reference``: the package version, the mode (gloss or not) and the SHA-256 of the concept
  pack it answers from;
- ``openai:``: what the server reports for the configured model at ``GET /models`` (the
  whole entry: id, created, owner, any version field), plus the spec and options. A server
  that does not serve ``GET /models`` (many OpenAI-compatible servers answer chat completions
  only) is asked one chat completion of one token instead, and its reply's ``model`` field
  stands for the entry; the run says so once (a warning);
- ``exec:``: the command line, plus the content hash of the program and of every argument
  that names a file;
- ``python:``: the content hash of the module file (or every ``.py`` file of the package)
  the target names;
- ``replay:``: the content hash of the recorded file.

:func:`runtime_version` returns the facts and one short digest of them (the Dagster data
version of the target's ``runtime_targets`` partition). Options that name secrets are
included by *name* only, like everywhere else.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval_pipeline import __version__
from eval_pipeline.runtimes.base import RuntimeSpecError
from eval_pipeline.runtimes.redaction import redacted_spec, scrubbed
from eval_pipeline.runtimes.registry import split_spec

LOG = logging.getLogger(__name__)
MODELS_TIMEOUT_S = 10.0
# What a server answers to ``GET /models`` when it has no such route: it lists no models.
NOT_LISTING_STATUS = frozenset({400, 404, 405, 410, 501})
# A server's reply model, once asked, is kept this long: a run asks for its version from
# several steps (cache, journal, observation), and one probe (and one note) serves them all.
PROBED_MODEL_TTL_S = 300.0
_probed: dict[tuple[str, str], tuple[float, dict[str, Any]]] = {}
_probed_lock = threading.Lock()


@dataclass(frozen=True)
class RuntimeVersion:
    """The facts that pin a runtime's behaviour, and their digest (16 hex)."""

    facts: Mapping[str, Any]

    @property
    def digest(self) -> str:
        canonical = json.dumps(dict(self.facts), sort_keys=True, default=str)
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def tree_sha256(root: Path, pattern: str = "*.py") -> str:
    """One hash over every file matching ``pattern`` under ``root`` (relative paths and contents)."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob(pattern)):
        if "__pycache__" in path.parts:
            continue
        digest.update(str(path.relative_to(root)).encode() + b"\0" + file_sha256(path).encode() + b"\0")
    return digest.hexdigest()


def runtime_version(spec: str, options: Mapping[str, Any]) -> RuntimeVersion:
    """The runtime version of ``spec`` with ``options``. RuntimeSpecError when it cannot be
    determined (a file that is gone, a server that does not answer)."""
    scheme, argument = split_spec(spec)
    base: dict[str, Any] = {"spec": spec.strip(), "options": dict(options)}
    if scheme == "reference":
        return RuntimeVersion({**base, **_reference_facts(options)})
    if scheme == "openai":
        return RuntimeVersion({**base, "model": served_model(argument, options)})
    if scheme == "exec":
        return RuntimeVersion({**base, "files": _exec_files(argument, options)})
    if scheme == "python":
        return RuntimeVersion({**base, "module_sha256": _python_module_sha256(argument, options)})
    if scheme == "replay":
        return RuntimeVersion({**base, "file_sha256": _file_or_error(Path(argument).expanduser())})
    # A scheme this module does not know: its spec and options are all we can pin.
    return RuntimeVersion(base)


def _file_or_error(path: Path) -> str:
    try:
        return file_sha256(path)
    except OSError as exc:
        raise RuntimeSpecError(f"cannot hash {path}: {exc.strerror or exc}") from None


def _reference_facts(options: Mapping[str, Any]) -> dict[str, Any]:
    from eval_pipeline.runtimes.reference.pack import pack_sha256

    pack = options.get("pack")
    try:
        return {"package_version": __version__, "pack_sha256": pack_sha256(pack or None)}
    except OSError as exc:
        raise RuntimeSpecError(f"reference pack {pack}: {exc.strerror or exc}") from None


def served_model(base_url: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """The entry the server lists for the configured model at ``GET {base_url}/models``; for a
    server that does not serve that route, what a reply says of its model
    (:func:`replied_model`)."""
    import openai

    from eval_pipeline.runtimes.adapters.openai_http import public_url

    model = options.get("model")
    shown_url = redacted_spec(base_url)
    client = _client(base_url, options)
    try:
        listed = [entry.model_dump() for entry in client.models.list()]
    except openai.APIStatusError as exc:
        if exc.status_code not in NOT_LISTING_STATUS:
            raise RuntimeSpecError(f"GET {public_url(base_url)}/models: HTTP {exc.status_code}") from None
        return replied_model(base_url, options, f"GET /models answered HTTP {exc.status_code}")
    except openai.OpenAIError as exc:
        # The server's words may echo the request back: scrubbed before cut, so no part stays.
        detail = scrubbed(str(exc), base_url)[:300]
        raise RuntimeSpecError(f"GET {shown_url}/models: {type(exc).__name__}: {detail}") from None
    finally:
        client.close()
    for entry in listed:
        if entry.get("id") == model:
            return entry
    raise RuntimeSpecError(
        f"GET {shown_url}/models does not list model {model!r} (listed: {[e.get('id') for e in listed]})"
    )


def replied_model(base_url: str, options: Mapping[str, Any], why: str) -> dict[str, Any]:
    """What a one-token chat completion says of the model that answered (its ``model`` field),
    for a server that lists no models (``why``). Asked once per target within
    :data:`PROBED_MODEL_TTL_S`; the first time, a warning says what the version is made of."""
    import openai

    from eval_pipeline.runtimes.adapters.openai_http import public_url

    key = (base_url, json.dumps(dict(options), sort_keys=True, default=str))
    with _probed_lock:
        found = _probed.get(key)
        if found is not None and time.monotonic() - found[0] < PROBED_MODEL_TTL_S:
            return found[1]
        client = _client(base_url, options)
        try:
            reply = client.chat.completions.create(
                model=str(options.get("model")),
                messages=[{"role": "user", "content": "Say OK."}],
                max_tokens=1,
            )
        except openai.OpenAIError as exc:
            status = getattr(exc, "status_code", None)
            cause = f"HTTP {status}" if status is not None else type(exc).__name__
            raise RuntimeSpecError(
                f"{public_url(base_url)}: {why}, and a one-token chat completion to read the "
                f"replying model failed ({cause})"
            ) from None
        finally:
            client.close()
        entry = {"listed": False, "replied_model": reply.model}
        _probed[key] = (time.monotonic(), entry)
    LOG.warning(
        "runtime version of openai:%s: %s (the server lists no models); the version is the "
        "target's spec and options and the model its replies name (%r)",
        public_url(base_url),
        why,
        reply.model,
    )
    return entry


def _client(base_url: str, options: Mapping[str, Any]) -> Any:
    """A synchronous SDK client for ``base_url`` with the target's key and headers."""
    import openai

    api_key_env = options.get("api_key_env")
    api_key = (os.environ.get(api_key_env) if isinstance(api_key_env, str) else None) or "unused"
    headers = dict(options.get("headers") or {})
    for header, env in dict(options.get("header_envs") or {}).items():
        headers[header] = os.environ.get(env, "")
    return openai.OpenAI(
        base_url=base_url, api_key=api_key, default_headers=headers, timeout=MODELS_TIMEOUT_S, max_retries=1
    )


def _exec_files(argument: str, options: Mapping[str, Any]) -> dict[str, str]:
    """Content hashes of the program and of every argument that names an existing file."""
    from eval_pipeline.runtimes.adapters.exec_process import exec_argv, resolve_command

    argv = exec_argv(argument)
    cwd = options.get("cwd")
    env = {**os.environ, **dict(options.get("env") or {})}
    program, *args = resolve_command(argv, env, cwd if isinstance(cwd, str) else None)
    files = {program: _file_or_error(Path(program))}
    for arg in args:
        path = Path(cwd or ".", arg) if not os.path.isabs(arg) else Path(arg)
        if path.is_file():
            files[arg] = _file_or_error(path)
    return files


def _python_module_sha256(argument: str, options: Mapping[str, Any]) -> str:
    """The hash of the module a ``python:`` target names (its package's files for a package)."""
    from eval_pipeline.runtimes.adapters.python_object import _import_paths

    module_name = argument.partition(":")[0]
    paths = [str(p) for p in options.get("paths") or []]
    with _import_paths(paths):
        try:
            found = importlib.util.find_spec(module_name)
        except (ImportError, ValueError) as exc:
            raise RuntimeSpecError(f"python runtime: cannot find {module_name!r}: {exc}") from None
    if found is None or found.origin is None or not os.path.isfile(found.origin):
        raise RuntimeSpecError(f"python runtime: cannot find the source of {module_name!r}")
    origin = Path(found.origin)
    if origin.name == "__init__.py":
        return tree_sha256(origin.parent)
    return file_sha256(origin)
