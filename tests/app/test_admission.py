"""Admission decisions (SPEC §6 baseline, §3 pause/skip annotations, §9 re-invocation)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import orjson
import pytest

from app.decide.admission import AdmissionResult, admit_pod
from app.model.annotations import ARGS_KEY, PAUSE_UNTIL, POD_INFO, SKIP_CONTAINERS
from tests.app import builders as b

NOW = b.NOW
TWO = {"app": b.APP_RES, "side": b.APP_RES}
HALF = {"*": {"requests": {"cpu": "250m", "memory": "256Mi"}}}


def admit(*objs: Any, pod: dict[str, Any] | None = None, namespace: str = b.NS) -> AdmissionResult:
    p = pod or b.pod(phase="Pending")
    return admit_pod(b.view(*objs), p, namespace, NOW)


def applied(pod: dict[str, Any], result: AdmissionResult) -> dict[str, Any]:
    """The pod after the webhook's patch."""
    out = orjson.loads(orjson.dumps(pod))
    for c in out["spec"]["containers"]:
        if c["name"] in result.resources:
            c["resources"] = result.resources[c["name"]]
        if c["name"] in result.args:
            c["args"] = result.args[c["name"]]
    out["metadata"]["annotations"].update(result.annotations)
    return out


def test_admission_applies_and_annotates() -> None:
    r = admit(*b.base_objects(), b.static())
    assert (r.outcome, r.reason) == ("apply", None)
    assert r.resources == {
        "app": {
            "requests": {"cpu": "250m", "memory": "256Mi"},
            "limits": {"cpu": "1", "memory": "1Gi"},
        }
    }
    info = orjson.loads(r.annotations[POD_INFO])
    assert info["keys"] == ["static.rightsizing.kubex.ai/desired-resource-requests"]
    assert info["containers"] == r.resources
    assert (
        r.annotations["static.rightsizing.kubex.ai/desired-resource-requests"]
        == '{"app":{"cpu":"250m","memory":"256Mi"}}'
    )


def test_namespace_comes_from_the_request_when_the_pod_has_none() -> None:
    p = b.pod(phase="Pending")
    del p["metadata"]["namespace"]
    r = admit_pod(b.view(*b.base_objects(), b.static()), p, b.NS, NOW)
    assert r.outcome == "apply"


def test_reinvocation_yields_no_change() -> None:
    objs = [*b.base_objects(), b.static()]
    p = b.pod(phase="Pending")
    first = admit(*objs, pod=p)
    again = admit(*objs, pod=applied(p, first))
    assert (again.outcome, again.reason) == ("skipped", "AlreadyApplied")
    assert again.resources == {} and again.annotations == {} and again.args == {}


def test_nothing_changed_writes_no_annotation() -> None:
    r = admit(*b.base_objects(), b.static(containers={"app": {"requests": {"cpu": "400m"}}}))
    assert r.outcome == "skipped" and r.annotations == {} and r.resources == {}


# ------------------------------------------------------------------ baseline


def test_baseline_is_last_applied_not_manifest() -> None:
    # Manifest says 1 CPU; the last step applied 500m; the policy asks 100m.
    res = {"requests": {"cpu": "1"}, "limits": {}}
    objs = [
        *b.base_objects(containers={"app": res}),
        b.static(containers={"app": {"requests": {"cpu": "100m"}}}),
        b.recommendation(last_applied={"app": {"requests": {"cpu": "500m"}}}),
    ]
    r = admit(*objs, pod=b.pod(containers={"app": res}, phase="Pending"))
    assert r.resources["app"]["requests"] == {"cpu": "250m"}  # 50 % of 500m, not of 1
    without = admit(*objs[:-1], pod=b.pod(containers={"app": res}, phase="Pending"))
    assert without.resources["app"]["requests"] == {"cpu": "500m"}  # 50 % of the manifest


def test_rollout_never_undoes_a_step() -> None:
    # The last step reached the policy's value; a new pod from the (unchanged) template
    # still carries the manifest's 400m and must get the applied 250m back.
    objs = [
        *b.base_objects(),
        b.static(containers={"app": {"requests": {"cpu": "250m"}}}),
        b.recommendation(last_applied={"app": {"requests": {"cpu": "250m"}}}),
    ]
    r = admit(*objs)
    assert r.outcome == "apply"
    assert r.resources["app"]["requests"]["cpu"] == "250m"


