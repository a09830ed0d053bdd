"""Test doubles for the webhook: a cluster view and scripted `admit` functions.

They exercise the webhook's own behaviour (patching, fail-open, limits) independently of
the decisions, which `app.decide.admission` makes and tests.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from app.decide.admission import AdmissionResult
from app.model.owners import WorkloadRef
from app.store.decision_cache import DecisionCaches

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "admission"


def load_example(name: str) -> dict[str, Any]:
    """One AdmissionReview fixture from examples/admission."""
    return orjson.loads((EXAMPLES / name).read_bytes())


@dataclass
class FakeView:
    """The attributes of `app.store.view.ClusterView` the server reads: whether it is synced,
    since when, and the decision caches whose admission memo counts the metrics show."""

    synced: bool = True
    synced_at: datetime | None = None
    caches: DecisionCaches[Any] = field(default_factory=DecisionCaches)


def result(
    outcome: str = "apply",
    *,
    reason: str | None = None,
    resources: dict[str, dict[str, dict[str, str]]] | None = None,
    args: dict[str, list[str]] | None = None,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    owner: WorkloadRef | None = None,
) -> AdmissionResult:
    """An AdmissionResult whose `selected` lists every resource value it sets."""
    resources = resources or {}
    selected = [
        {
            "container": container,
            "field": field_name,
            "resource": resource,
            "value": value,
            "policyKind": "StaticPolicy",
            "policyNamespace": "shop",
            "policyName": "web-static",
            "annotationKey": f"static.rightsizing.kubex.ai/desired-resource-{field_name}",
        }
        for container, fields in resources.items()
        for field_name, values in fields.items()
        for resource, value in values.items()
    ]
    return AdmissionResult(
        outcome=outcome,
        reason=reason,
        message=f"{outcome} {reason or ''}".strip(),
        owner=owner,
        resources=resources,
        args=args or {},
        annotations=annotations or {},
        labels=labels or {},
        selected=tuple(selected),
    )


@dataclass
class ScriptedAdmit:
    """An `admit` that returns a fixed result and records what it was asked."""

    answer: AdmissionResult | Callable[[Mapping[str, Any]], AdmissionResult]
    calls: list[tuple[str, datetime]] = field(default_factory=list)

    def __call__(
        self, view: Any, pod: Mapping[str, Any], namespace: str, now: datetime
    ) -> AdmissionResult:
        self.calls.append((namespace, now))
        return self.answer(pod) if callable(self.answer) else self.answer


@dataclass
class SlowAdmit:
    """An `admit` that takes `seconds` to answer: exercises the deadline."""

    seconds: float

    def __call__(
        self, view: Any, pod: Mapping[str, Any], namespace: str, now: datetime
    ) -> AdmissionResult:
        time.sleep(self.seconds)
        return result("apply", resources={"app": {"requests": {"cpu": "1"}}})


def failing_admit(view: Any, pod: Mapping[str, Any], namespace: str, now: datetime) -> Any:
    """An `admit` with a bug."""
    raise RuntimeError("boom")
