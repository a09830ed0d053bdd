"""kerf never breaks a workload on a namespace's LimitRange or ResourceQuota: the values
past them are dropped, the Deployment's pods are created and become Ready, and the
record says what was dropped and for which bound. On the selected backend: kubesim in
`make test` (its LimitRanger and quota admission), the real API server in `make e2e`."""

from __future__ import annotations

from typing import Any

from harness.wait import wait_until
from tests.e2e.scenario import (
    Namespace,
    container,
    deployment,
    requests,
    static_policy,
)


def limit_range(*items: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "bounds"},
        "spec": {"limits": list(items)},
    }


def quota(hard: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "team"},
        "spec": {"hard": hard},
    }


def sized(cpu: str, memory: str, cpu_limit: str, memory_limit: str) -> dict[str, Any]:
    return container(
        "app",
        cpu,
        memory,
        **{
            "resources": {
                "requests": {"cpu": cpu, "memory": memory},
                "limits": {"cpu": cpu_limit, "memory": memory_limit},
            }
        },
    )


def blocked_for(ns: Namespace, reason: str) -> dict[str, Any]:
    """Wait until the record is Blocked for `reason`; its status."""
    return wait_until(
        lambda: ns.status() if ns.status().get("reason") == reason else None,
        f"the record to say {reason}",
    )


def filtered(status: dict[str, Any]) -> set[tuple[str, str, str, str]]:
    return {
        (f["container"], f["field"], f["resource"], f["reason"]) for f in status.get("filtered", [])
    }


def no_failed_creates(ns: Namespace) -> None:
    failed = [e for e in ns.events() if e.get("reason") == "FailedCreate"]
    assert failed == [], [e.get("note") for e in failed]


def test_a_policy_past_a_container_limit_range_leaves_the_pods_creatable(ns: Namespace) -> None:
    ns.apply(
        limit_range(
            {
                "type": "Container",
                "min": {"cpu": "250m", "memory": "512Mi"},
                "max": {"cpu": "500m", "memory": "1Gi"},
            }
        )
    )
    ns.apply(
        static_policy(
            {
                "app": {
                    "requests": {"cpu": "100m", "memory": "256Mi"},
                    # within the real node's 1800m: a larger value is Infeasible first
                    "limits": {"cpu": "1", "memory": "2Gi"},
                }
            }
        )
    )
    ns.apply(deployment(replicas=2, containers=[sized("300m", "600Mi", "500m", "1Gi")]))
    pods = ns.running("web", 2)
    assert all(requests(p) == {"cpu": "300m", "memory": "600Mi"} for p in pods)
    status = blocked_for(ns, "LimitRangeViolation")
    blocked = {c["type"]: c for c in status["conditions"]}["Blocked"]
    assert f"LimitRange {ns.name}/bounds: minimum cpu per Container is 250m" in blocked["message"]
    assert f"LimitRange {ns.name}/bounds: maximum memory per Container is 1Gi" in blocked["message"]
    assert ("app", "limits", "memory", "LimitRangeViolation") in filtered(status)
    assert ("app", "requests", "cpu", "LimitRangeViolation") in filtered(status)
    no_failed_creates(ns)


def test_only_the_values_past_a_max_only_limit_range_are_dropped(ns: Namespace) -> None:
    ns.apply(limit_range({"type": "Container", "max": {"memory": "1Gi"}}))
    ns.apply(
        static_policy(
            {
                "app": {
                    "requests": {"cpu": "250m"},
                    "limits": {"memory": "2Gi"},
                }
            }
        )
    )
    ns.apply(deployment(replicas=2, containers=[sized("200m", "256Mi", "1", "512Mi")]))

    def cpu_applied() -> list[dict[str, Any]] | None:
        pods = ns.pods("web")
        ok = len(pods) == 2 and all(requests(p)["cpu"] == "250m" for p in pods)
        return pods if ok else None

    pods = wait_until(cpu_applied, "the CPU request applied, the memory limit left")
    for pod in pods:
        assert pod["spec"]["containers"][0]["resources"]["limits"]["memory"] == "512Mi"
    ns.running("web", 2)
    status = blocked_for(ns, "LimitRangeViolation")
    assert filtered(status) == {("app", "limits", "memory", "LimitRangeViolation")}
    no_failed_creates(ns)