def test_rollout_keeps_last_applied_when_new_value_is_within_tolerance() -> None:
    objs = [
        *b.base_objects(),
        b.static(containers={"app": {"requests": {"cpu": "245m"}}}),
        b.recommendation(last_applied={"app": {"requests": {"cpu": "250m"}}}),
    ]
    r = admit(*objs)
    assert r.resources["app"]["requests"]["cpu"] == "250m"


def test_admission_ignores_cooldown_of_last_applied() -> None:
    objs = [
        *b.base_objects(),
        b.static(),
        b.recommendation(
            last_applied={"app": {"requests": {"cpu": "400m"}}},
            applied_at=NOW - timedelta(minutes=5),
        ),
    ]
    assert admit(*objs).outcome == "apply"


# ------------------------------------------------------------------ skip-containers


def skip_case(pod_value: str | None, workload_value: str | None) -> AdmissionResult:
    wl = {SKIP_CONTAINERS: workload_value} if workload_value is not None else None
    ann = {SKIP_CONTAINERS: pod_value} if pod_value is not None else None
    objs = [*b.base_objects(containers=TWO, workload_annotations=wl), b.static(containers=HALF)]
    return admit(*objs, pod=b.pod(containers=TWO, annotations=ann, phase="Pending"))


@pytest.mark.parametrize(
    ("pod_value", "workload_value", "changed"),
    [
        (None, None, {"app", "side"}),
        ("side", None, {"app"}),
        (None, "side", {"app"}),
        ("app", "side", {"side"}),  # the pod's value wins
        ("", "side", {"app", "side"}),  # an empty pod value skips none
        (" app , side ", None, set()),
    ],
)
def test_skip_containers(
    pod_value: str | None, workload_value: str | None, changed: set[str]
) -> None:
    assert set(skip_case(pod_value, workload_value).resources) == changed


# ------------------------------------------------------------------ pause / protected


@pytest.mark.parametrize("where", ["pod", "workload", "namespace"])
def test_pause_on_pod_workload_or_namespace(where: str) -> None:
    mark = {PAUSE_UNTIL: "infinite"}
    objs = [
        *b.base_objects(
            workload_annotations=mark if where == "workload" else None,
            ns_annotations=mark if where == "namespace" else None,
        ),
        b.static(),
    ]
    p = b.pod(annotations=mark if where == "pod" else None, phase="Pending")
    r = admit(*objs, pod=p)
    assert (r.outcome, r.reason) == ("blocked", "Paused")
    assert r.resources == {} and r.annotations == {}


def test_pause_until_a_time() -> None:
    objs = [*b.base_objects(), b.static()]
    future = b.pod(annotations={PAUSE_UNTIL: b.ts(NOW + timedelta(hours=1))})
    past = b.pod(annotations={PAUSE_UNTIL: b.ts(NOW - timedelta(hours=1))})
    assert admit(*objs, pod=future).reason == "Paused"
    assert admit(*objs, pod=past).outcome == "apply"


def ns_objects(ns: str, *extra: Any) -> list[Any]:
    return [
        b.namespace(ns),
        b.strategy(namespace=ns),
        b.deployment(namespace=ns),
        b.static(namespace=ns),
        *extra,
    ]


@pytest.mark.parametrize(
    "ns", ["kube-system", "kube-public", "openshift-monitoring", "gmp-system", "kerf-system"]
)
def test_protected_namespaces_by_default(ns: str) -> None:
    r = admit(*ns_objects(ns), pod=b.pod(namespace=ns), namespace=ns)
    assert (r.outcome, r.reason) == ("skipped", "ProtectedNamespace")


def test_own_namespace_is_always_protected() -> None:
    cfg = b.global_config(protectedNamespacePatterns=[])
    r = admit(
        *ns_objects("kerf-system", cfg), pod=b.pod(namespace="kerf-system"), namespace="kerf-system"
    )
    assert r.reason == "ProtectedNamespace"
    # With no patterns, kube-system is not protected any more.
    r = admit(
        *ns_objects("kube-system", cfg), pod=b.pod(namespace="kube-system"), namespace="kube-system"
    )
    assert r.outcome == "apply"


