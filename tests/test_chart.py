"""charts/kerf: `helm lint` passes; `helm template` renders objects that validate against
the Kubernetes schemas and match the kustomize base where both ship the same thing (RBAC,
CRDs, webhook registration); every service flag has a value; the recommender and
cert-manager switches render what they say; values.schema.json refuses unknown keys and
values out of range; NOTES.txt says the next steps and what an uninstall leaves.

helm is required, not optional: `scripts/get-kubectl.sh` installs it into `.tools/bin/helm`
(or point `$HELM` at a helm 4 binary).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import shutil
import subprocess
from datetime import timedelta
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from cryptography import x509

from app.model.crd import parse_object, plural
from app.model.durations import DurationError, parse_flag_duration
from kerf.cli import build_parser
from recommender.main import RECOMMENDER_RESOURCES
from tests.webhook.test_manifests import render as kustomize
from tools.crdgen import validate_against_crd

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "charts" / "kerf"
KERF_API = "rightsizing.kubex.ai/v1alpha1"
CERT_MANAGER_API = "cert-manager.io/v1"
NAMESPACE = "kerf-system"


def helm() -> str:
    candidate = os.environ.get("HELM") or str(ROOT / ".tools" / "bin" / "helm")
    if not (Path(candidate).is_file() or shutil.which(candidate)):
        pytest.fail(
            f"helm not found at {candidate}: run scripts/get-kubectl.sh or set $HELM",
            pytrace=False,
        )
    return candidate


def template(*sets: str, namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    argv = [helm(), "template", "kerf", str(CHART), "--namespace", namespace]
    for value in sets:
        argv += ["--set", value]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def one(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    [found] = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def names(objects: list[dict[str, Any]], kind: str) -> set[str]:
    return {o["metadata"]["name"] for o in objects if o["kind"] == kind}


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    return template()


@pytest.mark.parametrize(
    "sets",
    [(), ("recommender.enabled=true", "certificates.certManager.enabled=true")],
    ids=["defaults", "recommender-and-cert-manager"],
)
def test_helm_lint_passes(sets: tuple[str, ...]) -> None:
    argv = [helm(), "lint", str(CHART), "--strict"]
    for value in sets:
        argv += ["--set", value]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 chart(s) failed" in done.stdout


@pytest.mark.parametrize(
    "sets",
    [
        (),
        ("recommender.enabled=true", "certificates.certManager.enabled=true"),
        ("reconciler.shards=1", "recommender.enabled=true", "recommender.shards=1"),
    ],
    ids=["defaults", "recommender-and-cert-manager", "one-shard"],
)
def test_every_kubernetes_object_validates_strictly(sets: tuple[str, ...]) -> None:
    version = kubernetes_validate.latest_version()
    checked = 0
    for obj in template(*sets):
        if obj["apiVersion"] in (KERF_API, CERT_MANAGER_API):
            continue
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{obj['kind']}/{obj['metadata']['name']}: {exc.message}")
        checked += 1
    assert checked >= 15


def test_kerf_defaults_fit_the_models_and_the_crds(objects: list[dict[str, Any]]) -> None:
    kerf = [o for o in objects if o["apiVersion"] == KERF_API]
    assert sorted(o["kind"] for o in kerf) == ["GlobalConfiguration", "PolicyEvaluation"]
    for obj in kerf:
        parse_object(obj, "charts/kerf")
        assert validate_against_crd(obj) == [], obj["kind"]
    assert not [o for o in template("defaults.install=false") if o["apiVersion"] == KERF_API]


def test_the_chart_ships_the_crds_of_manifests_unchanged() -> None:
    shipped = {p.name: p.read_bytes() for p in (CHART / "crds").glob("*.yaml")}
    generated = {p.name: p.read_bytes() for p in (ROOT / "manifests" / "crds").glob("*_*.yaml")}
    assert shipped == generated, "run `make crds`: charts/kerf/crds differs from manifests/crds"


def test_the_chart_version_is_kerf_version() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    pyproject = (ROOT / "pyproject.toml").read_text()
    version = next(
        line.split('"')[1] for line in pyproject.splitlines() if line.startswith("version = ")
    )
    assert chart["version"] == version and chart["appVersion"] == version


def permissions(objects: list[dict[str, Any]], kind: str, name: str) -> set[tuple[str, ...]]:
    """Every (group, resource, verb, name) a role grants: its rules' order does not matter."""
    return {
        (group, resource, verb, resource_name)
        for rule in one(objects, kind, name)["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
        for resource_name in rule.get("resourceNames") or ["*"]
    }


@pytest.mark.parametrize(
    ("kind", "name"),
    [
        ("ClusterRole", "kerf-webhook"),
        ("ClusterRole", "kerf-reconciler"),
        ("Role", "kerf-webhook-lease"),
        ("Role", "kerf-reconciler-lease"),
    ],
)
def test_rbac_is_the_kustomize_base_s(objects: list[dict[str, Any]], kind: str, name: str) -> None:
    base = kustomize(ROOT / "manifests")
    assert permissions(objects, kind, name) == permissions(base, kind, name)


def test_the_webhook_registration_is_safe_and_trusts_the_serving_certificate(
    objects: list[dict[str, Any]],
) -> None:
    configuration = one(objects, "MutatingWebhookConfiguration", "kerf-webhook")
    [hook] = configuration["webhooks"]
    assert hook["failurePolicy"] == "Ignore"
    assert hook["sideEffects"] == "None"
    assert hook["reinvocationPolicy"] == "IfNeeded"
    assert hook["timeoutSeconds"] <= 5
    assert hook["clientConfig"]["service"] == {
        "name": "kerf-webhook",
        "namespace": NAMESPACE,
        "path": "/mutate",
        "port": 443,
    }
    [expression] = hook["namespaceSelector"]["matchExpressions"]
    assert expression["operator"] == "NotIn"
    assert set(expression["values"]) == {"kube-system", NAMESPACE}
    base = one(kustomize(ROOT / "manifests"), "MutatingWebhookConfiguration", "kerf-webhook")
    assert hook["matchConditions"] == base["webhooks"][0]["matchConditions"]
    assert hook["rules"] == base["webhooks"][0]["rules"]

    secret = one(objects, "Secret", "kerf-webhook-tls")
    ca = x509.load_pem_x509_certificate(base64.b64decode(hook["clientConfig"]["caBundle"]))
    serving = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    assert base64.b64decode(secret["data"]["ca.crt"]) == base64.b64decode(
        hook["clientConfig"]["caBundle"]
    )
    serving.verify_directly_issued_by(ca)
    sans = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert f"kerf-webhook.{NAMESPACE}.svc" in sans.get_values_for_type(x509.DNSName)


def test_another_namespace_moves_every_reference(tmp_path: Path) -> None:
    objects = template(namespace="rightsizing")
    hook = one(objects, "MutatingWebhookConfiguration", "kerf-webhook")["webhooks"][0]
    assert hook["clientConfig"]["service"]["namespace"] == "rightsizing"
    assert "rightsizing" in hook["namespaceSelector"]["matchExpressions"][0]["values"]
    for o in objects:
        if o["kind"] in ("ClusterRoleBinding", "RoleBinding"):
            assert {s["namespace"] for s in o["subjects"]} == {"rightsizing"}


def flags(command: str) -> set[str]:
    sub = next(
        a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)
    ).choices[command]
    return {
        a.option_strings[-1]
        for a in sub._actions
        if a.option_strings and not isinstance(a, argparse._HelpAction)
    }


