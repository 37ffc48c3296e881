"""The one YAML reader: every YAML file the project reads (``lane.yaml``, ``runtimes.yaml``).

It is total and bounded: a file either becomes plain data (mappings, lists, scalars) with the
line of every key and list item, or a list of problems (``file:line: field: message``), never
an exception and never unbounded work.

- The file must be UTF-8 (a bad byte is reported at its line) and at most :data:`MAX_BYTES`.
- Only YAML's safe types: a ``!!python/...`` tag (or any unknown tag) is a problem.
- Nesting deeper than :data:`MAX_DEPTH` is a problem, found while composing (PyYAML's
  composer recurses, so 10,000 levels would otherwise end in a ``RecursionError``).
- Anchors and aliases (and ``<<`` merges) work, but what they expand to is bounded: more than
  :data:`MAX_NODES` nodes, or an expansion deeper than :data:`MAX_DEPTH` (a "billion laughs"
  document of a few hundred bytes), is a problem found without expanding anything; an alias
  to its own ancestor (a cycle) is one too.
- An integer is at most :data:`MAX_INTEGER_CHARS` characters long: Python refuses to make
  (or print) an integer of thousands of digits, and nothing a project file holds needs one.
- A key declared twice in one mapping is a problem (YAML readers disagree on which wins), and
  keys must be text: these come back as :attr:`YamlDocument.key_problems`, for the reader to
  report with the rest of what it finds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from eval_pipeline.cases.loading import CaseProblem, FileProblemsError

MAX_BYTES = 4 << 20
MAX_DEPTH = 64
MAX_NODES = 100_000
MAX_INTEGER_CHARS = 100
_INT_TAG = "tag:yaml.org,2002:int"
Location = tuple[str | int, ...]


@dataclass(frozen=True)
class YamlDocument:
    """A YAML file's data and the line of every key and list item (by its path)."""

    name: str
    data: Any
    lines: Mapping[Location, int]
    # Keys declared twice or not text: the data is still built (the last of a repeated key
    # stands), so a reader can report these with everything else it finds, then refuse the file.
    key_problems: tuple[CaseProblem, ...] = ()

    def line_of(self, loc: Location) -> int:
        """The line of the deepest key or item ``loc`` names (1 when none is known)."""
        for end in range(len(loc), 0, -1):
            line = self.lines.get(tuple(loc[:end]))
            if line is not None:
                return line
        return 1

    def problem(self, loc: Location, message: str) -> CaseProblem:
        return CaseProblem(self.name, self.line_of(loc), dotted(loc), message)


def dotted(loc: Location) -> str:
    """``("targets", "a", "options")`` → ``targets.a.options``; list items as ``[i]``."""
    return (
        "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else str(p)) for i, p in enumerate(loc))
        or "(file)"
    )


def location(field: str) -> Location:
    """:func:`dotted` read back: ``turn_predicates[0].where`` → ``("turn_predicates", 0, "where")``."""
    parts: list[str | int] = []
    for name, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", field):
        parts.append(int(index) if index else name)
    return tuple(parts)


def read_yaml_file(path: Path, error: type[FileProblemsError] = FileProblemsError) -> YamlDocument:
    """The file at ``path`` as a :class:`YamlDocument`; every problem raises ``error`` (the
    reader's own class of :class:`FileProblemsError`)."""
    name = str(path)
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
    except OSError as exc:
        raise error([CaseProblem(name, 0, "(file)", f"cannot be read: {exc.strerror or exc}")]) from None
    if len(raw) > MAX_BYTES:
        raise error([CaseProblem(name, 0, "(file)", f"is larger than {MAX_BYTES >> 20} MB")])
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise error(
            [CaseProblem(name, line, "(file)", f"not UTF-8 text: byte 0x{raw[exc.start]:02x} ({exc.reason})")]
        ) from None
    return parse_yaml(name, text, error)


