"""Selection (SPEC §5, seed policy-evaluation.txt): one test per seed example and rule."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import Any

from app.model.annotations import encode_fixed, encode_owned, fixed_key, policy_key
from app.model.crd import DEFAULT_PRECEDENCE, KerfResource
from app.policy.plans import policy_priorities
from app.policy.selection import (
    Candidate,
    Target,
    best_candidate,
    extract_candidates,
    priorities,
    select,
)
from tests.app import builders as b

CPU = Target("app", "requests", "cpu")
AT_10 = datetime.fromisoformat("2026-11-01T10:00:00+00:00")
AT_11 = datetime.fromisoformat("2026-11-01T11:00:00+00:00")

#: the two signals every GpuReactivePolicy names (Kubex's format)
GPU_METRICS = {
    signal: {
        "prometheus": {
            "metric": metric,
            "namespaceLabel": "namespace",
            "podLabel": "pod",
            "containerLabel": "container",
        }
    }
    for signal, metric in (("compute", "DCGM_FI_PROF_SM_ACTIVE"), ("memory", "gpu_memory"))
}


def gpu_reactive(name: str, weight: int) -> KerfResource:
    return b.kerf(
        "GpuReactivePolicy",
        name,
        {"automationStrategyRef": {"name": "default"}, "weight": weight, "metrics": GPU_METRICS},
        created=b.T0,
    )


def owned(
    policy: KerfResource,
    containers: dict[str, dict[str, str]],
    *,
    fld: str = "requests",
    stamp: bool = True,
) -> tuple[str, str]:
    """(key, payload) a policy publishes with multi-policy on."""
    meta = policy.metadata
    key = policy_key(policy.kind, meta.namespace or "", meta.name, fld)
    return key, encode_owned(
        kind=policy.kind,
        namespace=meta.namespace or "",
        name=meta.name,
        generation=1,
        created_at=meta.creation_timestamp if stamp else None,
        containers=containers,
    )


def candidates(
    *published: tuple[KerfResource, tuple[str, str]], prio: dict[str, int] | None = None
) -> list[Candidate]:
    annotations = {key: text for _, (key, text) in published}
    sources = {key: policy for policy, (key, _) in published}
    found, warnings = extract_candidates(annotations, sources, prio or dict(DEFAULT_PRECEDENCE))
    assert warnings == []
    return found


def winner(found: list[Candidate], target: Target = CPU) -> Candidate:
    result = select(found, [target.container])
    return result[target]


def cpu(value: str = "250m") -> dict[str, dict[str, str]]:
    return {"app": {"cpu": value}}


# ------------------------------------------------------------------ default precedence


def test_default_precedence_when_policy_evaluation_is_absent() -> None:
    # The table itself is pinned literally in test_models (SPEC §2 defaults).
    assert priorities(None) == dict(DEFAULT_PRECEDENCE)
    assert policy_priorities(b.view()) == priorities(None)


def test_policy_evaluation_replaces_priorities_and_unlisted_type_is_zero() -> None:
    v = b.view(b.policy_evaluation(ProactivePolicy=200, StaticPolicy=10))
    assert policy_priorities(v) == {"ProactivePolicy": 200, "StaticPolicy": 10}
    stat = b.static("s", weight=100)
    pro = b.proactive("p", weight=0)
    rb = b.rollback_policy("rb", weight=100)
    found = candidates(
        (stat, owned(stat, cpu("100m"))),
        (pro, owned(pro, cpu("200m"))),
        (rb, owned(rb, cpu("300m"))),
        prio=policy_priorities(v),
    )
    assert {c.kind: c.priority for c in found} == {
        "StaticPolicy": 10,
        "ProactivePolicy": 200,
        "RollbackPolicy": 0,
    }
    assert winner(found).value == "200m"


# ------------------------------------------------------------------ the four examples


def test_example_1_rollback_wins_by_type_priority_regardless_of_weight() -> None:
    rb = b.rollback_policy("rb", weight=50)
    gpu = gpu_reactive("gpu", 10)
    cpro = b.proactive("cpro", kind="ClusterProactivePolicy", weight=50)
    pro = b.proactive("pro", weight=100)
    found = candidates(
        (rb, owned(rb, cpu("100m"))),
        (gpu, owned(gpu, cpu("200m"))),
        (cpro, owned(cpro, cpu("300m"))),
        (pro, owned(pro, cpu("400m"))),
    )
    best = winner(found)
    assert (best.kind, best.value, best.priority) == ("RollbackPolicy", "100m", 130)
    # Without the rollback policy, GpuReactive (120) beats both proactive kinds (70).
    assert winner([c for c in found if c.kind != "RollbackPolicy"]).kind == "GpuReactivePolicy"


def test_example_2_same_type_higher_weight_wins() -> None:
    a = b.proactive("policy-a", weight=50)
    bb = b.proactive("policy-b", weight=100, created=b.T0 + timedelta(days=1))
    best = winner(candidates((a, owned(a, cpu("100m"))), (bb, owned(bb, cpu("200m")))))
    assert best.policy is bb and best.value == "200m"


def test_example_3_equal_custom_priority_weight_breaks_the_tie() -> None:
    prio = {"ProactivePolicy": 70, "ClusterProactivePolicy": 70}
    cpro = b.proactive("cpro", kind="ClusterProactivePolicy", weight=50)
    pro = b.proactive("pro", weight=100)
    found = candidates((cpro, owned(cpro, cpu("100m"))), (pro, owned(pro, cpu("200m"))), prio=prio)
    assert winner(found).kind == "ProactivePolicy"
    # The weight decides, not the kind: swap the weights and the cluster policy wins.
    cpro2 = b.proactive("cpro", kind="ClusterProactivePolicy", weight=100)
    pro2 = b.proactive("pro", weight=50)
    found = candidates(
        (cpro2, owned(cpro2, cpu("100m"))), (pro2, owned(pro2, cpu("200m"))), prio=prio
    )
    assert winner(found).kind == "ClusterProactivePolicy"


def test_favor_namespace_over_cluster_configuration() -> None:
    prio = {"ProactivePolicy": 90, "ClusterProactivePolicy": 70}
    cpro = b.proactive("cpro", kind="ClusterProactivePolicy", weight=1000)
    pro = b.proactive("pro", weight=0)
    found = candidates((cpro, owned(cpro, cpu("100m"))), (pro, owned(pro, cpu("200m"))), prio=prio)
    assert winner(found).kind == "ProactivePolicy"


def test_example_4_same_kind_equal_priority_and_weight_older_wins() -> None:
    a = b.proactive("policy-a", weight=80, created=AT_10)
    bb = b.proactive("policy-b", weight=80, created=AT_11)
    ka, kb = owned(a, cpu("100m")), owned(bb, cpu("200m"))
    assert kb[0] < ka[0]  # policy-b has the smaller key: the age must decide, not the key
    assert winner(candidates((a, ka), (bb, kb))).policy is a
    # Swap the creation times: now policy-b is older and wins.
    a2 = b.proactive("policy-a", weight=80, created=AT_11)
    b2 = b.proactive("policy-b", weight=80, created=AT_10)
    assert winner(candidates((a2, owned(a2, cpu())), (b2, owned(b2, cpu())))).policy is b2


def test_example_4_through_the_view_with_multi_policy_on() -> None:
    v = b.view(
        *b.base_objects(),
        b.global_config(multiPolicyContainerRightsizingEnabled=True),
        b.proactive("policy-a", weight=80, created=AT_10),
        b.proactive("policy-b", weight=80, created=AT_11),
        b.configmap(b.row(requests={"cpu": "300m", "memory": "400Mi"})),
    )
    d = b.decide(v, b.pod(), "admission")
    assert {s.policy_name for s in d.selected} == {"policy-a"}
    # Both policies published their own key.
    assert len([k for k in d.plan.sync.annotations if k.startswith("proactive.")]) == 2


def test_different_kinds_tie_smaller_annotation_key_wins_not_age() -> None:
    prio = {"StaticPolicy": 90, "ProactivePolicy": 90}
    stat = b.static("s", weight=5, created=AT_10)  # older
    pro = b.proactive("p", weight=5, created=AT_11)
    best = winner(
        candidates((stat, owned(stat, cpu("100m"))), (pro, owned(pro, cpu("200m"))), prio=prio)
    )
    assert best.kind == "ProactivePolicy"  # "proactive.…" < "static.…"
    assert best.key.startswith("proactive.rightsizing.kubex.ai/h")


def test_legacy_payload_without_timestamp_ranks_older() -> None:
    a = b.proactive("policy-a", weight=80, created=AT_10)  # larger key
    bb = b.proactive("policy-b", weight=80, created=AT_10 - timedelta(days=30))
    legacy = owned(a, cpu("100m"), stamp=False)
    stamped = owned(bb, cpu("200m"))
    assert stamped[0] < legacy[0]
    best = winner(candidates((a, legacy), (bb, stamped)))
    assert best.policy is a and best.created_at == float("-inf")


def test_fixed_key_payload_carries_no_timestamp_and_ranks_older() -> None:
    legacy_key = fixed_key("StaticPolicy", "requests")
    found, _ = extract_candidates({legacy_key: encode_fixed(cpu("100m"))}, {}, {"StaticPolicy": 90})
    assert found[0].created_at == float("-inf") and found[0].kind == "StaticPolicy"
    new = b.static("s-a", weight=0)
    found += candidates((new, owned(new, cpu("200m"))), prio={"StaticPolicy": 90})
    assert winner(found).key == legacy_key


def test_exact_container_beats_wildcard_after_weight() -> None:
    star = b.static("s-a", weight=10, created=AT_10)
    exact = b.static("s-b", weight=10, created=AT_11)
    found = candidates(
        (star, owned(star, {"*": {"cpu": "100m"}})), (exact, owned(exact, cpu("200m")))
    )
    assert winner(found).policy is exact and winner(found).exact
    # A higher weight on "*" still wins: weight ranks before the container target.
    heavy_star = b.static("s-a", weight=11, created=AT_10)
    found = candidates(
        (heavy_star, owned(heavy_star, {"*": {"cpu": "100m"}})), (exact, owned(exact, cpu("200m")))
    )
    assert winner(found).policy is heavy_star


def test_wildcard_expands_to_every_container() -> None:
    star = b.static("s-a")
    found = candidates((star, owned(star, {"*": {"cpu": "100m"}})))
    result = select(found, ["app", "sidecar"])
    assert set(result) == {Target("app", "requests", "cpu"), Target("sidecar", "requests", "cpu")}


def test_older_only_within_kind_elimination_is_order_independent() -> None:
    prio = {"StaticPolicy": 90, "ProactivePolicy": 90}
    old_static = b.static("s-a", created=AT_10)  # key h789… (larger)
    new_static = b.static("s-b", created=AT_11)  # key h735… (smaller), beaten by s-a on age
    pro = b.proactive("p", created=AT_10 - timedelta(days=1))
    found = candidates(
        (old_static, owned(old_static, cpu("1m"))),
        (new_static, owned(new_static, cpu("2m"))),
        (pro, owned(pro, cpu("3m"))),
        prio=prio,
    )
    winners = set()
    rng = random.Random(7)
    for _ in range(20):
        rng.shuffle(found)
        winners.add(best_candidate(found).value)
    # The newer static policy is eliminated by the older one of its kind; among the rest,
    # "proactive.…" is the smaller key.
    assert winners == {"3m"}


# ------------------------------------------------------------------ composition


def _selected(d: Any) -> dict[str, str]:
    return {f"{s.container}.{s.field}.{s.resource}": s.policy_name for s in d.selected}


def test_multi_policy_on_composes_cpu_and_memory_from_different_policies() -> None:
    v = b.view(
        *b.base_objects(),
        b.global_config(multiPolicyContainerRightsizingEnabled=True),
        b.static("cpu-pol", {"app": {"requests": {"cpu": "300m"}}}, weight=50),
        b.static("mem-pol", {"app": {"requests": {"cpu": "200m", "memory": "300Mi"}}}, weight=10),
    )
    d = b.decide(v, b.pod(), "admission")
    assert _selected(d) == {"app.requests.cpu": "cpu-pol", "app.requests.memory": "mem-pol"}
    assert d.outcome == "apply"
    assert b.final(d)["requests"] == {"cpu": "300m", "memory": "300Mi"}


def test_multi_policy_off_one_policy_per_kind_through_fixed_key() -> None:
    objs = [
        *b.base_objects(),
        b.static("cpu-pol", {"app": {"requests": {"cpu": "300m"}}}, weight=50),
        b.static("mem-pol", {"app": {"requests": {"cpu": "200m", "memory": "300Mi"}}}, weight=10),
    ]
    d = b.decide(b.view(*objs), b.pod(), "admission")
    # Only the heavier policy contributes; mem-pol's memory does not reach the pod.
    assert _selected(d) == {"app.requests.cpu": "cpu-pol"}
    assert d.plan.sync.annotations == {
        "static.rightsizing.kubex.ai/desired-resource-requests": '{"app":{"cpu":"300m"}}'
    }


def test_multi_policy_off_equal_weight_older_then_smaller_name() -> None:
    older = b.static("zz-old", {"app": {"requests": {"cpu": "300m"}}}, created=AT_10)
    newer = b.static("aa-new", {"app": {"requests": {"cpu": "200m"}}}, created=AT_11)
    d = b.decide(b.view(*b.base_objects(), newer, older), b.pod(), "admission")
    assert _selected(d) == {"app.requests.cpu": "zz-old"}
    same_a = b.static("aa", {"app": {"requests": {"cpu": "300m"}}}, created=AT_10)
    same_b = b.static("bb", {"app": {"requests": {"cpu": "200m"}}}, created=AT_10)
    d = b.decide(b.view(*b.base_objects(), same_b, same_a), b.pod(), "admission")
    assert _selected(d) == {"app.requests.cpu": "aa"}


def test_multi_policy_off_cluster_namespace_order() -> None:
    # Cluster policies have no namespace; two namespaced kinds differ by name only. Use
    # a ClusterStaticPolicy pair: equal weight and age, the smaller name contributes.
    objs = [
        *b.base_objects(),
        b.strategy("default", cluster=True),
        b.static("beta", {"app": {"requests": {"cpu": "300m"}}}, kind="ClusterStaticPolicy"),
        b.static("alpha", {"app": {"requests": {"cpu": "200m"}}}, kind="ClusterStaticPolicy"),
    ]
    d = b.decide(b.view(*objs), b.pod(), "admission")
    assert _selected(d) == {"app.requests.cpu": "alpha"}


def test_multi_policy_off_kinds_still_selected_per_target() -> None:
    objs = [
        *b.base_objects(),
        b.strategy("default", cluster=True),
        b.static("ns-pol", {"app": {"requests": {"cpu": "300m"}}}),
        b.static(
            "cl-pol",
            {"app": {"requests": {"cpu": "100m", "memory": "300Mi"}}},
            kind="ClusterStaticPolicy",
            weight=0,
        ),
    ]
    d = b.decide(b.view(*objs), b.pod(), "admission")
    # Equal priority (90) and weight, different kinds: the smaller key wins cpu
    # ("cwstatic…" < "static…"); memory only comes from the cluster policy anyway.
    assert _selected(d) == {"app.requests.cpu": "cl-pol", "app.requests.memory": "cl-pol"}


def test_selection_ignores_load_order() -> None:
    objs = [
        b.static("policy-a", {"app": {"requests": {"cpu": "300m"}}}, weight=80, created=AT_10),
        b.static(
            "policy-b",
            {"app": {"requests": {"cpu": "200m", "memory": "300Mi"}}},
            weight=80,
            created=AT_11,
        ),
        b.global_config(multiPolicyContainerRightsizingEnabled=True),
    ]
    results = set()
    for perm in (objs, objs[::-1], [objs[1], objs[2], objs[0]]):
        d = b.decide(b.view(*b.base_objects(), *perm), b.pod(), "admission")
        results.add(tuple(sorted(_selected(d).items())))
    assert results == {(("app.requests.cpu", "policy-a"), ("app.requests.memory", "policy-b"))}