def args_of(objects: list[dict[str, Any]], deployment: str) -> list[str]:
    [container] = one(objects, "Deployment", deployment)["spec"]["template"]["spec"]["containers"]
    return container["args"]


#: Flags a chart value does not mirror, and why.
NOT_VALUES = {
    "webhook": {
        "--state-dir": "files instead of a cluster: not for an installation",
        "--kubeconfig": "in a pod the service account is the cluster",
        "--host": "a pod listens on every address",
    },
    "reconciler": {
        "--state-dir": "files instead of a cluster: not for an installation",
        "--kubeconfig": "in a pod the service account is the cluster",
        "--once": "a Deployment runs the service, not one pass",
        "--metrics-host": "a pod listens on every address",
        "--api-timeout": "bounds a run by hand; a dry-run pod that cannot reach the API "
        "server for 30 s at start exits 2 and the kubelet restarts it (docs/decisions.md)",
    },
}


@pytest.mark.parametrize("command", ["webhook", "reconciler"])
def test_every_service_flag_has_a_value(objects: list[dict[str, Any]], command: str) -> None:
    rendered = {a.split("=")[0] for a in args_of(objects, f"kerf-{command}")}
    dry = {a.split("=")[0] for a in args_of(template("reconciler.dryRun=true"), "kerf-reconciler")}
    assert flags(command) - set(NOT_VALUES[command]) <= rendered | dry


