"""Rollback (SPEC §8, seed rollback-policies.txt): backoff, policy choice, restore
target, state codec, restore keys in the policy sync."""

from __future__ import annotations

from datetime import timedelta

import pytest

from app.model.annotations import ROLLBACK_STATE, decode_payload, fixed_key
from app.model.workloads import Workload
from app.policy.rollback import (
    MODES,
    RollbackState,
    RollbackStateError,
    backoff_wait,
    choose_rollback_policy,
    decode_state,
    encode_state,
    restore_target,
    rollback_state,
)
from app.policy.sync import sync_workload
from tests.app import builders as b

MANIFEST = {
    "app": {"requests": {"cpu": "400m", "memory": "512Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
}
GOOD = {"app": {"requests": {"cpu": "300m", "memory": "384Mi"}, "limits": {"memory": "768Mi"}}}


@pytest.mark.parametrize(("turn", "minutes"), [(1, 2), (2, 4), (3, 6)])
def test_backoff_seed_example(turn: int, minutes: int) -> None:
    policy = b.rollback_policy(time_period="1m", multiply=2)
    assert backoff_wait(policy, turn) == timedelta(minutes=minutes)


def test_backoff_cluster_example() -> None:
    policy = b.rollback_policy(kind="ClusterRollbackPolicy", time_period="2m", multiply=3)
    assert backoff_wait(policy, 2) == timedelta(minutes=12)


def test_choose_rollback_policy_weight_then_older() -> None:
    light = b.rollback_policy("light", weight=10, created=b.T0 - timedelta(days=9))
    heavy = b.rollback_policy("heavy", weight=100)
    assert choose_rollback_policy([light, heavy]) is heavy
    assert choose_rollback_policy([heavy, light]) is heavy
    old = b.rollback_policy("zz-old", weight=5, created=b.T0)
    new = b.rollback_policy("aa-new", weight=5, created=b.T0 + timedelta(hours=1))
    assert choose_rollback_policy([new, old]) is old
    assert choose_rollback_policy([old, new]) is old
    cluster = b.rollback_policy("c", kind="ClusterRollbackPolicy", weight=50)
    assert choose_rollback_policy([heavy, cluster]) is heavy
    assert choose_rollback_policy([]) is None


def test_restore_target_manifest_vs_last_successful() -> None:
    state = RollbackState(mode="rollingBack", last_successful_state=GOOD)
    assert restore_target(b.rollback_policy(target="manifest"), state, MANIFEST) == MANIFEST
    assert restore_target(b.rollback_policy(target="lastSuccessful"), state, MANIFEST) == GOOD
    empty = RollbackState(mode="rollingBack")
    assert restore_target(b.rollback_policy(target="lastSuccessful"), empty, MANIFEST) is None


def test_state_codec_round_trip() -> None:
    state = RollbackState(
        mode="backingOff",
        turn=2,
        started_at=b.NOW - timedelta(minutes=10),
        expiry_at=b.NOW - timedelta(minutes=5),
        rollback_started_at=b.NOW - timedelta(minutes=5),
        active_recommendation_fingerprint="abc123",
        failure_reason="oomKilled",
        failure_message="app OOMKilled",
        last_successful_state=GOOD,
    )
    text = encode_state(state)
    assert decode_state(text) == state
    assert '"lastSuccessfulState":{"containers":' in text
    assert '"mode":"backingOff"' in text and '"activeRecommendationFingerprint":"abc123"' in text
    assert decode_state(encode_state(RollbackState())) == RollbackState()


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_round_trips(mode: str) -> None:
    assert decode_state(encode_state(RollbackState(mode=mode))).mode == mode


@pytest.mark.parametrize(
    "text", ["not json", "[]", '{"mode": "exploding"}', '{"mode": "idle", "turn": "x"}']
)
def test_bad_state_is_an_error(text: str) -> None:
    with pytest.raises(RollbackStateError):
        decode_state(text)


def test_unreadable_state_in_view_is_a_warning_not_a_crash() -> None:
    v = b.view(b.deployment(annotations={ROLLBACK_STATE: "{bad"}))
    wl = next(iter(v.workloads()))
    assert rollback_state(v, wl) is None
    assert any("rollback-state" in w for w in v.warnings)


# ------------------------------------------------------------------ restore keys in the sync


def workload(state: RollbackState | None) -> Workload:
    return Workload(
        kind="Deployment", namespace=b.NS, name="web", labels={"app": "web"}, containers=MANIFEST
    )


def restore_keys(policies: list, state: RollbackState | None) -> dict[str, str]:
    result = sync_workload(workload(state), policies, {}, state, multi_policy=False)
    return {k: v for k, v in result.annotations.items() if k.startswith("rollbackpolicy.")}


def test_restore_keys_carry_manifest_values() -> None:
    keys = restore_keys([b.rollback_policy(target="manifest")], RollbackState(mode="rollingBack"))
    req = fixed_key("RollbackPolicy", "requests")
    assert decode_payload(req, keys[req]).containers == {"app": {"cpu": "400m", "memory": "512Mi"}}
    lim = fixed_key("RollbackPolicy", "limits")
    assert decode_payload(lim, keys[lim]).containers == {"app": {"cpu": "1", "memory": "1Gi"}}


def test_restore_keys_carry_last_successful_values() -> None:
    state = RollbackState(mode="backingOff", last_successful_state=GOOD)
    keys = restore_keys([b.rollback_policy(target="lastSuccessful")], state)
    req = fixed_key("RollbackPolicy", "requests")
    assert decode_payload(req, keys[req]).containers == {"app": {"cpu": "300m", "memory": "384Mi"}}


def test_last_successful_without_state_publishes_nothing() -> None:
    # rollbackRecommendationUnavailable: nothing to restore.
    assert (
        restore_keys(
            [b.rollback_policy(target="lastSuccessful")], RollbackState(mode="rollingBack")
        )
        == {}
    )


def test_restore_uses_the_chosen_rollback_policy() -> None:
    state = RollbackState(mode="rollingBack", last_successful_state=GOOD)
    policies = [
        b.rollback_policy("m", target="manifest", weight=10),
        b.rollback_policy("l", target="lastSuccessful", weight=20),
    ]
    keys = restore_keys(policies, state)
    req = fixed_key("RollbackPolicy", "requests")
    assert decode_payload(req, keys[req]).containers["app"]["cpu"] == "300m"


@pytest.mark.parametrize("mode", ["idle", "monitoring", "monitoringSucceeded"])
def test_no_restore_keys_outside_a_rollback(mode: str) -> None:
    assert restore_keys([b.rollback_policy()], RollbackState(mode=mode)) == {}


def test_failed_permanent_keeps_the_restore_keys() -> None:
    # The failed recommendation must not win selection again: it is never retried.
    keys = restore_keys([b.rollback_policy()], RollbackState(mode="failedPermanent"))
    req = fixed_key("RollbackPolicy", "requests")
    assert decode_payload(req, keys[req]).containers == {"app": {"cpu": "400m", "memory": "512Mi"}}


def test_no_rollback_without_a_matching_policy() -> None:
    other_ns = b.rollback_policy(namespace="elsewhere")
    unmatched = b.rollback_policy(scope={"labelSelector": {"matchLabels": {"app": "api"}}})
    assert restore_keys([other_ns, unmatched], RollbackState(mode="rollingBack")) == {}
