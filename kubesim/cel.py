"""A small subset of CEL, enough for webhook `matchConditions` such as kerf's
`!has(object.metadata.annotations) || !('kubernetes.io/config.mirror' in
object.metadata.annotations)` and for kerf's CRD `x-kubernetes-validations` rules such as
`!has(self.floor) || !has(self.ceiling) ||
quantity(string(self.floor)).compareTo(quantity(string(self.ceiling))) <= 0`.

Supported: `||`, `&&`, `!`, `==`, `!=`, `<`, `<=`, `>`, `>=`, `in` (a map's keys, a list's
items), `has(a.b)` (also `has(a[k].b)`), field selection (`a.b`), indexing (`a['k']`,
`a[0]`), the `all(x, p)` macro (over a list's items or a map's keys), list literals,
parentheses, string (single or double quotes), integer, `true`, `false` and `null`
literals; the functions `size()`, `string()`, `duration()` and Kubernetes' `quantity()`
with `Quantity.compareTo()`; over JSON values. As in CEL, `||`, `&&` and `all()` are
decided by a deciding operand even when another is an error. Anything else is a
`CelSyntaxError` when the expression is compiled, so an expression kubesim cannot evaluate
is refused rather than misread.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from kubesim.quantity import QuantityError
from kubesim.quantity import parse as parse_quantity

_TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")|(?P<int>\d+)"
    r"|(?P<op>\|\||&&|==|!=|<=|>=|[<>!.,()\[\]])|(?P<ident>[A-Za-z_][A-Za-z0-9_]*))"
)
# Go's time.ParseDuration units, in seconds.
_DURATION_UNITS: dict[str, Fraction] = {
    "ns": Fraction(1, 10**9),
    "us": Fraction(1, 10**6),
    "µs": Fraction(1, 10**6),
    "ms": Fraction(1, 10**3),
    "s": Fraction(1),
    "m": Fraction(60),
    "h": Fraction(3600),
}
_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|ms|s|m|h)")
_ORDERINGS: dict[str, Callable[[Any, Any], bool]] = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}

Node = Callable[[Mapping[str, Any]], Any]


class CelSyntaxError(ValueError):
    """The expression is not in the subset kubesim evaluates."""


class CelEvalError(ValueError):
    """Evaluating the expression failed (a missing key, a type mismatch)."""


@dataclass(frozen=True)
class Quantity:
    """A value of the Kubernetes CEL library's `Quantity` type, in base units."""

    value: Fraction


@dataclass(frozen=True, order=True)
class Duration:
    """A value of CEL's `google.protobuf.Duration` type, in seconds."""

    seconds: Fraction


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
        if op not in ("==", "!=", "in", *_ORDERINGS):
            return left
        self.take()
        right = self.member()
        if op == "==":
            return lambda env: _equal(left(env), right(env))
        if op == "!=":
            return lambda env: not _equal(left(env), right(env))
        if op == "in":
            return lambda env: _contains(right(env), left(env))
        return lambda env: _order(op, left(env), right(env))

    def member(self) -> Node:
        node = self.primary()
        while self.peek() in (".", "["):
            if self.take()[1] == ".":
                name = self.identifier()
                node = self.method(node, name) if self.peek() == "(" else _select(node, name)
            else:
                index = self.expression()
                self.take("]")
                node = _index(node, index)
        return node

    def method(self, target: Node, name: str) -> Node:
        self.take("(")
        if name == "all":
            variable = self.identifier()
            self.take(",")
            predicate = self.expression()
            self.take(")")
            return _all(target, variable, predicate)
        if name == "compareTo":
            other = self.expression()
            self.take(")")
            return lambda env: _compare_quantities(target(env), other(env))
        raise CelSyntaxError(f"method {name}() is not supported by kubesim")

    def call(self, name: str) -> Node:
        if name not in _FUNCTIONS:
            raise CelSyntaxError(f"function {name}() is not supported by kubesim")
        function = _FUNCTIONS[name]
        self.take("(")
        argument = self.expression()
        self.take(")")
        return lambda env: function(argument(env))

    def list_literal(self) -> Node:
        items: list[Node] = []
        while self.peek() != "]":
            items.append(self.expression())
            if self.peek() != ",":
                break
            self.take(",")
        self.take("]")
        return lambda env: [item(env) for item in items]

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
        if text == "[":
            return self.list_literal()
        if kind != "ident":
            raise CelSyntaxError(f"unexpected {text!r} at {at + 1}")
        if text in ("true", "false", "null"):
            literal = {"true": True, "false": False, "null": None}[text]
            return lambda env: literal
        if text == "has":
            return self.presence()
        if self.peek() == "(":
            return self.call(text)
        return lambda env: _variable(env, text)

    def presence(self) -> Node:
        self.take("(")
        target = self.primary()
        last = ""
        while self.peek() in (".", "["):
            if last:
                target = _select(target, last)
                last = ""
            if self.take()[1] == ".":
                last = self.identifier()
            else:
                index = self.expression()
                self.take("]")
                target = _index(target, index)
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


