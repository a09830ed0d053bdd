"""A small subset of CEL, enough for webhook `matchConditions` such as kerf's
`!has(object.metadata.annotations) || !('kubernetes.io/config.mirror' in
object.metadata.annotations)`.

Supported: `||`, `&&`, `!`, `==`, `!=`, `in` (a map's keys, a list's items), `has(a.b)`,
field selection (`a.b`), indexing (`a['k']`, `a[0]`), parentheses, string (single or
double quotes), integer, `true`, `false` and `null` literals, over JSON values. As in CEL,
`||` and `&&` are decided by either side even when the other is an error. Anything else is
a `CelSyntaxError` when the expression is compiled, so a configuration kubesim cannot
evaluate is refused rather than misread.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

_TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")|(?P<int>\d+)"
    r"|(?P<op>\|\||&&|==|!=|[!.()\[\]])|(?P<ident>[A-Za-z_][A-Za-z0-9_]*))"
)

Node = Callable[[Mapping[str, Any]], Any]


class CelSyntaxError(ValueError):
    """The expression is not in the subset kubesim evaluates."""


class CelEvalError(ValueError):
    """Evaluating the expression failed (a missing key, a type mismatch)."""


@dataclass
class _Parser:
    tokens: list[tuple[str, str, int]]
    position: int = 0

    def peek(self) -> str:
        return self.tokens[self.position][1] if self.position < len(self.tokens) else ""

    def take(self, expected: str | None = None) -> tuple[str, str, int]:
        if self.position >= len(self.tokens):
            raise CelSyntaxError("unexpected end of the expression")
        token = self.tokens[self.position]
        if expected is not None and token[1] != expected:
            raise CelSyntaxError(f"expected {expected!r} at {token[2] + 1}, found {token[1]!r}")
        self.position += 1
        return token

    def expression(self) -> Node:
        return self.disjunction()

    def disjunction(self) -> Node:
        left = self.conjunction()
        while self.peek() == "||":
            self.take()
            left = _logical(left, self.conjunction(), True)
        return left

    def conjunction(self) -> Node:
        left = self.unary()
        while self.peek() == "&&":
            self.take()
            left = _logical(left, self.unary(), False)
        return left

    def unary(self) -> Node:
        if self.peek() == "!":
            self.take()
            operand = self.unary()
            return lambda env: not _boolean(operand(env), "!")
        return self.relation()

    def relation(self) -> Node:
        left = self.member()
        op = self.peek()
        if op not in ("==", "!=", "in"):
            return left
        self.take()
        right = self.member()
        if op == "==":
            return lambda env: left(env) == right(env)
        if op == "!=":
            return lambda env: left(env) != right(env)
        return lambda env: _contains(right(env), left(env))

    def member(self) -> Node:
        node = self.primary()
        while self.peek() in (".", "["):
            if self.take()[1] == ".":
                node = _select(node, self.identifier())
            else:
                index = self.expression()
                self.take("]")
                node = _index(node, index)
        return node

    def identifier(self) -> str:
        kind, text, at = self.take()
        if kind != "ident":
            raise CelSyntaxError(f"expected a field name at {at + 1}, found {text!r}")
        return text

    def primary(self) -> Node:
        kind, text, at = self.take()
        if kind == "str":
            value: Any = _unquote(text)
            return lambda env: value
        if kind == "int":
            number = int(text)
            return lambda env: number
        if text == "(":
            inner = self.expression()
            self.take(")")
            return inner
        if kind != "ident":
            raise CelSyntaxError(f"unexpected {text!r} at {at + 1}")
        if text in ("true", "false", "null"):
            literal = {"true": True, "false": False, "null": None}[text]
            return lambda env: literal
        if text == "has":
            return self.presence()
        if self.peek() == "(":
            raise CelSyntaxError(f"function {text}() is not supported by kubesim")
        return lambda env: _variable(env, text)

    def presence(self) -> Node:
        self.take("(")
        target = self.primary()
        last = ""
        while self.peek() == ".":
            self.take()
            if last:
                target = _select(target, last)
            last = self.identifier()
        self.take(")")
        if not last:
            raise CelSyntaxError("has() needs a field selection, as in has(a.b)")
        container = target
        return lambda env: _has(container(env), last)


def compile_expression(source: str) -> Node:
    """Parse `source`; the result evaluates it over variables (`object`, `oldObject`,
    `request`). Raises CelSyntaxError for what the subset does not cover."""
    tokens: list[tuple[str, str, int]] = []
    at = 0
    stripped = source.rstrip()
    while at < len(stripped):
        while stripped[at].isspace():
            at += 1
        match = _TOKEN.match(stripped, at)
        if match is None or match.end() == at:
            raise CelSyntaxError(f"unexpected character {stripped[at]!r} at {at + 1}")
        kind = match.lastgroup or ""
        tokens.append((kind, match.group(kind), match.start(kind)))
        at = match.end()
    if not tokens:
        raise CelSyntaxError("the expression is empty")
    parser = _Parser(tokens)
    node = parser.expression()
    if parser.position != len(tokens):
        _, text, where = tokens[parser.position]
        raise CelSyntaxError(f"unexpected {text!r} at {where + 1}")
    return node


def evaluate_condition(node: Node, env: Mapping[str, Any]) -> bool:
    """Evaluate a compiled condition; a non-boolean result is a CelEvalError."""
    return _boolean(node(env), "a match condition")


def _logical(left: Node, right: Node, decides: bool) -> Node:
    def run(env: Mapping[str, Any]) -> bool:
        try:
            first = _boolean(left(env), "||" if decides else "&&")
        except CelEvalError:
            if _boolean(right(env), "||" if decides else "&&") == decides:
                return decides
            raise
        if first == decides:
            return decides
        return _boolean(right(env), "||" if decides else "&&")

    return run


def _boolean(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise CelEvalError(f"no such overload: {where} applied to {type(value).__name__}")
    return value


def _variable(env: Mapping[str, Any], name: str) -> Any:
    if name not in env:
        raise CelEvalError(f"undeclared reference to '{name}'")
    return env[name]


def _select(node: Node, name: str) -> Node:
    def run(env: Mapping[str, Any]) -> Any:
        value = node(env)
        if not isinstance(value, Mapping):
            raise CelEvalError(f"no such key: {name}")
        if name not in value:
            raise CelEvalError(f"no such key: {name}")
        return value[name]

    return run


def _index(node: Node, index: Node) -> Node:
    def run(env: Mapping[str, Any]) -> Any:
        value, key = node(env), index(env)
        if isinstance(value, Mapping):
            if key not in value:
                raise CelEvalError(f"no such key: {key}")
            return value[key]
        if isinstance(value, list) and isinstance(key, int) and not isinstance(key, bool):
            if not 0 <= key < len(value):
                raise CelEvalError(f"index out of range: {key}")
            return value[key]
        raise CelEvalError(f"no such overload: index of {type(value).__name__}")

    return run


def _has(value: Any, name: str) -> bool:
    if not isinstance(value, Mapping):
        raise CelEvalError(f"no such overload: has() on {type(value).__name__}")
    return name in value and value[name] is not None


def _contains(container: Any, item: Any) -> bool:
    if isinstance(container, (Mapping, list)):
        return item in container
    raise CelEvalError(f"no such overload: in applied to {type(container).__name__}")


def _unquote(text: str) -> str:
    body = text[1:-1]
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), body)
