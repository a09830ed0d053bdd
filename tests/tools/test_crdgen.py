"""The generated CRDs: no drift from the models, valid for Kubernetes, structural, and the
`validate_against_crd` helper on the seed examples."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from app.model.crd import (
    DURATION_PATTERN,
    KINDS,
    QUANTITY_PATTERN,
    RATIO_PATTERN,
    InvalidObject,
    parse_object,
)
from tools import crdgen
from tools.crdgen import generate, plural, validate_against_crd

CRD_DIR = Path(__file__).resolve().parents[2] / "manifests" / "crds"
CRD_FILES = sorted(CRD_DIR.glob("rightsizing.kubex.ai_*.yaml"))
SCOPED_KINDS = sorted(
    kind
    for kind, cls in KINDS.items()
    if "scope" in cls.model_fields["spec"].annotation.model_fields
)
# The newest Kubernetes the installed kubernetes-validate knows (1.37 at the time of writing).
K8S_VERSION = kubernetes_validate.latest_version()

# Verbatim from seeds/rollback-policies.txt.
SEED_ROLLBACK = """
apiVersion: rightsizing.kubex.ai/v1alpha1
kind: RollbackPolicy
metadata:
  name: production-rollback
  namespace: production
spec:
  scope:
    labelSelector:
      matchLabels:
        app.kubernetes.io/part-of: storefront
      matchExpressions:
        - key: tier
          operator: In
          values:
            - api
            - worker
    workloadTypes:
      - Deployment
      - StatefulSet
  monitoringPeriod: 5m
  rollbackTarget: lastSuccessful
  adoptionThresholdPercent: 80
  backoff:
    timePeriod: 1m
    multiplyByTurn: 2
    maxAttempts: 3
  weight: 100
"""
SEED_CLUSTER_ROLLBACK = """
apiVersion: rightsizing.kubex.ai/v1alpha1
kind: ClusterRollbackPolicy
metadata:
  name: production-cluster-rollback
spec:
  scope:
    namespaceSelector:
      operator: In
      values:
        - "prod-*"
        - "staging"
    labelSelector:
      matchLabels:
        rollback-enabled: "true"
    workloadTypes:
      - Deployment
      - StatefulSet
      - CronJob
  monitoringPeriod: 10m
  rollbackTarget: lastSuccessful
  adoptionThresholdPercent: 90
  backoff:
    timePeriod: 2m
    multiplyByTurn: 3
    maxAttempts: 5
  weight: 50