def test_the_recommender_is_off_by_default_and_runs_kerf_recommend_when_on(
    objects: list[dict[str, Any]],
) -> None:
    assert "kerf-recommender" not in names(objects, "Deployment")
    url = "http://prometheus.monitoring.svc:9090"
    on = template("recommender.enabled=true", f"recommender.prometheus={url}")
    args = args_of(on, "kerf-recommender")
    assert args[0] == "recommend" and f"--prometheus={url}" in args
    role = one(on, "ClusterRole", "kerf-recommender")
    assert {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "patch"]} in role[
        "rules"
    ]


#: What a sharded service does with its member and bucket Leases, in its own namespace.
SHARD_LEASES = {
    ("coordination.k8s.io", "leases", verb, "*")
    for verb in ("get", "list", "create", "update", "delete")
}


def one_leader_lease(name: str) -> set[tuple[str, ...]]:
    """`--shards=1`: create its Lease, then read and renew that one only; list the shard
    set's Leases before taking it."""
    return {
        ("coordination.k8s.io", "leases", "create", "*"),
        ("coordination.k8s.io", "leases", "list", "*"),
        ("coordination.k8s.io", "leases", "get", name),
        ("coordination.k8s.io", "leases", "update", name),
    }


def test_the_recommender_shares_the_buckets_on_leases_of_its_own() -> None:
    on = template("recommender.enabled=true")
    assert one(on, "Deployment", "kerf-recommender")["spec"]["replicas"] == 2
    args = args_of(on, "kerf-recommender")
    assert {"--lease-duration=15", "--renew-deadline=10", "--retry-period=2"} <= set(args)
    assert "--shards=64" in args
    assert permissions(on, "Role", "kerf-recommender-lease") == SHARD_LEASES
    binding = one(on, "RoleBinding", "kerf-recommender-lease")
    assert binding["subjects"][0]["name"] == "kerf-recommender"
    single = template("recommender.enabled=true", "recommender.shards=1")
    assert "--shards=1" in args_of(single, "kerf-recommender")
    assert permissions(single, "Role", "kerf-recommender-lease") == one_leader_lease(
        "kerf-recommender"
    )


