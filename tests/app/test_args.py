"""ContainerArgsPolicy operations (SPEC §2, §5): AddOrUpdate and Remove."""

from __future__ import annotations

import pytest

from app.model.args import apply_arg_ops


def add(name: str, value: str | None = None) -> dict[str, str]:
    op = {"name": name, "operation": "AddOrUpdate"}
    if value is not None:
        op["value"] = value
    return op


def remove(name: str) -> dict[str, str]:
    return {"name": name, "operation": "Remove"}


@pytest.mark.parametrize(
    ("before", "ops", "after"),
    [
        ([], [add("--gc", "g1")], ["--gc=g1"]),
        (["--port=80"], [add("--gc", "g1")], ["--port=80", "--gc=g1"]),
        ([], [add("--verbose")], ["--verbose"]),
        (["--port=80"], [add("--port", "8080")], ["--port=8080"]),
        (["--port", "80", "--x"], [add("--port", "8080")], ["--port", "8080", "--x"]),
        (["--flag", "--x"], [add("--flag", "on")], ["--flag=on", "--x"]),
        (["--level", "3"], [add("--level")], ["--level"]),
        (["-v=1"], [add("-v", "4")], ["-v=4"]),
        # An operation without an explicit operation is AddOrUpdate.
        (["--a=1"], [{"name": "--a", "value": "2"}], ["--a=2"]),
        # A prefix of another flag is not that flag.
        (["--port-name=x"], [add("--port", "1")], ["--port-name=x", "--port=1"]),
    ],
)
def test_add_or_update(before: list[str], ops: list[dict], after: list[str]) -> None:
    assert apply_arg_ops(before, ops) == after


@pytest.mark.parametrize(
    ("before", "ops", "after"),
    [
        (["--debug=true", "--port=80"], [remove("--debug")], ["--port=80"]),
        (["--debug", "true", "--port=80"], [remove("--debug")], ["--port=80"]),  # value token too
        (["--debug", "--port=80"], [remove("--debug")], ["--port=80"]),  # next is a flag: kept
        (["--debug"], [remove("--debug")], []),
        (["--x", "1", "--y", "--x=2"], [remove("--x")], ["--y"]),  # every occurrence
        (["--port=80"], [remove("--debug")], ["--port=80"]),
        (["--debugger", "1"], [remove("--debug")], ["--debugger", "1"]),
    ],
)
def test_remove(before: list[str], ops: list[dict], after: list[str]) -> None:
    assert apply_arg_ops(before, ops) == after


def test_ops_apply_in_order() -> None:
    assert apply_arg_ops(["--a=1"], [remove("--a"), add("--a", "2")]) == ["--a=2"]
    assert apply_arg_ops(["--a=1"], [add("--a", "2"), remove("--a")]) == []


def test_input_is_not_mutated() -> None:
    args = ["--debug", "true"]
    apply_arg_ops(args, [remove("--debug")])
    assert args == ["--debug", "true"]
