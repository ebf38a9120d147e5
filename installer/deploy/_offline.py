"""Inventory variables templated offline without running anything: what ``inventory check``,
``inventory edit`` and a deploy's pre-flight evaluate, and what they leave to the play.

A template in an inventory is code: ``{{ lookup('pipe', 'touch /tmp/x') }}`` runs a command on the
host that renders it, and ansible-core 2.19 has no switch that turns lookups off (``Templar``'s
``disable_lookups`` is deprecated and ignored). So a value is judged before it is rendered, in two
layers:

1. Each template is parsed (Jinja's own parser) and rendered only if every part of it is on an
   allow-list: variables, constants, ``~ + - /``, comparisons, ``and/or/not``, ``if``, literals,
   and a few filters and tests that compute nothing big (``default``, ``int``, ``bool``,
   ``dirname``, …). Anything else is *deferred* (evaluated at deploy time, not here): a call of any
   kind (``lookup``, ``query``, ``q``, however wrapped: ``(lookup)(…)``, ``{% set x = lookup(…) %}``),
   a name of one of Jinja's or Ansible's functions, another filter (``…|map('lookup')``), loops,
   ``{% set %}``, ``*``, ``**``, ``%``, attributes starting with ``_``, a template inside a string
   constant (Ansible renders those), a ``#jinja2:`` header that changes the delimiters, or text
   that does not parse. A value is rendered only if every variable it reaches is allowed too, it
   refers to itself nowhere, and what it can expand to (each reference counted at its own size, six
   times over for the quoting a list gets as text) stays under ``MAX_EXPANSION`` characters.
2. While the allowed values are rendered with Ansible's templar, every lookup plugin is refused
   (:func:`no_lookups`): if layer 1 ever let one through, the lookup is not run and the value is
   deferred.

A deferred value is still checked where its type is known without rendering it: a list or a mapping
written in YAML is checked for the option's type (not its elements).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from jinja2 import Environment, TemplateSyntaxError, nodes

#: the most characters a value may expand to through the variables it uses and still be rendered
MAX_EXPANSION = 1 << 20
#: how much longer a value can get as text than as data (a list of one-letter strings: `'a', `)
_AS_TEXT = 6

DEFERRED = "deferred: evaluated at deploy time"
LOOKUP = "it runs a lookup"

#: functions Ansible and Jinja put in every template; the lookups are named apart
_LOOKUPS = frozenset({"lookup", "query", "q"})
_FUNCTIONS = frozenset({"range", "dict", "lipsum", "cycler", "joiner", "namespace", "now", "undef", "self"})
#: names that are data, not functions
_NAMES_OK = frozenset({"omit"})

#: filters that return their input, a part of it, or a scalar: nothing larger than what they read
_FILTERS = frozenset(
    {
        "default",
        "d",
        "mandatory",
        "int",
        "float",
        "bool",
        "lower",
        "upper",
        "capitalize",
        "title",
        "trim",
        "length",
        "count",
        "first",
        "last",
        "min",
        "max",
        "unique",
        "sort",
        "reverse",
        "abs",
        "round",
        "basename",
        "dirname",
        "ternary",
        "combine",
        "dict2items",
        "items2dict",
        "type_debug",
    }
)
#: tests that answer yes or no about a value
_TESTS = frozenset(
    {
        "defined",
        "undefined",
        "none",
        "number",
        "string",
        "mapping",
        "sequence",
        "iterable",
        "boolean",
        "integer",
        "float",
        "truthy",
        "falsy",
        "true",
        "false",
        "eq",
        "equalto",
        "==",
        "ne",
        "!=",
        "lt",
        "<",
        "le",
        "<=",
        "gt",
        ">",
        "ge",
        ">=",
        "in",
        "odd",
        "even",
        "lower",
        "upper",
        "sameas",
    }
)
_NODES: tuple[type[nodes.Node], ...] = (
    nodes.Template,
    nodes.Output,
    nodes.TemplateData,
    nodes.Const,
    nodes.Name,
    nodes.Getattr,
    nodes.Getitem,
    nodes.Slice,
    nodes.Filter,
    nodes.Test,
    nodes.CondExpr,
    nodes.And,
    nodes.Or,
    nodes.Not,
    nodes.Neg,
    nodes.Pos,
    nodes.Compare,
    nodes.Operand,
    nodes.Add,
    nodes.Sub,
    nodes.Div,
    nodes.FloorDiv,
    nodes.Concat,
    nodes.List,
    nodes.Tuple,
    nodes.Dict,
    nodes.Pair,
    nodes.Keyword,
    nodes.If,
)
_BUILTIN = "ansible.builtin."
#: how a refused part of a template is named in the reason
_SPELLED = {
    nodes.Call: "a call",
    nodes.Mul: "`*`",
    nodes.Pow: "`**`",
    nodes.Mod: "`%`",
    nodes.For: "`{% for %}`",
    nodes.Assign: "`{% set %}`",
    nodes.AssignBlock: "`{% set %}`",
    nodes.Macro: "`{% macro %}`",
    nodes.CallBlock: "`{% call %}`",
    nodes.FilterBlock: "`{% filter %}`",
    nodes.With: "`{% with %}`",
    nodes.Include: "`{% include %}`",
    nodes.Import: "`{% import %}`",
    nodes.FromImport: "`{% from … import %}`",
    nodes.Extends: "`{% extends %}`",
    nodes.Block: "`{% block %}`",
}


def _is_template(text: str) -> bool:
    """Whether Ansible would take TEXT for a template (its header, or a start string), also with
    backslashes removed (Ansible's lexer keeps them in string constants, Jinja's does not)."""
    for s in (text, text.replace("\\", "")):
        if s.startswith("#jinja2:") or "{{" in s or "{%" in s or "{#" in s:
            return True
    return False


_PARSER = Environment(autoescape=False)  # noqa: S701 - parses only, never renders


def _plain(name: str) -> str:
    return name.removeprefix(_BUILTIN)


#: the longest template whose verdict is kept for the next host (the same group_vars, 500 times)
_CACHED = 4096


def judge(template: str, depth: int = 0) -> tuple[str | None, tuple[str, ...]]:
    """Layer 1 for one string: (why it is not rendered offline, or None; the variable names it
    reads, once per mention). DEPTH: how deep in string constants of other templates it is."""
    return _judge_cached(template, depth) if len(template) <= _CACHED else _judge(template, depth)


@lru_cache(maxsize=4096)
def _judge_cached(template: str, depth: int) -> tuple[str | None, tuple[str, ...]]:
    return _judge(template, depth)


def _judge(template: str, depth: int) -> tuple[str | None, tuple[str, ...]]:
    if template.startswith("#jinja2:"):
        return "it changes the template syntax (#jinja2: header)", ()
    try:
        tree = _PARSER.parse(template)
    except TemplateSyntaxError as exc:
        return f"not a template the check can read ({exc.message})", ()
    except Exception:  # noqa: BLE001 - anything the parser chokes on is left to the play
        return "not a template the check can read", ()
    every: list[nodes.Node] = []
    stack: list[nodes.Node] = [tree]
    while stack:
        node = stack.pop()
        every.append(node)
        stack.extend(node.iter_child_nodes())
    for node in every:  # a lookup anywhere is named as such, whatever else the template does
        if (isinstance(node, nodes.Name) and node.name in _LOOKUPS) or (
            isinstance(node, nodes.Filter | nodes.Test) and _plain(node.name) in _LOOKUPS
        ):
            return LOOKUP, ()
        if isinstance(node, nodes.Const) and isinstance(node.value, str) and _is_template(node.value):
            inner = judge(node.value, depth + 1)[0] if depth < 2 else None
            return (LOOKUP if inner == LOOKUP else "it holds a template inside a string"), ()
    names: list[str] = []
    for node in every:
        if not isinstance(node, _NODES):
            what = _SPELLED.get(type(node), f"`{type(node).__name__}`")
            return f"it uses {what}, which the check does not evaluate", ()
        if isinstance(node, nodes.Name):
            if node.name in _FUNCTIONS or node.ctx != "load":
                return f"it uses `{node.name}`, which the check does not evaluate", ()
            if node.name not in _NAMES_OK:
                names.append(node.name)
        elif isinstance(node, nodes.Filter | nodes.Test):
            allowed = _FILTERS if isinstance(node, nodes.Filter) else _TESTS
            kind = "filter" if isinstance(node, nodes.Filter) else "test"
            if _plain(node.name) not in allowed or node.dyn_args is not None or node.dyn_kwargs is not None:
                return f"it uses the {kind} `{node.name}`, which the check does not evaluate", ()
        elif isinstance(node, nodes.Getattr) and node.attr.startswith("_"):
            return f"it reads the attribute `{node.attr}`", ()
    return None, tuple(names)


def _strings(value: Any) -> Iterator[str]:
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            yield v
        elif isinstance(v, Mapping):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list | tuple | set | frozenset):
            stack.extend(v)


def _size(value: Any, limit: int) -> int:
    """Characters and items of VALUE as data, counted up to just past LIMIT."""
    total = 0
    stack = [value]
    while stack and total <= limit:
        v = stack.pop()
        total += 1 + (len(v) if isinstance(v, str) else 0)
        if isinstance(v, Mapping):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list | tuple | set | frozenset):
            stack.extend(v)
    return total


@dataclass
class HostValues:
    """One host's variables (the role's defaults under the inventory's), judged before rendering."""

    variables: Mapping[str, Any]
    #: var -> None (may be rendered) or why not; each var judged once per host
    _reasons: dict[str, str | None] = field(default_factory=dict)
    _expansion: dict[str, int] = field(default_factory=dict)

    def reason(self, name: str) -> str | None:
        """Why NAME's value is left to the play (None: it may be rendered here)."""
        if name not in self._reasons:
            self._walk(name)
        return self._reasons[name]

    def _own(self, name: str) -> tuple[str | None, list[str]]:
        """Why NAME's own value is not rendered offline (None: it may be), and the variables it reads."""
        refs: list[str] = []
        for s in _strings(self.variables[name]):
            if not _is_template(s) or not _trusted(s):
                continue
            why, names = judge(s)
            if why is not None:
                return why, []
            refs += [n for n in names if n in self.variables]
        return None, refs

    def _walk(self, root: str) -> None:
        """Depth-first over the variables ROOT reaches, without recursion; a variable reached again
        while it is on the path is a loop (Ansible refuses those too)."""
        on_path: set[str] = set()
        refs_of: dict[str, list[str]] = {}
        stack: list[tuple[str, bool]] = [(root, False)]
        while stack:
            name, done = stack.pop()
            if done:
                on_path.discard(name)
                if name in self._reasons:  # marked while on the path: a loop
                    continue
                refs = refs_of[name]
                bad = next((r for r in refs if self._reasons[r] is not None), None)
                if bad is not None:
                    cause = self._reasons[bad] or ""
                    self._reasons[name] = cause if cause.startswith("via ") else f"via `{bad}`: {cause}"
                    continue
                size = _size(self.variables[name], MAX_EXPANSION)
                size += sum(_AS_TEXT * self._expansion[r] for r in refs)
                if size > MAX_EXPANSION:
                    self._reasons[name] = (
                        f"it would expand past {MAX_EXPANSION} characters through the variables it uses"
                    )
                    continue
                self._expansion[name] = size
                self._reasons[name] = None
                continue
            if name in self._reasons:
                continue
            if name in on_path:
                self._reasons[name] = "it refers to itself"
                continue
            why, refs = self._own(name)
            if why is not None:
                self._reasons[name] = why
                continue
            on_path.add(name)
            refs_of[name] = refs
            stack.append((name, True))
            stack.extend((r, False) for r in dict.fromkeys(refs) if r not in self._reasons)


