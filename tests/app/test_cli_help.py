"""Every `kerf <command> --help` shows every option's default (issue 11)."""

from __future__ import annotations

import argparse

import pytest

from kerf.cli import build_parser


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


@pytest.mark.parametrize("command", sorted(subcommands()))
def test_help_shows_every_default(command: str) -> None:
    parser = subcommands()[command]
    text = " ".join(parser.format_help().split())
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        name = "/".join(action.option_strings) or action.dest
        assert action.help, f"kerf {command} {name} has no help text"
        if action.required or action.default is False:
            continue
        if action.default is None:
            # Not given means something; the help text must say what.
            assert "default" in action.help, f"kerf {command} {name}: say what the default is"
        else:
            assert f"(default: {action.default})" in text, f"kerf {command} {name}"


def test_explain_help_names_its_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["explain", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "output format (default: json)" in text
    assert "default: by pod state" in text
    assert "(default: now)" in text
