from collections.abc import Mapping
from typing import Any

import pytest

from app.model.owners import OwnerLookup, WorkloadRef, resolve_owner


class DictLookup:
    """An OwnerLookup over a dict keyed by (kind, namespace, name)."""

    def __init__(self, *objects: Mapping[str, Any]) -> None:
        self.objects = {
            (o["kind"], o["metadata"]["namespace"], o["metadata"]["name"]): o for o in objects
        }
        self.calls: list[tuple[str, str, str]] = []

    def get(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        self.calls.append((kind, namespace, name))
        return self.objects.get((kind, namespace, name))


def ref(kind: str, name: str, *, controller: bool | None = True, api: str = "apps/v1") -> dict:
    out: dict[str, Any] = {"apiVersion": api, "kind": kind, "name": name, "uid": f"uid-{name}"}
    if controller is not None:
        out["controller"] = controller
    return out


def obj(kind: str, name: str, *owners: dict, ns: str = "shop", labels: dict | None = None) -> dict:
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if owners:
        meta["ownerReferences"] = list(owners)
    if labels is not None:
        meta["labels"] = labels
    return {"kind": kind, "metadata": meta}


def pod(*owners: dict, labels: dict | None = None, ns: str = "shop") -> dict:
    return obj("Pod", "p-1", *owners, ns=ns, labels=labels)


EMPTY = DictLookup()


def test_workload_ref() -> None:
    w = WorkloadRef("Deployment", "shop", "web")
    assert w.key == ("Deployment", "shop", "web")
    assert w == WorkloadRef(kind="Deployment", namespace="shop", name="web")
    assert hash(w) == hash(WorkloadRef("Deployment", "shop", "web"))
    with pytest.raises(AttributeError):
        w.name = "other"  # type: ignore[misc]


def test_dict_lookup_satisfies_protocol() -> None:
    lookup: OwnerLookup = DictLookup()
    assert lookup.get("ReplicaSet", "a", "b") is None


def test_bare_pod_has_no_owner() -> None:
    assert resolve_owner(pod(), EMPTY) is None
    assert resolve_owner({"metadata": {"ownerReferences": []}}, EMPTY) is None
    assert resolve_owner({}, EMPTY) is None


def test_replicaset_to_deployment() -> None:
    rs = obj("ReplicaSet", "web-7d4b9", ref("Deployment", "web"))
    lookup = DictLookup(rs)
    got = resolve_owner(pod(ref("ReplicaSet", "web-7d4b9")), lookup)
    assert got == WorkloadRef("Deployment", "shop", "web")
    assert lookup.calls == [("ReplicaSet", "shop", "web-7d4b9")]


def test_replicaset_to_rollout() -> None:
    rs = obj("ReplicaSet", "cart-5f6c", ref("Rollout", "cart", api="argoproj.io/v1alpha1"))
    got = resolve_owner(pod(ref("ReplicaSet", "cart-5f6c")), DictLookup(rs))
    assert got == WorkloadRef("Rollout", "shop", "cart")


def test_bare_replicaset_is_the_workload() -> None:
    rs = obj("ReplicaSet", "legacy-rs")
    got = resolve_owner(pod(ref("ReplicaSet", "legacy-rs")), DictLookup(rs))
    assert got == WorkloadRef("ReplicaSet", "shop", "legacy-rs")


def test_replicaset_owned_by_something_else_is_the_workload() -> None:
    rs = obj("ReplicaSet", "x-1", ref("SomeOperatorThing", "x", api="example.com/v1"))
    got = resolve_owner(pod(ref("ReplicaSet", "x-1")), DictLookup(rs))
    assert got == WorkloadRef("ReplicaSet", "shop", "x-1")


def test_unknown_replicaset_uses_pod_template_hash() -> None:
    p = pod(ref("ReplicaSet", "web-api-7d4b9"), labels={"pod-template-hash": "7d4b9"})
    assert resolve_owner(p, EMPTY) == WorkloadRef("Deployment", "shop", "web-api")


def test_unknown_replicaset_of_rollout_uses_rollout_hash() -> None:
    p = pod(ref("ReplicaSet", "cart-6c8f"), labels={"rollouts-pod-template-hash": "6c8f"})
    assert resolve_owner(p, EMPTY) == WorkloadRef("Rollout", "shop", "cart")


def test_unknown_replicaset_without_hash_label_strips_last_segment() -> None:
    p = pod(ref("ReplicaSet", "web-api-7d4b9"), labels={"app": "web"})
    assert resolve_owner(p, EMPTY) == WorkloadRef("Deployment", "shop", "web-api")
    assert resolve_owner(pod(ref("ReplicaSet", "web-api-7d4b9")), EMPTY) == WorkloadRef(
        "Deployment", "shop", "web-api"
    )


def test_unknown_replicaset_with_mismatched_hash_strips_last_segment() -> None:
    p = pod(ref("ReplicaSet", "web-abc12"), labels={"pod-template-hash": "zzz"})
    assert resolve_owner(p, EMPTY) == WorkloadRef("Deployment", "shop", "web")


@pytest.mark.parametrize("name", ["nodash", "-leading"])
def test_unknown_replicaset_with_ungenerated_name_is_itself(name: str) -> None:
    got = resolve_owner(pod(ref("ReplicaSet", name), labels={"pod-template-hash": name}), EMPTY)
    assert got == WorkloadRef("ReplicaSet", "shop", name)


def test_job_to_cronjob() -> None:
    job = obj("Job", "nightly-28911440", ref("CronJob", "nightly", api="batch/v1"))
    got = resolve_owner(pod(ref("Job", "nightly-28911440", api="batch/v1")), DictLookup(job))
    assert got == WorkloadRef("CronJob", "shop", "nightly")


def test_job_without_cronjob_is_the_job() -> None:
    job = obj("Job", "migrate")
    got = resolve_owner(pod(ref("Job", "migrate", api="batch/v1")), DictLookup(job))
    assert got == WorkloadRef("Job", "shop", "migrate")


def test_unknown_job_is_the_job() -> None:
    got = resolve_owner(pod(ref("Job", "nightly-28911440", api="batch/v1")), EMPTY)
    assert got == WorkloadRef("Job", "shop", "nightly-28911440")


@pytest.mark.parametrize(
    ("kind", "api"),
    [
        ("StatefulSet", "apps/v1"),
        ("DaemonSet", "apps/v1"),
        ("Model", "serving.example.com/v1"),
        ("StrimziPodSet", "core.strimzi.io/v1beta2"),
        ("AnalysisRun", "argoproj.io/v1alpha1"),
    ],
)
def test_direct_owners(kind: str, api: str) -> None:
    lookup = DictLookup()
    assert resolve_owner(pod(ref(kind, "db", api=api)), lookup) == WorkloadRef(kind, "shop", "db")
    assert lookup.calls == []  # no look-up needed for direct controllers


def test_controller_reference_wins_over_first() -> None:
    p = pod(ref("StatefulSet", "not-me", controller=False), ref("DaemonSet", "agent"))
    assert resolve_owner(p, EMPTY) == WorkloadRef("DaemonSet", "shop", "agent")


def test_first_reference_when_none_is_controller() -> None:
    p = pod(
        ref("StatefulSet", "first", controller=None), ref("DaemonSet", "second", controller=False)
    )
    assert resolve_owner(p, EMPTY) == WorkloadRef("StatefulSet", "shop", "first")


def test_replicaset_controller_reference_wins() -> None:
    rs = obj(
        "ReplicaSet",
        "web-1",
        ref("Rollout", "other", controller=False),
        ref("Deployment", "web"),
    )
    got = resolve_owner(pod(ref("ReplicaSet", "web-1")), DictLookup(rs))
    assert got == WorkloadRef("Deployment", "shop", "web")


def test_namespace_comes_from_the_pod() -> None:
    rs = obj("ReplicaSet", "web-1", ref("Deployment", "web"), ns="other")
    lookup = DictLookup(rs)
    # The ReplicaSet in another namespace is not this pod's owner.
    got = resolve_owner(pod(ref("ReplicaSet", "web-1"), ns="shop"), lookup)
    assert got == WorkloadRef("Deployment", "shop", "web")
    assert lookup.calls == [("ReplicaSet", "shop", "web-1")]


def test_pod_without_namespace_is_in_default() -> None:
    p = {"metadata": {"name": "p", "ownerReferences": [ref("StatefulSet", "db")]}}
    assert resolve_owner(p, EMPTY) == WorkloadRef("StatefulSet", "default", "db")
