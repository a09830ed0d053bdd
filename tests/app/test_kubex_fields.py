"""Kubex's GlobalConfiguration and StaticPolicy fields apply unchanged (its published
examples, densify-dev/helm-charts docs), with Kubex's validation."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from app.model.crd import GlobalConfigurationSpec, parse_object
from app.model.strategy_fields import unhonoured_policy_fields
from tests.app import builders as b

#: Global-Configuration.md, "Example"
KUBEX_GLOBAL: dict[str, Any] = {
    "recommendationReloadInterval": "1h",
    "rescanInterval": "6h",
    "mutationLogInterval": "5m",
    "snapshotInterval": "30m",
    "heartbeatInterval": "5m",
    "kubexAPIRequestTimeout": "30s",
    "automationEnabled": True,
    "suppressFetchRecommendations": False,
    "respectKubexAutomation": True,
    "protectedNamespacePatterns": ["kube-*", "openshift-*", "kubex-*"],
    "webhookHealth": {
        "failureThreshold": 2,
        "successThreshold": 3,
        "transitionCheckInterval": "10s",
    },
    "webhookProbe": {
        "image": "densify/automation-controller:0.1.3",
        "labels": {"team": "platform"},
        "annotations": {"example.com/custom": "true"},
        "resources": {"requests": {"cpu": "5m", "memory": "16Mi"}},
        "podSecurityContext": {"runAsNonRoot": True},
        "securityContext": {"allowPrivilegeEscalation": False},
    },
}


def test_kubexs_global_configuration_example_applies() -> None:
    spec = GlobalConfigurationSpec.model_validate(KUBEX_GLOBAL)
    assert spec.kubex_api_request_timeout == "30s"
    dumped = spec.model_dump(by_alias=True)
    assert dumped["webhookProbe"]["podSecurityContext"] == {"runAsNonRoot": True}
    assert dumped["kubexAPIRequestTimeout"] == "30s"


#: Global-Configuration.md's example (kubex-automation-engine 1.11.0) adds these two
KUBEX_GLOBAL_1_11: dict[str, Any] = {
    **KUBEX_GLOBAL,
    "proposalSyncEnabled": False,
    "webhookOwnerResolutionRetryTimeout": "1s",
}


def test_kubexs_proposal_sync_and_owner_resolution_fields_apply() -> None:
    spec = GlobalConfigurationSpec.model_validate(KUBEX_GLOBAL_1_11)
    assert spec.proposal_sync_interval == "5m"
    assert spec.model_dump(by_alias=True)["webhookOwnerResolutionRetryTimeout"] == "1s"


@pytest.mark.parametrize(
    ("field", "value"),
    [("proposalSyncInterval", "30s"), ("webhookOwnerResolutionRetryTimeout", "0s")],
)
def test_kubexs_interval_bounds_are_kept(field: str, value: str) -> None:
    with pytest.raises(ValidationError, match=field):
        GlobalConfigurationSpec.model_validate({field: value})


@pytest.mark.parametrize("interval", ["30s", "59s", "0"])
def test_a_reload_interval_under_a_minute_is_refused(interval: str) -> None:
    with pytest.raises(ValidationError, match="recommendationReloadInterval"):
        GlobalConfigurationSpec.model_validate({"recommendationReloadInterval": interval})


def test_a_static_policys_claims_apply_and_are_named_as_not_set() -> None:
    containers = {"app": {"requests": {"cpu": "250m"}, "claims": [{"name": "gpu"}]}}
    policy = b.static(containers=containers)
    assert unhonoured_policy_fields(policy) == [
        "resources.containers.app.claims (kerf sets requests and limits only)"
    ]
    assert unhonoured_policy_fields(b.static()) == []
    assert parse_object(
        {
            "apiVersion": b.API,
            "kind": "StaticPolicy",
            "metadata": {"name": "p", "namespace": b.NS},
            "spec": {
                "automationStrategyRef": {"name": "default"},
                "resources": {
                    "containers": {"app": {"claims": [{"name": "gpu", "request": "one"}]}}
                },
            },
        }
    )