def evaluate_rule(node: Node, value: Any) -> bool:
    """Evaluate a compiled CRD validation rule with `self` bound to `value`; a
    non-boolean result is a CelEvalError."""
    return _boolean(node({"self": value}), "a validation rule")


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


def _all(target: Node, variable: str, predicate: Node) -> Node:
    def run(env: Mapping[str, Any]) -> bool:
        container = target(env)
        if not isinstance(container, Mapping | list):
            raise CelEvalError(f"no such overload: all() on {type(container).__name__}")
        failure: CelEvalError | None = None
        # A map ranges over its keys, a list over its items; a false item decides.
        for item in list(container):
            try:
                if not _boolean(predicate({**env, variable: item}), "all()"):
                    return False
            except CelEvalError as exc:
                failure = failure or exc
        if failure is not None:
            raise failure
        return True

    return run


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _equal(left: Any, right: Any) -> bool:
    # CEL's heterogeneous equality: a bool never equals a number (Python's True == 1).
    if isinstance(left, bool) != isinstance(right, bool):
        return False
    return bool(left == right)


def _order(op: str, left: Any, right: Any) -> bool:
    comparable = (
        (_is_number(left) and _is_number(right))
        or (isinstance(left, str) and isinstance(right, str))
        or (isinstance(left, Duration) and isinstance(right, Duration))
        or (isinstance(left, bool) and isinstance(right, bool))
    )
    if not comparable:
        raise CelEvalError(f"no such overload: {type(left).__name__} {op} {type(right).__name__}")
    return _ORDERINGS[op](left, right)


def _compare_quantities(left: Any, right: Any) -> int:
    if not isinstance(left, Quantity) or not isinstance(right, Quantity):
        raise CelEvalError("no such overload: compareTo() needs two quantities")
    return (left.value > right.value) - (left.value < right.value)


def _size(value: Any) -> int:
    if isinstance(value, str | list | Mapping):
        return len(value)
    raise CelEvalError(f"no such overload: size() of {type(value).__name__}")


def _string(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int):
        return str(value)
    raise CelEvalError(f"no such overload: string() of {type(value).__name__}")


def _quantity(value: Any) -> Quantity:
    if not isinstance(value, str):
        raise CelEvalError(f"no such overload: quantity() of {type(value).__name__}")
    try:
        return Quantity(parse_quantity(value))
    except QuantityError as exc:
        raise CelEvalError(str(exc)) from exc


def _duration(value: Any) -> Duration:
    """Go's time.ParseDuration, which CEL's duration() uses."""
    if not isinstance(value, str):
        raise CelEvalError(f"no such overload: duration() of {type(value).__name__}")
    body = value.lstrip("+-")
    sign = -1 if value.startswith("-") else 1
    if body == "0":
        return Duration(Fraction(0))
    if not body or _DURATION_PART.sub("", body):
        raise CelEvalError(f'time: invalid duration "{value}"')
    total = sum(
        (Fraction(number) * _DURATION_UNITS[unit] for number, unit in _DURATION_PART.findall(body)),
        Fraction(0),
    )
    return Duration(sign * total)


_FUNCTIONS: dict[str, Callable[[Any], Any]] = {
    "size": _size,
    "string": _string,
    "quantity": _quantity,
    "duration": _duration,
}


def _unquote(text: str) -> str:
    body = text[1:-1]
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), body)