@pytest.mark.parametrize(
    ("sets", "replicas", "shards"),
    [((), 2, 64), (("reconciler.replicas=4", "reconciler.shards=16"), 4, 16)],
    ids=["defaults", "four-replicas"],
)
def test_the_reconciler_runs_its_replicas_on_the_buckets(
    sets: tuple[str, ...], replicas: int, shards: int
) -> None:
    objects = template(*sets)
    assert one(objects, "Deployment", "kerf-reconciler")["spec"]["replicas"] == replicas
    args = args_of(objects, "kerf-reconciler")
    assert f"--shards={shards}" in args
    assert build_parser().parse_args(args).shards == shards
    role = one(objects, "Role", "kerf-reconciler-lease")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert permissions(objects, "Role", "kerf-reconciler-lease") == SHARD_LEASES
    binding = one(objects, "RoleBinding", "kerf-reconciler-lease")
    assert binding["roleRef"]["name"] == "kerf-reconciler-lease"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "kerf-reconciler", "namespace": NAMESPACE}
    ]


def test_one_shard_is_one_leader_with_its_lease_only() -> None:
    objects = template("reconciler.shards=1")
    assert "--shards=1" in args_of(objects, "kerf-reconciler")
    assert permissions(objects, "Role", "kerf-reconciler-lease") == one_leader_lease(
        "kerf-reconciler"
    )


def test_cert_manager_issues_the_certificate_and_injects_the_ca_bundle() -> None:
    objects = template("certificates.certManager.enabled=true")
    assert "kerf-webhook-tls" not in names(objects, "Secret")
    configuration = one(objects, "MutatingWebhookConfiguration", "kerf-webhook")
    assert configuration["metadata"]["annotations"] == {
        "cert-manager.io/inject-ca-from": f"{NAMESPACE}/kerf-webhook-tls"
    }
    assert "caBundle" not in configuration["webhooks"][0]["clientConfig"]
    certificate = one(objects, "Certificate", "kerf-webhook-tls")
    assert certificate["spec"]["secretName"] == "kerf-webhook-tls"
    assert certificate["spec"]["issuerRef"]["name"] == "kerf-webhook-ca"
    assert one(objects, "Certificate", "kerf-webhook-ca")["spec"]["isCA"] is True
    assert names(objects, "Issuer") == {"kerf-selfsigned", "kerf-webhook-ca"}


@pytest.fixture(scope="module")
def with_recommender() -> list[dict[str, Any]]:
    return template(
        "recommender.enabled=true",
        "recommender.prometheus=http://prometheus.monitoring.svc:9090",
        "recommender.interval=30m",
        "recommender.extraArgs={--dry-run,--limits=keep}",
    )


def test_the_recommender_deployment_runs_its_service_account_and_values(
    with_recommender: list[dict[str, Any]],
) -> None:
    deployment = one(with_recommender, "Deployment", "kerf-recommender")
    pod = deployment["spec"]["template"]["spec"]
    assert deployment["metadata"]["namespace"] == NAMESPACE
    assert deployment["spec"]["replicas"] == 2  # sharing the buckets
    assert pod["serviceAccountName"] == "kerf-recommender"
    assert (
        one(with_recommender, "ServiceAccount", "kerf-recommender")["metadata"]["namespace"]
        == NAMESPACE
    )
    [container] = pod["containers"]
    assert container["command"] == ["kerf"]
    assert container["args"] == [
        "recommend",
        "--prometheus=http://prometheus.monitoring.svc:9090",
        "--interval=30m",
        "--lease-duration=15",
        "--renew-deadline=10",
        "--retry-period=2",
        "--shards=64",
        "--dry-run",
        "--limits=keep",
    ]
    # Every argument is one the command takes.
    parsed = build_parser().parse_args(container["args"])
    assert (parsed.interval, parsed.dry_run, parsed.limits) == (1800.0, True, "keep")
    assert container["resources"]["limits"]["memory"]


def _grants(objects: list[dict[str, Any]], kind: str, name: str) -> set[tuple[str, ...]]:
    return {(g, r, v) for g, r, v, _ in permissions(objects, kind, name)}


