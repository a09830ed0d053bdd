"""`python -m devcluster.resizespecs`: Kubernetes' own in-place resize specs against
devcluster. Its summary parsing on a recorded run of the real node, then a real run of a
few specs against the node agent (skipped, saying why, until `make conformance-resize` has
built the test binary)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from devcluster import resizespecs
from devcluster.resizespecs import Missing, find_binary, parse_summary
from harness.backend import real_available

ROOT = Path(__file__).resolve().parents[2]
RECORDED = Path(__file__).with_name("data") / "resizespecs-real.log"


def test_summary_of_a_recorded_real_run() -> None:
    """The real node's run before the skips (5 December 2026): 92 specs, the 14 that fail
    are the ones OOM_SCORE_SKIPS names, and nothing else failed."""
    text = RECORDED.read_text()
    summary = parse_summary(text)
    assert summary is not None
    assert (summary.ran, summary.total, summary.seconds) == (92, 660, 1494.649)
    assert (summary.passed, summary.failed, summary.pending, summary.skipped) == (78, 14, 0, 568)
    assert not summary.success
    assert summary.lines in text
    assert len(summary.failures) == 14
    for failure in summary.failures:
        spec = failure.removesuffix(" [sig-node]")
        assert any(re.search(p, spec) for p in resizespecs.OOM_SCORE_SKIPS), failure


def test_summary_of_a_failed_run_names_the_failures() -> None:
    output = "\n".join(
        [
            "\x1b[38;5;9mSummarizing 2 Failures:\x1b[0m",
            "  \x1b[38;5;9m[FAIL]\x1b[0m [sig-node] Pod InPlace Resize Container guaranteed qos "
            "- 1 container with resize policy cpu restart resizing \x1b[38;5;9m\x1b[1m[It] cpu"
            "\x1b[0m \x1b[38;5;204m[sig-node]\x1b[0m",
            "  \x1b[38;5;243mk8s.io/kubernetes@v1.35.4/test/e2e/common/node/pod_resize.go:122"
            "\x1b[0m",
            "  [TIMEDOUT] [sig-node] [Serial] Pod InPlace Resize Container (deferred-resizes) "
            "[FeatureGate:InPlacePodVerticalScaling] [It] pod-resize-retry-deferred-test-1 "
            "[sig-node, Serial, FeatureGate:InPlacePodVerticalScaling]",
            "",
            "Ran 3 of 7021 Specs in 95.120 seconds",
            "FAIL! -- 1 Passed | 2 Failed | 0 Pending | 7018 Skipped",
            "--- FAIL: TestE2E (95.13s)",
        ]
    )
    summary = parse_summary(output)
    assert summary is not None
    assert (summary.ran, summary.total, summary.passed, summary.failed) == (3, 7021, 1, 2)
    assert not summary.success
    assert summary.failures == [
        "[sig-node] Pod InPlace Resize Container guaranteed qos - 1 container with resize "
        "policy cpu restart resizing cpu [sig-node]",
        "[sig-node] [Serial] Pod InPlace Resize Container (deferred-resizes) "
        "[FeatureGate:InPlacePodVerticalScaling] pod-resize-retry-deferred-test-1 "
        "[sig-node, Serial, FeatureGate:InPlacePodVerticalScaling]",
    ]
    assert "FAIL! -- 1 Passed | 2 Failed | 0 Pending | 7018 Skipped" in summary.lines


def test_no_summary_when_the_run_stopped_early() -> None:
    assert parse_summary("E1205 unable to load kubeconfig\n--- FAIL: TestE2E\n") is None


def test_every_skip_says_why_and_matches_a_spec() -> None:
    """The skip lists hold a reason for each entry; each entry is a valid regular
    expression (the lists are matched against the spec names in the e2e test below)."""
    for table in (resizespecs.SKIPS, resizespecs.OOM_SCORE_SKIPS, resizespecs.AGENT_FAILS):
        for pattern, why in table.items():
            re.compile(pattern)
            assert not re.search(r"\(\?<?[=!]", pattern), f"{pattern}: RE2 has no look-around"
            assert why.strip(), pattern


def _binary_missing() -> str:
    try:
        find_binary()
    except Missing as exc:
        return str(exc)
    return ""


@pytest.mark.e2e
def test_a_real_run_against_the_agent(tmp_path: Path) -> None:
    """Two of the resource-quota specs (the API server's answers to a resize past the
    quota, any node will do) run by the real test binary against devcluster's node agent:
    the runner prints ginkgo's summary, and it is the one parsed from the binary's own
    log; every pattern of the skip lists matches a spec the binary has. `make e2e` builds
    the binary with the control plane, so where the control plane is built a missing
    binary is a failure, not a skip."""
    if not real_available():
        pytest.skip("the real control plane is not built: run make cluster-tools")
    missing = _binary_missing()
    assert not missing, f"{missing} (make e2e builds it: scripts/build-e2e-resize.sh)"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "devcluster.resizespecs",
            "--kubelet",
            "agent",
            "--focus",
            r"\(resource-quota\) .*exceed maximum CPU",
            "--out",
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    summary = parse_summary((tmp_path / "e2e-agent.log").read_text())
    assert summary is not None
    assert (summary.ran, summary.passed, summary.failed) == (2, 2, 0)
    assert summary.lines in result.stdout
    listed = subprocess.run(
        [str(find_binary()), "--list-tests"], capture_output=True, text=True, timeout=120
    ).stdout
    names = [line.split(": ", 1)[1] for line in listed.splitlines() if ": [" in line]
    for pattern in (*resizespecs.SKIPS, *resizespecs.OOM_SCORE_SKIPS, *resizespecs.AGENT_FAILS):
        assert any(re.search(pattern, name) for name in names), f"{pattern} matches no spec"
