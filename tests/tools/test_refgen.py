"""docs/reference.md: no drift from the code, and nothing the code decides left out."""

from __future__ import annotations

import ast
from pathlib import Path

from app.model.crd import KINDS
from tools import refgen

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "reference.md"


def test_the_committed_reference_is_what_the_code_generates() -> None:
    assert REFERENCE.read_text(encoding="utf-8") == refgen.generate(), (
        "docs/reference.md is stale: run `make reference`"
    )


def reason_literals(path: Path) -> set[str]:
    """Reason names the decision code gives: the string argument after the outcome of
    `PodDecision(…, outcome, reason, …)`, the first argument of a check's
    `block(reason, …)` and `stop(reason, …)`, and module-level NAME = "Reason"."""
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            args = [a.value if isinstance(a, ast.Constant) else None for a in node.args]
            if node.func.id in ("block", "stop") and args:
                found.add(args[0])
            for i, value in enumerate(args[:-1]):
                if node.func.id == "PodDecision" and value in ("blocked", "skipped"):
                    found.add(args[i + 1])
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            [target] = node.targets
            if isinstance(target, ast.Name) and target.id.isupper():
                value = node.value.value
                if isinstance(value, str) and value[:1].isupper() and value.isalpha():
                    found.add(value)
    return {r for r in found if isinstance(r, str)}


def test_every_reason_the_code_decides_is_in_the_reference() -> None:
    documented = {reason for reason, _, _ in refgen.REASONS}
    decision_code = [
        *sorted((ROOT / "app" / "decide").glob("*.py")),
        ROOT / "app" / "policy" / "guardrails.py",
    ]
    raised = set().union(*(reason_literals(path) for path in decision_code))
    assert {"Paused", "Audit", "Cooldown", "NoSignificantChange"} <= raised
    assert raised <= documented, raised - documented


def test_the_spec_outcomes_of_the_configured_exclusions() -> None:
    outcome = {reason: outcome for reason, outcome, _ in refgen.REASONS}
    assert outcome["AutomationDisabled"] == outcome["ProtectedNamespace"] == "skipped"
    assert outcome["Paused"] == "blocked"


def test_every_kind_and_every_webhook_metric_is_listed() -> None:
    text = REFERENCE.read_text(encoding="utf-8")
    for kind in KINDS:
        assert f"\n### {kind}\n" in text
    for metric in (
        "kerf_webhook_requests_total",
        "kerf_webhook_request_duration_seconds",
        "kerf_webhook_fail_open_total",
    ):
        assert f"| `{metric}` |" in text