def test_a_sidecar_limit_past_a_container_max_is_dropped(ns: Namespace) -> None:
    ns.apply(limit_range({"type": "Container", "max": {"memory": "1Gi"}}))
    proxy = {**sized("100m", "128Mi", "200m", "256Mi"), "name": "proxy", "restartPolicy": "Always"}
    ns.apply(static_policy({"proxy": {"limits": {"memory": "2Gi"}}}))
    ns.apply(
        deployment(
            replicas=1,
            containers=[sized("100m", "128Mi", "200m", "256Mi")],
            init_containers=[proxy],
        )
    )
    ns.running("web", 1)
    status = blocked_for(ns, "LimitRangeViolation")
    assert filtered(status) == {("proxy", "limits", "memory", "LimitRangeViolation")}
    no_failed_creates(ns)


def test_a_pod_limit_range_holds_the_resize_and_the_new_pods(ns: Namespace) -> None:
    ns.apply(deployment(replicas=2, containers=[sized("200m", "256Mi", "500m", "512Mi")]))
    before = {p["metadata"]["uid"] for p in ns.running("web", 2)}
    ns.apply(limit_range({"type": "Pod", "max": {"memory": "1Gi"}}))
    ns.apply(static_policy({"app": {"limits": {"memory": "4Gi"}}}))
    status = blocked_for(ns, "LimitRangeViolation")
    assert (
        "maximum memory per Pod is 1Gi"
        in {c["type"]: c for c in status["conditions"]}["Blocked"]["message"]
    )
    assert {p["metadata"]["uid"] for p in ns.pods("web")} == before
    assert not [e for e in ns.events() if e.get("reason") == "ResizeRejected"]
    # A new pod is admitted with its manifest's limit, not the policy's.
    ns.kerf.kubectl("-n", ns.name, "scale", "deployment/web", "--replicas=3")
    pods = ns.running("web", 3)
    assert all(p["spec"]["containers"][0]["resources"]["limits"]["memory"] == "512Mi" for p in pods)
    no_failed_creates(ns)


def test_a_policy_past_a_resource_quota_leaves_the_deployment_ready(ns: Namespace) -> None:
    ns.apply(quota({"requests.cpu": "150m", "requests.memory": "200Mi", "limits.cpu": "300m"}))
    wait_until(
        lambda: (ns.get("resourcequota", "team").get("status") or {}).get("hard"),
        "the quota controller to fill in the quota's status",
    )
    ns.apply(
        static_policy(
            {
                "app": {
                    "requests": {"cpu": "200m", "memory": "256Mi"},
                    "limits": {"cpu": "400m", "memory": "512Mi"},
                }
            }
        )
    )
    ns.apply(deployment(replicas=1, containers=[sized("100m", "128Mi", "200m", "256Mi")]))
    (pod,) = ns.running("web", 1)
    resources = pod["spec"]["containers"][0]["resources"]
    assert resources["requests"]["cpu"] == "100m" and resources["limits"]["cpu"] == "200m"
    status = wait_until(
        lambda: ns.status() if ns.status().get("filtered") else None,
        "the record to list what the quota held",
    )
    assert ("app", "requests", "cpu", "ResourceQuotaExceeded") in filtered(status)
    assert ("app", "limits", "cpu", "ResourceQuotaExceeded") in filtered(status)
    messages = " ".join(f["message"] for f in status["filtered"])
    assert f"ResourceQuota {ns.name}/team: requests.cpu would be" in messages
    no_failed_creates(ns)