def _trusted(text: str) -> bool:
    """Whether Ansible would render TEXT at all (``!unsafe`` text is never a template)."""
    from ansible.template import is_trusted_as_template

    return bool(is_trusted_as_template(text))


# --- layer 2 ----------------------------------------------------------------------------------------


class LookupRefused(Exception):
    """Raised in place of loading a lookup plugin while :func:`no_lookups` holds."""


_GUARD = threading.Lock()


@contextmanager
def no_lookups() -> Iterator[list[str]]:
    """While it holds, Ansible's lookup plugin loader refuses every plugin (the one place a lookup
    is loaded from, however the template names it); the list yielded gets the name of each refused."""
    from ansible.plugins.loader import lookup_loader

    refused: list[str] = []

    def refuse(name: str, *args: object, **kwargs: object) -> Any:
        refused.append(str(name))
        raise LookupRefused(f"lookup {name!s} refused: templates are not run offline")

    with _GUARD:
        saved = {
            k: lookup_loader.__dict__[k] for k in ("get", "get_with_context") if k in lookup_loader.__dict__
        }
        lookup_loader.get = refuse
        lookup_loader.get_with_context = refuse
        try:
            yield refused
        finally:
            for k in ("get", "get_with_context"):
                if k in saved:
                    setattr(lookup_loader, k, saved[k])
                else:
                    delattr(lookup_loader, k)
