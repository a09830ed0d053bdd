"""Container args operations of a ContainerArgsPolicy (AddOrUpdate, Remove)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any


def _flag_at(args: Sequence[str], index: int, name: str) -> tuple[bool, bool]:
    """(is this token the flag, does it carry its value inline as `--name=value`)."""
    token = args[index]
    if token == name:
        return True, False
    return token.startswith(name + "="), True


def _takes_next(args: Sequence[str], index: int) -> bool:
    """Whether the token after a bare flag is its separate value (not another flag)."""
    return index + 1 < len(args) and not args[index + 1].startswith("-")


def apply_arg_ops(args: Sequence[str], ops: Iterable[Mapping[str, Any]]) -> list[str]:
    """Apply the ops in order. AddOrUpdate replaces the value of an existing flag (inline
    or separate token) or appends `--name=value` (`--name` without a value); Remove drops
    every occurrence of the flag together with its separate value token."""
    result = list(args)
    for op in ops:
        name = str(op["name"])
        value = op.get("value")
        operation = op.get("operation", "AddOrUpdate")
        if operation == "Remove":
            result = _remove(result, name)
        else:
            result = _add_or_update(result, name, None if value is None else str(value))
    return result


def _remove(args: list[str], name: str) -> list[str]:
    out: list[str] = []
    index = 0
    while index < len(args):
        is_flag, inline = _flag_at(args, index, name)
        if is_flag:
            index += 1 if inline or not _takes_next(args, index) else 2
            continue
        out.append(args[index])
        index += 1
    return out


def _add_or_update(args: list[str], name: str, value: str | None) -> list[str]:
    for index in range(len(args)):
        is_flag, inline = _flag_at(args, index, name)
        if not is_flag:
            continue
        out = list(args)
        if value is None:
            # A valueless flag replaces any value it had.
            if not inline and _takes_next(args, index):
                del out[index + 1]
            out[index] = name
        elif inline or not _takes_next(args, index):
            out[index] = f"{name}={value}"
        else:
            out[index + 1] = value
        return out
    return [*args, name if value is None else f"{name}={value}"]
