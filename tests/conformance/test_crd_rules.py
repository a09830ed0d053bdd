"""An AutomationStrategy on the API server: its CRD's `x-kubernetes-validations` (CEL) rules
refuse a floor above its ceiling, a container floor above the ceiling it inherits and a
window that starts where it ends, with a 422 naming the node that carries the rule; a
valid strategy is stored."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.conformance.conftest import NamespacedKubectl, kerf_object

pytestmark = pytest.mark.usefixtures("kerf_crds")


def _strategy(name: str, spec: dict[str, Any]) -> str:
    return kerf_object("AutomationStrategy", name, spec)


def _requests(bounds: dict[str, Any]) -> dict[str, Any]:
    return {"enablement": {"cpu": {"requests": bounds}}}


def _post_status(logged: str) -> str:
    """The HTTP status of the POST in kubectl's `-v=6` log."""
    found = re.findall(r'"Response" verb="POST" .*?status="([^"]+)"', logged)
    return found[-1] if found else ""


def _window(start: str, end: str) -> dict[str, Any]:
    return {"scheduling": {"exclusionWindows": [{"name": "night", "start": start, "end": end}]}}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param(
            _requests({"floor": "2", "ceiling": "500m"}),
            "spec.enablement.cpu.requests: Invalid value: floor must not be above ceiling",
            id="floor-above-ceiling",
        ),
        pytest.param(
            _requests({"ceiling": "1", "containers": {"app": {"floor": "1500m"}}}),
            "spec.enablement.cpu.requests: Invalid value: "
            "a container's floor must not be above the ceiling it inherits",
            id="container-floor-above-inherited-ceiling",
        ),
        pytest.param(
            _window("02:00", "02:00"),
            "spec.scheduling.exclusionWindows[0]: Invalid value: start and end must differ",
            id="window-start-is-end",
        ),
    ],
)
def test_a_strategy_breaking_a_rule_is_refused_naming_the_node(
    kubectl: NamespacedKubectl, spec: dict[str, Any], message: str
) -> None:
    answer = kubectl("create", "-f", "-", stdin=_strategy("bad", spec), check=False)
    assert answer.strip() == f'The AutomationStrategy "bad" is invalid: {message}', answer
    logged = kubectl("create", "-f", "-", "-v=6", stdin=_strategy("bad", spec), check=False)
    assert _post_status(logged) == "422 Unprocessable Entity", logged
    assert kubectl("get", "automationstrategies", "-o", "name") == ""


def test_a_valid_strategy_is_stored_and_a_patch_breaking_a_rule_is_refused(
    kubectl: NamespacedKubectl,
) -> None:
    spec = {
        **_requests({"floor": 1, "ceiling": "1500m", "containers": {"app": {"floor": "1"}}}),
        **_window("02:00", "04:00"),
    }
    kubectl("create", "-f", "-", stdin=_strategy("good", spec))
    stored = json.loads(kubectl("get", "automationstrategy", "good", "-o", "json"))
    assert stored["spec"]["enablement"]["cpu"]["requests"]["floor"] == 1
    patch = json.dumps({"spec": {"enablement": {"cpu": {"requests": {"ceiling": "500m"}}}}})
    answer = kubectl(
        "patch", "automationstrategy", "good", "--type=merge", "-p", patch, check=False
    )
    assert answer.strip() == (
        'The AutomationStrategy "good" is invalid: \n'
        "* spec.enablement.cpu.requests: Invalid value: floor must not be above ceiling\n"
        "* spec.enablement.cpu.requests: Invalid value: "
        "a container's floor must not be above the ceiling it inherits"
    ), answer
    stored = json.loads(kubectl("get", "automationstrategy", "good", "-o", "json"))
    assert stored["spec"]["enablement"]["cpu"]["requests"]["ceiling"] == "1500m"