"""


def _crd(kind: str) -> dict[str, Any]:
    return yaml.safe_load((CRD_DIR / crdgen.file_name(kind)).read_text(encoding="utf-8"))


def _schema(kind: str) -> dict[str, Any]:
    return _crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def _nodes(node: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    found = [(path, node)]
    for name, child in node.get("properties", {}).items():
        found += _nodes(child, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        found += _nodes(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        found += _nodes(node["additionalProperties"], f"{path}.*")
    return found


def _rules(node: dict[str, Any]) -> list[str]:
    return [v["rule"] for v in node.get("x-kubernetes-validations", [])]


# --------------------------------------------------------------------------- drift


def test_committed_crds_match_the_models(tmp_path: Path) -> None:
    crdgen.write(tmp_path)
    generated = {p.name: p.read_bytes() for p in sorted(tmp_path.iterdir())}
    committed = {p.name: p.read_bytes() for p in sorted(CRD_DIR.iterdir())}
    hint = "manifests/crds/ drifted from app/model/crd.py: run `make crds` and commit the result"
    assert sorted(committed) == sorted(generated), hint
    for name, text in generated.items():
        assert committed[name] == text, f"{name}: {hint}"


def test_generation_is_deterministic() -> None:
    assert generate() == generate()


def test_one_crd_per_kind_and_kustomization_lists_them() -> None:
    assert len(CRD_FILES) == len(KINDS) == 18
    kustomization = yaml.safe_load((CRD_DIR / "kustomization.yaml").read_text(encoding="utf-8"))
    assert kustomization["resources"] == [p.name for p in CRD_FILES]


def test_files_carry_the_do_not_edit_header() -> None:
    for path in CRD_DIR.iterdir():
        assert path.read_text(encoding="utf-8").startswith(crdgen.HEADER), path.name


# --------------------------------------------------------------------------- kubernetes


@pytest.mark.parametrize("path", CRD_FILES, ids=lambda p: p.name)
def test_crd_validates_strictly_with_kubernetes_validate(path: Path) -> None:
    kubernetes_validate.validate(
        yaml.safe_load(path.read_text(encoding="utf-8")), K8S_VERSION, strict=True
    )


def test_strict_validation_would_catch_an_unknown_field() -> None:
    crd = _crd("StaticPolicy")
    crd["spec"]["scopee"] = "Namespaced"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(crd, K8S_VERSION, strict=True)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_names_scope_and_version(kind: str) -> None:
    crd = _crd(kind)
    spec = crd["spec"]
    assert spec["group"] == "rightsizing.kubex.ai"
    assert spec["names"]["kind"] == kind
    assert spec["names"]["plural"] == plural(kind)
    assert crd["metadata"]["name"] == f"{plural(kind)}.rightsizing.kubex.ai"
    assert spec["names"]["categories"] == ["kerf"]
    assert spec["scope"] == ("Cluster" if KINDS[kind].cluster_scoped else "Namespaced")
    [version] = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}
    status = _schema(kind)["properties"]["status"]
    assert status["type"] == "object"
    assert "conditions" in status["properties"]
    assert "observedGeneration" in status["properties"]


def test_plurals() -> None:
    assert plural("StaticPolicy") == "staticpolicies"
    assert plural("PolicyEvaluation") == "policyevaluations"
    assert plural("GlobalConfiguration") == "globalconfigurations"
    assert plural("RightsizingRecommendation") == "rightsizingrecommendations"
    assert plural("AutomationStrategy") == "automationstrategies"


def test_recommendation_printer_columns() -> None:
    columns = _crd("RightsizingRecommendation")["spec"]["versions"][0]["additionalPrinterColumns"]
    shown = [c["name"] for c in columns if not c.get("priority")]
    assert shown == ["CPU", "Memory", "Phase", "Reason", "Age"]
    # Age last: after the wide columns too, as the API server adds it when none is declared
    wide = [c["name"] for c in columns if c.get("priority") == 1]
    assert wide == ["CPU-Limit", "Memory-Limit", "Policy", "Next"]
    paths = {c["name"]: c["jsonPath"] for c in columns}
    assert paths["Phase"] == ".status.phase"
    # Plain field paths: kubectl prints nothing for filter expressions in printer columns.
    assert paths["Reason"] == ".status.summary.reason"


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_schema_is_structural(kind: str) -> None:
    forbidden = {"$ref", "$defs", "anyOf", "allOf", "oneOf", "nullable", "const", "title"}
    for path, node in _nodes(_schema(kind)):
        assert not forbidden & node.keys(), f"{kind}{path}: {forbidden & node.keys()}"
        assert (
            "type" in node
            or node.get("x-kubernetes-int-or-string")
            or node.get("x-kubernetes-preserve-unknown-fields")
        ), f"{kind}{path} has no type"
        assert not ("properties" in node and "additionalProperties" in node), f"{kind}{path}"
        assert node.get("additionalProperties", {}) is not False, f"{kind}{path}"
        assert node.get("default", "") is not None, f"{kind}{path}: null default"
    assert _schema(kind)["properties"]["metadata"] == {"type": "object"}


def test_guardrails_carry_no_defaults() -> None:
    """Layered guardrails must stay unset so lower layers show through."""
    guardrails = _schema("StaticPolicy")["properties"]["spec"]["properties"]["guardrails"]
    assert guardrails.get("default") == {}
    assert [p for p, n in _nodes(guardrails) if "default" in n and p] == []


def test_defaults_from_the_models() -> None:
    spec = _schema("RollbackPolicy")["properties"]["spec"]["properties"]
    assert spec["weight"]["default"] == 0
    assert spec["enableMonitoringReopen"]["default"] is True
    assert "StrimziPodSet" not in spec["scope"]["properties"]["workloadTypes"]["default"]
    cpu = _schema("AutomationStrategy")["properties"]["spec"]["properties"]["enablement"]
    limits = cpu["properties"]["cpu"]["properties"]["limits"]["properties"]
    assert limits["setFromUnspecified"]["default"] is False
    assert limits["upsize"]["default"] is True
    precedence = _schema("PolicyEvaluation")["properties"]["spec"]["properties"]["precedence"]
    assert {"type": "RollbackPolicy", "priority": 130} in precedence["default"]
    assert precedence["x-kubernetes-list-map-keys"] == ["type"]


def test_cel_rules() -> None:
    strategy = _schema("AutomationStrategy")["properties"]["spec"]["properties"]
    requests = strategy["enablement"]["properties"]["memory"]["properties"]["requests"]
    assert any(
        "quantity(string(self.floor)).compareTo(quantity(string(self.ceiling))) <= 0" in r
        for r in _rules(requests)
    )
    assert len(_rules(requests)) == 3  # own pair + both inherited pairs of each container
    window = strategy["scheduling"]["properties"]["inclusionWindows"]["items"]
    assert _rules(window) == ["self.start != self.end"]
    args = _schema("ContainerArgsPolicy")["properties"]["spec"]["properties"]["containers"]
    assert "Remove" in _rules(args["additionalProperties"]["properties"]["args"]["items"])[0]
    assert _rules(_schema("PolicyEvaluation")) == ["self.metadata.name == 'policy-evaluation'"]
    assert _rules(_schema("GlobalConfiguration")) == ["self.metadata.name == 'global-config'"]


@pytest.mark.parametrize("kind", SCOPED_KINDS)
def test_namespace_selector_only_on_cluster_kinds(kind: str) -> None:
    spec = _schema(kind)["properties"]["spec"]
    scope = spec["properties"]["scope"]
    if KINDS[kind].cluster_scoped:
        assert "scope" in spec["required"]
        assert "namespaceSelector" in scope["required"]
    else:
        assert "namespaceSelector" not in scope["properties"]


@pytest.mark.parametrize(
    ("pattern", "good", "bad"),
    [
        (
            QUANTITY_PATTERN,
            ["250m", "1", "1.5Gi", "129e6", "+1", ".5", "1E"],
            ["-1", "1.5.5", "1Mb", "", "1e"],
        ),
        (
            DURATION_PATTERN,
            ["30s", "0", "1h30m", "1.5h", "500ms", "2\u00b5s"],
            ["-5m", "5", "1d", "", "h"],
        ),
        (RATIO_PATTERN, ["0", "0.7", "1", "1.0", ".25"], ["1.1", "-0.1", "2", "0.7x", "1e-1"]),
    ],
)
def test_crd_patterns_agree_with_the_models(pattern: str, good: list[str], bad: list[str]) -> None:
    for text in good:
        assert re.search(pattern, text), text
    for text in bad:
        assert not re.search(pattern, text), text


# --------------------------------------------------------------------------- helper


@pytest.mark.parametrize("text", [SEED_ROLLBACK, SEED_CLUSTER_ROLLBACK], ids=["ns", "cluster"])
def test_seed_rollback_examples_validate(text: str) -> None:
    doc = yaml.safe_load(text)
    assert validate_against_crd(doc) == []
    parse_object(doc, "seeds/rollback-policies.txt")


def test_helper_reports_paths_and_problems() -> None:
    doc = yaml.safe_load(SEED_CLUSTER_ROLLBACK)
    doc["spec"]["rollbackTarget"] = "previous"
    doc["spec"]["backoff"]["maxAttempts"] = 0
    doc["spec"]["monitoringPeriodd"] = "5m"
    del doc["spec"]["scope"]["namespaceSelector"]
    assert validate_against_crd(doc) == [
        "spec.backoff.maxAttempts: 0 is less than the minimum of 1",
        "spec.rollbackTarget: 'previous' is not one of ['manifest', 'lastSuccessful']",
        "spec.scope: 'namespaceSelector' is a required property",
        "spec: Additional properties are not allowed ('monitoringPeriodd' was unexpected)",
    ]


def test_helper_int_or_string_quantities() -> None:
    doc = {
        "apiVersion": "rightsizing.kubex.ai/v1alpha1",
        "kind": "StaticPolicy",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {
            "automationStrategyRef": {"name": "default"},
            "resources": {"containers": {"app": {"requests": {"cpu": 1, "memory": "256Mi"}}}},
        },
    }
    assert validate_against_crd(doc) == []
    doc["spec"]["resources"]["containers"]["app"]["requests"]["cpu"] = True
    assert len(validate_against_crd(doc)) == 1
    doc["spec"]["resources"]["containers"]["app"]["requests"]["cpu"] = "-1"
    assert len(validate_against_crd(doc)) == 1


def test_helper_unknown_kind_and_version() -> None:
    assert validate_against_crd({"kind": "Pod"}) == ["kind: unknown kind 'Pod'"]
    doc = yaml.safe_load(SEED_ROLLBACK) | {"apiVersion": "rightsizing.kubex.ai/v1"}
    assert validate_against_crd(doc) == ["apiVersion: must be rightsizing.kubex.ai/v1alpha1"]


def test_model_output_fits_the_crd() -> None:
    """What kerf writes (a parsed object dumped back, status included) the CRD accepts."""
    doc = {
        "apiVersion": "rightsizing.kubex.ai/v1alpha1",
        "kind": "RightsizingRecommendation",
        "metadata": {"name": "deployment-web", "namespace": "shop"},
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}},
        "status": {
            "phase": "Applied",
            "observedGeneration": 2,
            "conditions": [{"type": "Applied", "status": "True", "reason": "Resized"}],
            "proposal": {"id": "p1", "containers": {"app": {"requests": {"cpu": "250m"}}}},
            "lastApplied": {"at": "2026-11-28T10:00:00Z", "method": "inPlace"},
            "selected": [
                {
                    "container": "app",
                    "field": "requests",
                    "resource": "cpu",
                    "value": "250m",
                    "policyKind": "StaticPolicy",
                    "policyNamespace": "shop",
                    "policyName": "web",
                    "annotationKey": "static.rightsizing.kubex.ai/desired-resource-requests",
                }
            ],
            "workload": "Deployment/web",
            "reason": "Cooldown",
            "current": {"app": {"requests": {"cpu": "100m"}}},
            "lastEvent": {"reason": "Cooldown", "values": "abc"},
        },
    }
    dumped = parse_object(doc).model_dump(by_alias=True, mode="json", exclude_none=True)
    assert validate_against_crd(dumped) == []


@pytest.mark.parametrize("kind", ["PolicyEvaluation", "GlobalConfiguration", "AutomationStrategy"])
def test_defaulted_objects_fit_the_crd(kind: str) -> None:
    namespace = None if KINDS[kind].cluster_scoped else "shop"
    name = KINDS[kind].singleton_name or "default"
    doc = {
        "apiVersion": "rightsizing.kubex.ai/v1alpha1",
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace},
    }
    dumped = parse_object(doc).model_dump(by_alias=True, mode="json", exclude_none=True)
    assert validate_against_crd(dumped) == []


def test_model_rejects_what_the_helper_cannot_see() -> None:
    """CEL-only rules (floor <= ceiling) are the models' job outside the API server."""
    doc = {
        "apiVersion": "rightsizing.kubex.ai/v1alpha1",
        "kind": "AutomationStrategy",
        "metadata": {"name": "s", "namespace": "shop"},
        "spec": {"enablement": {"cpu": {"requests": {"floor": "2", "ceiling": "1"}}}},
    }
    assert validate_against_crd(doc) == []
    with pytest.raises(InvalidObject, match="floor 2 is above ceiling 1"):
        parse_object(doc)