def test_the_recommender_may_read_all_it_watches_and_write_configmaps(
    with_recommender: list[dict[str, Any]],
) -> None:
    granted = _grants(with_recommender, "ClusterRole", "kerf-recommender")
    for resource in RECOMMENDER_RESOURCES:
        group = resource.api_version.rpartition("/")[0]
        for verb in ("list", "watch"):
            assert (group, plural(resource.kind), verb) in granted, resource.kind
    # recommender/configmaps.py: read before each write, create when missing, merge-patch.
    for verb in ("get", "create", "patch"):
        assert ("", "configmaps", verb) in granted
    binding = one(with_recommender, "ClusterRoleBinding", "kerf-recommender")
    assert binding["roleRef"]["name"] == "kerf-recommender"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "kerf-recommender", "namespace": NAMESPACE}
    ]


def test_the_recommender_may_hold_leases_in_its_namespace_only(
    with_recommender: list[dict[str, Any]],
) -> None:
    role = one(with_recommender, "Role", "kerf-recommender-lease")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert permissions(with_recommender, "Role", "kerf-recommender-lease") == SHARD_LEASES
    cluster_wide = _grants(with_recommender, "ClusterRole", "kerf-recommender")
    assert not {g for g in cluster_wide if g[:2] == ("coordination.k8s.io", "leases")}
    binding = one(with_recommender, "RoleBinding", "kerf-recommender-lease")
    assert binding["metadata"]["namespace"] == NAMESPACE
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "kerf-recommender", "namespace": NAMESPACE}
    ]


def refusal(*sets: str) -> str:
    """What `helm template` says refusing `sets` (it must refuse them)."""
    argv = [helm(), "template", "kerf", str(CHART), "--namespace", NAMESPACE]
    for value in sets:
        argv += ["--set", value]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode != 0, f"{sets} rendered"
    assert "Traceback" not in done.stderr and "panic" not in done.stderr
    return done.stderr


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ("webhok.timeoutSeconds=4", "additional properties 'webhok' not allowed"),
        ("webhook.timeoutSecond=4", "additional properties 'timeoutSecond' not allowed"),
        ("reconciler.dryrun=true", "additional properties 'dryrun' not allowed"),
        ("recommender.resources.request.cpu=1", "additional properties 'request' not allowed"),
        ("certificates.certManager.enable=true", "additional properties 'enable' not allowed"),
    ],
)
def test_an_unknown_key_is_refused_naming_it(value: str, named: str) -> None:
    assert named in refusal(value)


@pytest.mark.parametrize(
    ("value", "at"),
    [
        ("webhook.timeoutSeconds=99", "/webhook/timeoutSeconds"),
        ("webhook.timeoutSeconds=0", "/webhook/timeoutSeconds"),
        ("webhook.port=70000", "/webhook/port"),
        ("webhook.deadline=0", "/webhook/deadline"),
        ("webhook.deadline=soon", "/webhook/deadline"),
        ("webhook.logLevel=verbose", "/webhook/logLevel"),
        ("webhook.pdb.minAvailable=half", "/webhook/pdb/minAvailable"),
        ("reconciler.workers=0", "/reconciler/workers"),
        ("reconciler.evictionRate=-1", "/reconciler/evictionRate"),
        ("reconciler.retryPeriod=0.0", "/reconciler/retryPeriod"),
        ("reconciler.dryRun=maybe", "/reconciler/dryRun"),
        ("reconciler.replicas=0", "/reconciler/replicas"),
        ("reconciler.shards=0", "/reconciler/shards"),
        ("reconciler.shards=257", "/reconciler/shards"),
        ("reconciler.shards=eight", "/reconciler/shards"),
        ("recommender.shards=0", "/recommender/shards"),
        ("image.pullPolicy=Sometimes", "/image/pullPolicy"),
        ("recommender.interval=1y", "/recommender/interval"),
        ("recommender.prometheus=prometheus:9090", "/recommender/prometheus"),
        ("recommender.extraArgs={dry-run}", "/recommender/extraArgs/0"),
        ("certificates.validityDays=0", "/certificates/validityDays"),
        ("kubexRecommendations=Not_A_Name", "/kubexRecommendations"),
    ],
)
def test_an_out_of_range_value_is_refused_naming_its_path(value: str, at: str) -> None:
    assert f"at '{at}'" in refusal(value)