def parse_yaml(name: str, text: str, error: type[FileProblemsError] = FileProblemsError) -> YamlDocument:
    """``text`` (the content of file ``name``) as a :class:`YamlDocument`, else ``error``."""
    try:
        loader = _BoundedLoader(text)  # its reader refuses characters YAML does not allow (NUL) at once
    except yaml.reader.ReaderError as exc:
        line = text[: exc.position].count("\n") + 1
        raise error([CaseProblem(name, line, "(yaml)", f"not valid YAML: {exc.reason}")]) from None
    try:
        node = loader.get_single_node()
        if node is None:
            return YamlDocument(name, None, {})
        expansion = _expansion_problems(name, node)
        if expansion:
            raise error(expansion)
        lines: dict[Location, int] = {}
        key_problems = _walk(name, node, lines)
        data = loader.construct_document(node)
    except _TooDeep as exc:
        raise error(
            [CaseProblem(name, exc.line, "(yaml)", f"nested deeper than {MAX_DEPTH} levels")]
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark is not None else 1
        raise error([CaseProblem(name, line, "(yaml)", f"not valid YAML: {_first_line(exc)}")]) from None
    finally:
        loader.dispose()
    return YamlDocument(name, data, lines, tuple(key_problems))


def _first_line(exc: yaml.YAMLError) -> str:
    """PyYAML's message without its quoted excerpt of the file (the line number says where)."""
    problem = getattr(exc, "problem", None)
    context = getattr(exc, "context", None)
    words = " ".join(str(part) for part in (context, problem) if part)
    return words or str(exc).splitlines()[0]


class _TooDeep(Exception):
    def __init__(self, line: int) -> None:
        super().__init__(line)
        self.line = line


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader whose composer refuses nesting deeper than MAX_DEPTH."""

    _depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _TooDeep(self.peek_event().start_mark.line + 1)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _expansion_problems(name: str, root: yaml.Node) -> list[CaseProblem]:
    """Whether the document, aliases expanded, stays within MAX_NODES nodes and MAX_DEPTH levels,
    and its integers within MAX_INTEGER_CHARS: each distinct node is measured once (an alias is
    the same node object), with no recursion, and nothing is constructed yet."""
    sizes: dict[int, tuple[int, int]] = {}  # id(node) -> (nodes, depth) once expanded
    visiting: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            parts = [sizes[id(child)] for child in _children(node)]
            nodes = 1 + sum(size for size, _ in parts)
            depth = 1 + max((d for _, d in parts), default=0)
            visiting.discard(key)
            if nodes > MAX_NODES or depth > MAX_DEPTH:
                what = (
                    f"more than {MAX_NODES} nodes" if nodes > MAX_NODES else f"deeper than {MAX_DEPTH} levels"
                )
                return [
                    CaseProblem(
                        name, node.start_mark.line + 1, "(yaml)", f"its anchors and aliases expand to {what}"
                    )
                ]
            sizes[key] = (nodes, depth)
            continue
        if key in sizes:
            continue
        if isinstance(node, yaml.ScalarNode) and node.tag == _INT_TAG and len(node.value) > MAX_INTEGER_CHARS:
            return [
                CaseProblem(
                    name,
                    node.start_mark.line + 1,
                    "(yaml)",
                    f"an integer of {len(node.value)} characters (at most {MAX_INTEGER_CHARS})",
                )
            ]
        if key in visiting:
            return [
                CaseProblem(name, node.start_mark.line + 1, "(yaml)", "an alias refers to its own ancestor")
            ]
        visiting.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in sizes)
    return []


def _walk(name: str, root: yaml.Node, lines: dict[Location, int]) -> list[CaseProblem]:
    """The line of every key and list item (into ``lines``); duplicate and non-text keys are
    problems. The expansion is bounded already, so the walk is too."""
    problems: list[CaseProblem] = []
    stack: list[tuple[yaml.Node, Location]] = [(root, ())]
    while stack:
        node, path = stack.pop()
        if isinstance(node, yaml.MappingNode):
            seen: dict[str, int] = {}
            for key_node, value_node in node.value:
                line = key_node.start_mark.line + 1
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag not in _TEXT_KEY_TAGS:
                    problems.append(
                        CaseProblem(
                            name, line, dotted(path), "keys must be text (quote a key such as 1 or yes)"
                        )
                    )
                    continue
                key = str(key_node.value)
                if key in seen:
                    problems.append(
                        CaseProblem(
                            name, line, dotted((*path, key)), f"duplicate key (first at line {seen[key]})"
                        )
                    )
                    continue
                seen[key] = line
                lines[(*path, key)] = line
                stack.append((value_node, (*path, key)))
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                lines[(*path, index)] = item.start_mark.line + 1
                stack.append((item, (*path, index)))
    return sorted(problems, key=lambda p: p.line)


_TEXT_KEY_TAGS = frozenset({"tag:yaml.org,2002:str", "tag:yaml.org,2002:merge"})
