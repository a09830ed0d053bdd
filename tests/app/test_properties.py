"""Invariants of the decision library (hypothesis): limits, minimums, step size,
throttling, order independence. Quantity round-trips are tested in test_quantities."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.model.crd import DEFAULT_PRECEDENCE
from app.model.quantities import MIB, parse_resource
from app.policy.guardrails import decrease_floor
from app.policy.selection import Candidate, best_candidate, select
from tests.app import builders as b

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
KINDS = [k for k, _ in DEFAULT_PRECEDENCE]


def cpu(m: int) -> str:
    return f"{m}m"


def mem(mi: int) -> str:
    return f"{mi}Mi"


@st.composite
def pod_resources(draw: st.DrawFn) -> dict[str, dict[str, str]]:
    """Valid container resources: every limit at or above its request."""
    out: dict[str, dict[str, str]] = {"requests": {}, "limits": {}}
    for resource, fmt, top in (("cpu", cpu, 8000), ("memory", mem, 16384)):
        request = draw(st.none() | st.integers(1, top))
        if request is not None:
            out["requests"][resource] = fmt(request)
        if draw(st.booleans()):
            out["limits"][resource] = fmt(draw(st.integers(request or 1, 2 * top)))
    return out


@st.composite
def policy_values(draw: st.DrawFn) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {"requests": {}, "limits": {}}
    for fld in ("requests", "limits"):
        if draw(st.booleans()):
            out[fld]["cpu"] = cpu(draw(st.integers(1, 16000)))
        if draw(st.booleans()):
            out[fld]["memory"] = mem(draw(st.integers(1, 32768)))
    if not out["requests"] and not out["limits"]:
        out["requests"]["cpu"] = cpu(draw(st.integers(1, 16000)))
    return out


GUARDRAILS = st.fixed_dictionaries(
    {
        "maxChangePercent": st.integers(1, 100),
        "minCPU": st.sampled_from(["1m", "10m", "50m", "250m"]),
        "minMemory": st.sampled_from(["1Mi", "32Mi", "64Mi", "200Mi"]),
    }
)


def parsed(res: dict[str, dict[str, str]]) -> dict[str, dict[str, int]]:
    return {f: {r: parse_resource(r, q) for r, q in v.items()} for f, v in res.items()}


def decision(current: dict, values: dict, guardrails: dict, path: str) -> Any:
    containers = {"app": current}
    objs = [
        *b.base_objects(containers=containers),
        b.static(containers={"app": values}, guardrails=guardrails),
    ]
    return b.decide(b.view(*objs), b.pod(containers=containers), path)


@SETTINGS
@given(pod_resources(), policy_values(), GUARDRAILS, st.sampled_from(["admission", "running"]))
def test_applied_decisions_keep_limits_minimums_and_step(
    current: dict, values: dict, guardrails: dict, path: str
) -> None:
    d = decision(current, values, guardrails, path)
    if d.outcome != "apply":
        assert d.values == {}
        return
    before = parsed(current)
    after = parsed({f: d.containers["app"].get(f, {}) for f in ("requests", "limits")})
    # Never a request above its limit.
    for resource, request in after["requests"].items():
        limit = after["limits"].get(resource)
        assert limit is None or request <= limit
    minimum = {
        "cpu": parse_resource("cpu", guardrails["minCPU"]),
        "memory": parse_resource("memory", guardrails["minMemory"]),
    }
    for fld in ("requests", "limits"):
        for resource, new in after[fld].items():
            old = before[fld].get(resource)
            if new == old:
                continue
            # Never a request below the minimums (for a value kerf set).
            if fld == "requests":
                assert new >= minimum[resource]
            # Never a decrease beyond maxChangePercent.
            if old is not None and new < old:
                assert new >= decrease_floor(old, guardrails["maxChangePercent"], resource)
                assert new * 100 >= old * (100 - guardrails["maxChangePercent"])


@SETTINGS
@given(
    st.integers(20, 8000),
    st.integers(1, 16000),
    st.floats(0.25, 1.0),
    st.sampled_from(["admission", "running"]),
)
def test_throttled_container_never_gets_a_lower_cpu_request(
    current: int, wanted: int, ratio: float, path: str
) -> None:
    res = {"requests": {"cpu": cpu(current), "memory": "512Mi"}, "limits": {}}
    objs = [
        *b.base_objects(containers={"app": res}),
        b.proactive(),
        b.configmap(b.row(requests={"cpu": cpu(wanted), "memory": "256Mi"}, throttling=ratio)),
    ]
    d = b.decide(b.view(*objs), b.pod(containers={"app": res}), path)
    assert parse_resource("cpu", d.containers["app"]["requests"]["cpu"]) >= current


# ------------------------------------------------------------------ order independence


@st.composite
def candidate_sets(draw: st.DrawFn) -> list[Candidate]:
    n = draw(st.integers(1, 8))
    keys = draw(
        st.lists(st.text("abcdefgh", min_size=1, max_size=4), min_size=n, max_size=n, unique=True)
    )
    out = []
    for key in keys:
        kind = draw(st.sampled_from(KINDS[:3] + KINDS[5:7]))
        out.append(
            Candidate(
                container=draw(st.sampled_from(["app", "*"])),
                field="requests",
                resource="cpu",
                value=key,
                amount=1,
                kind=kind,
                priority=draw(st.sampled_from([70, 90, 130])),
                weight=draw(st.integers(0, 2)),
                created_at=draw(st.sampled_from([float("-inf"), 1.0, 2.0, 3.0])),
                key=key,
                policy=None,
            )
        )
    return out


@SETTINGS
@given(candidate_sets(), st.randoms(use_true_random=False))
def test_selection_is_independent_of_candidate_order(found: list[Candidate], rnd: Any) -> None:
    expected = best_candidate(found)
    shuffled = list(found)
    rnd.shuffle(shuffled)
    assert best_candidate(shuffled) == expected
    assert select(shuffled, ["app"]) == select(found, ["app"])
    # The winner is never beaten by a candidate ranked higher on the first three criteria,
    # nor by an older candidate of its own kind in its tier.
    top = max((c.priority, c.weight, c.exact) for c in found)
    assert (expected.priority, expected.weight, expected.exact) == top
    assert not any(
        c.kind == expected.kind
        and c.created_at < expected.created_at
        and (c.priority, c.weight, c.exact) == top
        for c in found
    )


@SETTINGS
@given(
    st.lists(
        st.tuples(st.integers(0, 2), st.integers(0, 2), st.booleans()), min_size=2, max_size=5
    ),
    st.booleans(),
    st.randoms(use_true_random=False),
)
def test_selection_is_independent_of_policy_load_order(specs: list, multi: bool, rnd: Any) -> None:
    policies = []
    for i, (weight, age, with_memory) in enumerate(specs):
        values = {"requests": {"cpu": cpu(100 + i)}}
        if with_memory:
            values["requests"]["memory"] = mem(100 + i)
        policies.append(
            b.static(f"p{i}", {"app": values}, weight=weight, created=b.T0 + timedelta(hours=age))
        )
    objs = [*policies, b.global_config(multiPolicyContainerRightsizingEnabled=multi)]

    def chosen(order: list) -> list[tuple[str, str, str]]:
        d = b.decide(b.view(*b.base_objects(), *order), b.pod(), "admission")
        return [(s.resource, s.policy_name, s.value) for s in d.selected]

    expected = chosen(objs)
    shuffled = list(objs)
    rnd.shuffle(shuffled)
    assert chosen(shuffled) == expected


def test_memory_step_is_whole_mib() -> None:
    # Sanity anchor for the property above: the floor is a whole MiB.
    assert decrease_floor(1000 * MIB + 1, 50, "memory") % MIB == 0


# ------------------------------------------------------------------ Guaranteed QoS


@st.composite
def field_switches(draw: st.DrawFn, fmt: Any, top: int) -> dict[str, Any]:
    """Random enablement of one resource field, floor ≤ ceiling when both are set."""
    out: dict[str, Any] = {"upsize": draw(st.booleans()), "downsize": draw(st.booleans())}
    bounds = sorted(draw(st.lists(st.integers(1, top), min_size=2, max_size=2)))
    if draw(st.booleans()):
        out["floor"] = fmt(bounds[0])
    if draw(st.booleans()):
        out["ceiling"] = fmt(bounds[1])
    return out


@st.composite
def enablements(draw: st.DrawFn) -> dict[str, Any]:
    return {
        resource: {fld: draw(field_switches(fmt, top)) for fld in ("requests", "limits")}
        for resource, fmt, top in (("cpu", cpu, 8000), ("memory", mem, 16384))
    }


@SETTINGS
@given(
    st.integers(1, 8000),
    st.integers(1, 16384),
    policy_values(),
    GUARDRAILS,
    enablements(),
    st.integers(0, 20),
    st.none() | st.integers(100, 16000),
    st.none() | policy_values(),
    st.sampled_from(["admission", "running"]),
)
def test_a_guaranteed_container_stays_guaranteed(
    cpu_m: int,
    mem_mi: int,
    values: dict,
    guardrails: dict,
    enablement: dict,
    tolerance: int,
    node_cpu: int | None,
    last_applied: dict | None,
    path: str,
) -> None:
    current = {
        "requests": {"cpu": cpu(cpu_m), "memory": mem(mem_mi)},
        "limits": {"cpu": cpu(cpu_m), "memory": mem(mem_mi)},
    }
    containers = {"app": current}
    objs = [
        b.namespace(),
        b.strategy(enablement=enablement),
        b.deployment(containers=containers),
        b.static(containers={"app": values}, guardrails=guardrails),
        b.global_config(tolerancePercent=tolerance),
        b.node(cpu=cpu(node_cpu or 1)),
    ]
    if last_applied is not None:
        # Any earlier change, also one recorded without the pair kept equal.
        objs.append(
            b.recommendation(
                applied_at=b.NOW - timedelta(days=3), last_applied={"app": last_applied}
            )
        )
    pod = b.pod(containers=containers, node="node-a" if node_cpu else None)
    d = b.decide(b.view(*objs), pod, path)
    after = parsed({f: d.containers["app"][f] for f in ("requests", "limits")})
    assert after["requests"] == after["limits"]
    if last_applied is not None and path == "admission":
        return  # the step and its minimums start from the last applied values then
    minimum = {
        "cpu": parse_resource("cpu", guardrails["minCPU"]),
        "memory": parse_resource("memory", guardrails["minMemory"]),
    }
    before = parsed(current)["requests"]
    for resource, new in after["requests"].items():
        old = before[resource]
        if new == old:
            continue
        assert d.outcome == "apply"
        assert new >= minimum[resource]
        if new < old:
            assert new >= decrease_floor(old, guardrails["maxChangePercent"], resource)
