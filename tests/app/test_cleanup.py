"""`kerf cleanup`: kubectl commands that remove exactly the annotations kerf wrote."""

from __future__ import annotations

import io
import sys

import orjson
import pytest

from kerf.cleanup import annotate_commands
from kerf.cli import main

LISTING = {
    "kind": "List",
    "items": [
        {
            "kind": "Deployment",
            "metadata": {
                "name": "web",
                "namespace": "shop",
                "annotations": {
                    "static.rightsizing.kubex.ai/desired-resource-requests": "{}",
                    "cwproactive.rightsizing.kubex.ai/h0123456789abcdef-desired-resource-limits": "{}",
                    "containerargspolicy.rightsizing.kubex.ai/pod-runtime-hook": "{}",
                    "rightsizing.kubex.ai/rollback-state": "{}",
                    "rightsizing.kubex.ai/pause-until": "infinite",
                    "rightsizing.kubex.ai/skip-containers": "sidecar",
                    "deployment.kubernetes.io/revision": "3",
                },
            },
        },
        {"kind": "StatefulSet", "metadata": {"name": "db", "namespace": "shop"}},
        {
            "kind": "CronJob",
            "metadata": {
                "name": "report",
                "namespace": "ops",
                "annotations": {"rightsizing.kubex.ai/rollback-state": "{}"},
            },
        },
    ],
}


def test_only_kerf_written_keys_are_removed_and_people_keep_theirs() -> None:
    assert list(annotate_commands(LISTING)) == [
        "kubectl annotate -n shop deployment/web "
        "containerargspolicy.rightsizing.kubex.ai/pod-runtime-hook- "
        "cwproactive.rightsizing.kubex.ai/h0123456789abcdef-desired-resource-limits- "
        "rightsizing.kubex.ai/rollback-state- "
        "static.rightsizing.kubex.ai/desired-resource-requests-",
        "kubectl annotate -n ops cronjob/report rightsizing.kubex.ai/rollback-state-",
    ]


def run(stdin: bytes, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    return main(["cleanup"])


def test_the_command_prints_them(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(orjson.dumps(LISTING), monkeypatch) == 0
    captured = capsys.readouterr()
    assert captured.out.count("kubectl annotate") == 2
    assert "2 object(s) carry kerf annotations" in captured.err


@pytest.mark.parametrize("stdin", [b"not json", b"[1]", b'{"kind": "List", "items": 3}'])
def test_bad_input_is_one_line_and_exit_2(
    stdin: bytes, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(stdin, monkeypatch) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("kerf cleanup: stdin: ")