@pytest.mark.parametrize(
    "sets",
    [
        ("webhook.deadline=0.5", "reconciler.evictionRate=.5", "webhook.timeoutSeconds=5"),
        (
            "recommender.enabled=true",
            "recommender.interval=1d",
            "recommender.extraArgs={--dry-run}",
        ),
        ("webhook.pdb.minAvailable=50%", "kubexRecommendations=monitoring/recommendations"),
        ("image.tag=2", "image.pullPolicy=Always"),
        ("imagePullSecrets[0].name=registry", "webhook.tolerations[0].operator=Exists"),
    ],
)
def test_what_a_user_types_for_a_flag_is_accepted(sets: tuple[str, ...]) -> None:
    """`--set name=0.5` gives helm a string: the schema takes a positive decimal either way."""
    assert template(*sets)


def schema_paths(schema: dict[str, Any], prefix: str = "") -> set[str]:
    """Every value path the schema describes down to its leaves (free-form maps are leaves)."""
    paths = set()
    for key, sub in (schema.get("properties") or {}).items():
        path = f"{prefix}{key}"
        closed = sub.get("additionalProperties") is False and "properties" in sub
        paths |= schema_paths(sub, path + ".") if closed else {path}
    return paths


def values_paths(values: dict[str, Any], schema: dict[str, Any], prefix: str = "") -> set[str]:
    paths = set()
    for key, value in values.items():
        sub = (schema.get("properties") or {}).get(key) or {}
        closed = sub.get("additionalProperties") is False and "properties" in sub
        path = f"{prefix}{key}"
        paths |= values_paths(value, sub, path + ".") if closed else {path}
    return paths


def test_the_schema_describes_every_value_and_no_other() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert schema_paths(schema) == values_paths(values, schema)


@pytest.mark.parametrize(
    "text", ["30m", "1h", "1h30m", "7d", "1.5d", "1d12h", "90s", "x", "1y", "d"]
)
def test_the_schema_s_interval_is_the_recommender_s(text: str) -> None:
    """recommender.interval goes to `kerf recommend --interval`: the schema takes what it
    takes (a positive duration, days too)."""
    interval = json.loads((CHART / "values.schema.json").read_text())["properties"]["recommender"][
        "properties"
    ]["interval"]
    try:
        takes = parse_flag_duration(text) > timedelta(0)
    except DurationError:
        takes = False
    assert bool(re.fullmatch(interval["pattern"], text)) == takes


def test_notes_say_the_next_steps_and_what_uninstall_leaves() -> None:
    argv = [helm(), "install", "kerf", str(CHART), "-n", NAMESPACE, "--dry-run=client"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    notes = done.stdout.split("NOTES:", 1)[1]
    assert f"kubectl -n {NAMESPACE} rollout status deploy/kerf-webhook" in notes
    assert "kubectl get rightsizingrecommendations -A" in notes
    assert "kubectl apply --server-side --force-conflicts -k manifests/crds/" in notes
    assert "kubectl delete crd -l app.kubernetes.io/part-of=kerf" in notes
    assert f"kubectl delete namespace {NAMESPACE}" in notes
    assert "kerf cleanup" in notes
    assert "deploy/kerf-recommender" not in notes
    assert f"kerf status --shards --kerf-namespace {NAMESPACE}" in notes
    assert "Which of the 2 reconciler replicas works which of the 64 buckets" in notes


def test_notes_name_no_buckets_for_one_leader() -> None:
    argv = [helm(), "install", "kerf", str(CHART), "-n", NAMESPACE, "--dry-run=client"]
    argv += ["--set", "reconciler.shards=1"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "--shards" not in done.stdout.split("NOTES:", 1)[1]
