"""Ties, keys and scope as Kubex documents them (issue 34, part 5), through the whole
decision: the annotation prefixes Kubex writes, the seed's tie rule between kinds, and a
`labelSelector` matched against the workload's own labels (Kubex's CRDs: "labelSelector
limits the workload objects (e.g., Deployments, CronJobs) this policy applies to")."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.model.annotations import PAUSE_REASON, PAUSE_UNTIL, SKIP_CONTAINERS, fixed_key
from tests.app import builders as b

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

#: Troubleshooting.md, "Interpreting Recommendation Annotations"
KUBEX_PREFIXES = {
    "StaticPolicy": "static",
    "ClusterStaticPolicy": "cwstatic",
    "ProactivePolicy": "proactive",
    "ClusterProactivePolicy": "cwproactive",
    "GpuReactivePolicy": "gpureactive",
    "RollbackPolicy": "rollbackpolicy",
}


def test_kerf_writes_the_keys_kubex_documents() -> None:
    for kind, prefix in KUBEX_PREFIXES.items():
        for fld in ("requests", "limits"):
            assert fixed_key(kind, fld) == f"{prefix}.rightsizing.kubex.ai/desired-resource-{fld}"
    # Advanced-Configuration.md, "Pausing Automation"
    assert PAUSE_UNTIL == "rightsizing.kubex.ai/pause-until"
    assert PAUSE_REASON == "rightsizing.kubex.ai/pause-reason"
    assert SKIP_CONTAINERS == "rightsizing.kubex.ai/skip-containers"


def _pair(ns_offset_s: int, cluster_offset_s: int) -> list[Any]:
    """A StaticPolicy and a ClusterStaticPolicy of equal weight for container app."""
    values = {"requests": {"cpu": "300m"}}
    return [
        b.strategy("default", cluster=True),
        b.static(
            "ns-pol",
            {"app": values},
            weight=100,
            created=b.T0 + timedelta(seconds=ns_offset_s),
        ),
        b.static(
            "cl-pol",
            {"app": {"requests": {"cpu": "200m"}}},
            kind="ClusterStaticPolicy",
            weight=100,
            created=b.T0 + timedelta(seconds=cluster_offset_s),
        ),
    ]


@SETTINGS
@given(
    st.integers(-3600, 3600),
    st.integers(-3600, 3600),
    st.booleans(),
    st.randoms(use_true_random=False),
)
def test_between_two_kinds_the_smaller_key_decides_whatever_their_age_and_order(
    ns_offset_s: int, cluster_offset_s: int, multi: bool, rnd: Any
) -> None:
    # Equal priority (90 both), weight and container target: age is compared only within a
    # kind (seed policy-evaluation.txt), so "cwstatic.…" < "static.…" decides, in either
    # key format, whichever policy is older and whatever order the view loads them in.
    objs = [
        *_pair(ns_offset_s, cluster_offset_s),
        b.global_config(multiPolicyContainerRightsizingEnabled=multi),
    ]
    rnd.shuffle(objs)
    d = b.decide(b.view(*b.base_objects(), *objs), b.pod(), "admission")
    assert {(s.policy_kind, s.policy_name) for s in d.selected} == {
        ("ClusterStaticPolicy", "cl-pol")
    }


def test_favouring_namespace_policies_in_policy_evaluation_flips_the_tie() -> None:
    # Policy-Evaluation.md, "Favor Namespace Policies Over Cluster Policies"
    objs = [*_pair(0, 0), b.policy_evaluation(StaticPolicy=100, ClusterStaticPolicy=80)]
    d = b.decide(b.view(*b.base_objects(), *objs), b.pod(), "admission")
    assert {s.policy_name for s in d.selected} == {"ns-pol"}


LABEL_VALUES = st.dictionaries(
    st.sampled_from(["tier", "team", "app.kubernetes.io/part-of"]),
    st.sampled_from(["api", "web", "storefront"]),
    max_size=3,
)


@SETTINGS
@given(LABEL_VALUES, LABEL_VALUES, LABEL_VALUES)
def test_label_selector_matches_the_workloads_labels_not_its_pods(
    wanted: dict[str, str], workload_labels: dict[str, str], pod_labels: dict[str, str]
) -> None:
    deployment = b.deployment(labels={"app": "web", **workload_labels})
    policy = b.static(scope={"labelSelector": {"matchLabels": wanted}})
    v = b.view(b.namespace(), b.strategy(), deployment, policy)
    d = b.decide(v, b.pod(labels=pod_labels), "admission")
    matches = all(workload_labels.get(k) == value for k, value in wanted.items())
    assert bool(d.selected) == matches


def test_a_pause_reason_is_shown_in_the_block_where_the_pause_is() -> None:
    # Advanced-Configuration.md, "Pause entire namespace": `pause-reason` beside the pause
    paused = {PAUSE_UNTIL: "infinite", PAUSE_REASON: "quarter-end freeze"}
    objs = [*b.base_objects(ns_annotations=paused), b.static()]
    d = b.decide(b.view(*objs), b.pod(), "admission")
    assert (d.outcome, d.reason) == ("blocked", "Paused")
    assert d.message == (
        "paused by the namespace annotation rightsizing.kubex.ai/pause-until: quarter-end freeze"
    )
    # Without a reason the message names the annotation alone; the pod's own pause first.
    objs = [*b.base_objects(ns_annotations=paused), b.static()]
    d = b.decide(b.view(*objs), b.pod(annotations={PAUSE_UNTIL: "infinite"}), "admission")
    assert d.message == "paused by the pod annotation rightsizing.kubex.ai/pause-until"


def test_an_expired_pause_on_the_pod_does_not_lift_the_namespaces() -> None:
    # Kubex: "a pod's pause-until overrides"; kerf: any pause in force holds the pod.
    objs = [*b.base_objects(ns_annotations={PAUSE_UNTIL: "infinite"}), b.static()]
    expired = b.pod(annotations={PAUSE_UNTIL: "2026-04-01T00:00:00Z"})
    d = b.decide(b.view(*objs), expired, "admission")
    assert (d.outcome, d.reason) == ("blocked", "Paused")
    assert d.message.startswith("paused by the namespace annotation")
