"""Credentials out of every runtime spec that is stored or shown.

A spec is the one text a person may put a secret into by mistake: ``openai:http://user:sk-…@host/v1``,
``openai:https://host/v1?api_key=…``, an ``exec:`` command with a tokened URL among its
arguments. :func:`redacted_spec` is what every stored and printed spec goes through (the
``runtime_spec`` of history's ``run_manifests``, asset metadata, log lines, error messages):
every URL in it loses its userinfo, and query values whose name looks secret (key, token,
secret, password, auth, signature, credential, code) or whose value looks like an API key are
replaced. The spec a runtime is built from is not changed: only what is written down.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit, urlunsplit

REDACTED = "***"
_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")
# ``code``: an OAuth authorization code or an Azure Functions key travels as ``?code=…``.
_SECRET_NAME = re.compile(r"key|token|secret|passw|pwd|auth|sig|credential|session|code|jwt", re.IGNORECASE)
_SECRET_VALUE = re.compile(r"^(sk|pk|rk|ghp|gho|xox[abp])[-_]", re.IGNORECASE)


def redacted_url(url: str) -> str:
    """``url`` without its userinfo and with its secret-looking query values replaced."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:  # not a URL Python can take apart: keep nothing after the scheme's host
        return url.split("://", 1)[0] + "://" + REDACTED
    if ":" in host:  # an IPv6 literal keeps its brackets
        host = f"[{host}]"
    netloc = (f"{REDACTED}@" if "@" in parts.netloc else "") + host + (f":{port}" if port is not None else "")
    # A fragment of name=value pairs carries tokens too (an OAuth implicit flow's #access_token=).
    fragment = _redacted_pairs(parts.fragment) if "=" in parts.fragment else parts.fragment
    return urlunsplit((parts.scheme, netloc, parts.path, _redacted_pairs(parts.query), fragment))


def _redacted_pairs(text: str) -> str:
    return "&".join(
        f"{quote(name, safe='')}=" + (REDACTED if _secret(name, value) else quote(value, safe=""))
        for name, value in parse_qsl(text, keep_blank_values=True)
    )


def url_secrets(url: str) -> list[str]:
    """The secrets :func:`redacted_url` hides in ``url`` (its userinfo's password, or its name
    when it has none, as in ``https://TOKEN@host``; its secret query values): what to scrub from a
    server's words, which may echo a request's path and query without the rest of the URL."""
    try:
        parts = urlsplit(url)
        found = [parts.password or parts.username or ""]
    except ValueError:
        return []
    pairs = parse_qsl(parts.query, keep_blank_values=True) + parse_qsl(parts.fragment, keep_blank_values=True)
    found += [value for name, value in pairs if _secret(name, value)]
    return [text for text in found if text]


def scrubbed(text: str, url: str) -> str:
    """``text`` (a server's message about a request to ``url``) with every URL in it redacted
    and every secret of ``url`` replaced, wherever it is echoed."""
    text = redacted_spec(text)
    for secret in url_secrets(url):
        text = text.replace(secret, REDACTED)
    return text


def _secret(name: str, value: str) -> bool:
    return bool(_SECRET_NAME.search(name) or _SECRET_VALUE.match(value))


def redacted_spec(spec: str) -> str:
    """``spec`` with every URL in it redacted (see :func:`redacted_url`); safe to store and print."""
    return _URL.sub(lambda found: redacted_url(found.group()), spec)


def redacted_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Runtime options safe to print and store: a value under a secret-looking name
    (``api_key``, ``Authorization``), or that looks like an API key, is replaced, in nested
    mappings and lists too; a text value's URLs are redacted."""
    return {name: _redacted_value(str(name), value) for name, value in options.items()}


def _redacted_value(name: str, value: Any) -> Any:
    """One option's value safe to print; a list's items are judged under the list's name."""
    if isinstance(value, Mapping):
        return redacted_options(value)
    if isinstance(value, list | tuple):
        return [_redacted_value(name, item) for item in value]
    if isinstance(value, str):
        secret = _SECRET_NAME.search(name) or _SECRET_VALUE.match(value) or " sk-" in f" {value}"
        return REDACTED if secret else redacted_spec(value)
    return value
