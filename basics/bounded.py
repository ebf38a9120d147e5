"""Bounded readers of YAML and JSON files an operator hands vigil, which may be hostile.

A 1.4 KB YAML file whose anchors refer to anchors (``a: &a [x, x]``, ``b: &b [*a, *a]``, …, the
"billion laughs") is a few hundred nodes to the parser and billions of values to whatever walks it
afterwards (Ansible, ``repr()`` in an error message). Every admin-supplied YAML or JSON file is read
here, in three steps:

1. the file: a regular file (a FIFO would block the read) of at most ``max_bytes``;
2. the document's nodes, walked before anything is built from them: counting every alias at its
   full expansion, aliases may add at most ``max_alias_nodes`` nodes to the document's own, an
   alias may not refer to the node that holds it, and nesting is at most ``max_depth`` deep;
3. only then the values.

A refusal is one line naming the file and the reason; syntax errors are the parser's own
(``yaml.YAMLError``, ``json.JSONDecodeError``), for the caller to word as it always has.
:func:`shown` is the bounded ``repr()`` for putting a loaded value into a message.
"""

from __future__ import annotations

import json
import os
import reprlib
import stat
from pathlib import Path
from typing import Any

import yaml

from vigil.basics.errors import VigilError

#: the most bytes of one file read (an inventory file, site.yaml, an allocations file)
MAX_BYTES = 1 << 20
#: the most nodes a document's aliases may add to it, each alias counted at its full expansion
MAX_ALIAS_NODES = 10_000
#: the deepest nesting of lists and mappings
MAX_DEPTH = 64


class InputRefused(VigilError):
    """A file was refused before its content was used: too large, an alias bomb, nested too deep."""

    outcome = "refused"


def read_bounded(path: Path, *, max_bytes: int = MAX_BYTES, error: type[VigilError] = InputRefused) -> bytes:
    """The bytes of ``path``, a regular file (a link to one is followed) of at most ``max_bytes``."""
    where = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise error(where, f"cannot read: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise error(where, "not a regular file")
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise error(where, f"larger than {max_bytes} bytes (the most vigil reads of it); refused")
    return data


def load_yaml(
    data: str | bytes,
    where: str,
    *,
    loader: type[yaml.SafeLoader] = yaml.SafeLoader,
    max_alias_nodes: int = MAX_ALIAS_NODES,
    max_depth: int = MAX_DEPTH,
    error: type[VigilError] = InputRefused,
) -> Any:
    """One YAML document with ``loader`` (a SafeLoader or a subclass), its aliases bounded (step 2).

    Raises ``yaml.YAMLError`` for a syntax error, ``error`` for a document over the bounds. The size
    of ``data`` is the caller's (:func:`read_bounded`)."""
    parser = loader(data)
    try:
        try:
            node = parser.get_single_node()
        except RecursionError:
            raise error(where, f"nested deeper than {max_depth} levels; refused") from None
        if node is None:
            return None
        _check_nodes(node, where, max_alias_nodes=max_alias_nodes, max_depth=max_depth, error=error)
        try:
            return parser.construct_document(node)
        except ValueError as exc:  # not a YAMLError: e.g. an integer of more digits than Python reads
            raise error(where, f"a value vigil cannot read: {str(exc)[:200]}") from None
    finally:
        parser.dispose()


def load_yaml_file(
    path: Path,
    *,
    loader: type[yaml.SafeLoader] = yaml.SafeLoader,
    max_bytes: int = MAX_BYTES,
    max_alias_nodes: int = MAX_ALIAS_NODES,
    max_depth: int = MAX_DEPTH,
    error: type[VigilError] = InputRefused,
) -> Any:
    """:func:`read_bounded`, then :func:`load_yaml`."""
    data = read_bounded(path, max_bytes=max_bytes, error=error)
    return load_yaml(
        data, str(path), loader=loader, max_alias_nodes=max_alias_nodes, max_depth=max_depth, error=error
    )


def load_json(
    data: str | bytes, where: str, *, max_depth: int = MAX_DEPTH, error: type[VigilError] = InputRefused
) -> Any:
    """A JSON value nested at most ``max_depth`` deep (JSON has no aliases; its size is the caller's
    :func:`read_bounded`). Raises ``ValueError`` (``json.JSONDecodeError``) for bad JSON."""
    try:
        doc = json.loads(data)
    except RecursionError:
        raise error(where, f"nested deeper than {max_depth} levels; refused") from None
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        for child in children:
            if isinstance(child, dict | list):
                if depth + 1 > max_depth:
                    raise error(where, f"nested deeper than {max_depth} levels; refused")
                stack.append((child, depth + 1))
    return doc


def load_json_file(
    path: Path,
    *,
    max_bytes: int = MAX_BYTES,
    max_depth: int = MAX_DEPTH,
    error: type[VigilError] = InputRefused,
) -> Any:
    """:func:`read_bounded`, then :func:`load_json`."""
    return load_json(
        read_bounded(path, max_bytes=max_bytes, error=error), str(path), max_depth=max_depth, error=error
    )


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _check_nodes(
    root: yaml.Node, where: str, *, max_alias_nodes: int, max_depth: int, error: type[VigilError]
) -> None:
    """Step 2, on the composed nodes (an alias is the very node its anchor names, so the document is
    a graph): each node's size with every alias expanded and its depth, memoised, without recursion."""
    expanded: dict[int, int] = {}
    depth: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            on_path.discard(key)
            kids = _children(node)
            expanded[key] = 1 + sum(expanded[id(k)] for k in kids)
            depth[key] = 1 + max((depth[id(k)] for k in kids), default=0)
            if depth[key] > max_depth:
                raise error(where, f"nested deeper than {max_depth} levels; refused")
            if expanded[key] - len(expanded) > max_alias_nodes:
                raise error(
                    where,
                    f"its aliases (YAML anchors and *references) expand it by more than {max_alias_nodes} "
                    "values; refused",
                )
            continue
        if key in expanded:
            continue
        if key in on_path:
            raise error(where, "an alias refers to the node that holds it (a recursive YAML anchor); refused")
        on_path.add(key)
        stack.append((node, True))
        stack.extend((k, False) for k in _children(node) if id(k) not in expanded)


_REPR = reprlib.Repr()
_REPR.maxlevel = 2
_REPR.maxdict = _REPR.maxlist = _REPR.maxtuple = _REPR.maxset = _REPR.maxfrozenset = 4
_REPR.maxstring = _REPR.maxother = _REPR.maxlong = 80


def shown(value: Any, limit: int = 60) -> str:
    """``repr(value)`` in at most ``limit`` characters, in time that does not grow with the value: a
    loaded value may be a bomb of billions of items, and must never be printed whole into a message."""
    try:
        text = _REPR.repr(value)
    except ValueError:  # an integer of more digits than Python converts to text
        text = f"<an integer of {value.bit_length()} bits>" if isinstance(value, int) else "<a value>"
    return text if len(text) <= limit else text[: max(limit - 3, 0)] + "..."