def test_unprotected_namespace_applies() -> None:
    r = admit(
        *ns_objects("kubernetes-apps"),
        pod=b.pod(namespace="kubernetes-apps"),
        namespace="kubernetes-apps",
    )
    assert r.outcome == "apply"


# ------------------------------------------------------------------ args at admission


def test_args_policy_patches_args_and_records_key() -> None:
    objs = [
        *b.base_objects(),
        b.args_policy(
            "gc",
            {"app": [{"name": "--gc", "value": "g1"}, {"name": "--debug", "operation": "Remove"}]},
        ),
    ]
    p = b.pod(extra={"app": {"args": ["--debug", "true", "--port=8080"]}}, phase="Pending")
    r = admit(*objs, pod=p)
    assert r.args == {"app": ["--port=8080", "--gc=g1"]}
    assert ARGS_KEY in orjson.loads(r.annotations[POD_INFO])["keys"]


def test_args_are_not_patched_on_a_paused_pod() -> None:
    objs = [*b.base_objects(), b.args_policy("gc", {"*": [{"name": "--gc", "value": "g1"}]})]
    p = b.pod(annotations={PAUSE_UNTIL: "infinite"}, phase="Pending")
    assert admit(*objs, pod=p).args == {}


def test_rollout_keeps_last_applied_when_the_new_value_is_refused() -> None:
    # Throttled refuses going lower than the baseline (250m), not keeping it.
    objs = [
        *b.base_objects(),
        b.proactive(),
        b.configmap(b.row(requests={"cpu": "200m"}, throttling=0.9)),
        b.recommendation(last_applied={"app": {"requests": {"cpu": "250m"}}}),
    ]
    r = admit(*objs)
    assert r.resources["app"]["requests"]["cpu"] == "250m"


# ------------------------------------------------------------------ blocked at admission


def test_blocked_new_pod_gets_the_live_values_not_its_manifest() -> None:
    # The last step applied 250m; a new proactive proposal is blocked (LowConfidence):
    # the workload keeps its current values, so the new pod gets 250m, not the manifest 400m.
    objs = [
        *b.base_objects(),
        b.proactive(),
        b.configmap(b.row(requests={"cpu": "200m"}, confidence=0.2)),
        b.recommendation(last_applied={"app": {"requests": {"cpu": "250m"}}}),
    ]
    r = admit(*objs)
    assert (r.outcome, r.reason) == ("blocked", "LowConfidence")
    assert r.resources["app"]["requests"]["cpu"] == "250m"
    assert POD_INFO in r.annotations


def test_paused_new_pod_keeps_its_manifest() -> None:
    objs = [
        *b.base_objects(workload_annotations={PAUSE_UNTIL: "infinite"}),
        b.static(containers={"app": {"requests": {"cpu": "100m"}}}),
        b.recommendation(last_applied={"app": {"requests": {"cpu": "250m"}}}),
    ]
    r = admit(*objs)
    assert (r.outcome, r.reason) == ("blocked", "Paused")
    assert r.resources == {} and r.annotations == {}


def test_args_policy_naming_the_container_beats_a_wildcard_one() -> None:
    objs = [
        *b.base_objects(),
        b.static(),
        b.args_policy("wild", {"*": [{"name": "--level", "value": "wild"}]}, weight=5),
        b.args_policy(
            "named",
            {"app": [{"name": "--level", "value": "named"}]},
            weight=5,
            created=b.T0 + timedelta(hours=1),
        ),
    ]
    r = admit(*objs)
    assert r.args["app"][-1] == "--level=named"


def test_mirror_pods_are_skipped() -> None:
    mirror = b.pod(annotations={"kubernetes.io/config.mirror": "abc"}, phase="Pending")
    r = admit(*b.base_objects(), b.static(), pod=mirror)
    assert (r.outcome, r.reason) == ("skipped", "MirrorPod")
    assert r.resources == {} and r.annotations == {}
