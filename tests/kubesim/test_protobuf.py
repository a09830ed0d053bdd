"""Protobuf request bodies over real HTTP: what kubesim decodes and what it refuses."""

from __future__ import annotations

import aiohttp

from kubesim.protowire import CONTENT_TYPE, MAGIC


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, value: int | bytes | str) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    raw = value.encode() if isinstance(value, str) else value
    return _varint(number << 3 | 2) + _varint(len(raw)) + raw


def _envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    type_meta = _field(1, api_version) + _field(2, kind)
    return MAGIC + _field(1, type_meta) + _field(2, raw)


async def _post(sim, path: str, body: bytes) -> tuple[int, dict]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(sim.url + path, data=body, headers={"Content-Type": CONTENT_TYPE}) as resp,
    ):
        return resp.status, await resp.json()


async def test_negative_and_zero_values_survive(sim) -> None:
    meta = _field(1, "low") + _field(8, b"")  # an empty creationTimestamp, as Go sends
    body = _envelope(
        "scheduling.k8s.io/v1",
        "PriorityClass",
        _field(1, meta) + _field(2, -5) + _field(3, 0) + _field(4, ""),
    )
    status, answer = await _post(sim, "/apis/scheduling.k8s.io/v1/priorityclasses", body)
    assert status == 201, answer
    stored = sim.store.get(("scheduling.k8s.io", "priorityclasses"), "", "low")
    assert stored["value"] == -5
    # Zero values of omitempty fields are absent, as in the JSON form.
    assert "globalDefault" not in stored and "description" not in stored


async def test_unknown_field_is_refused_with_415(sim) -> None:
    meta = _field(1, "cm") + _field(99, "surprise")
    body = _envelope("v1", "ConfigMap", _field(1, meta))
    status, answer = await _post(sim, "/api/v1/namespaces/default/configmaps", body)
    assert status == 415 and answer["reason"] == "UnsupportedMediaType"
    assert "field 99 of ObjectMeta is not known to kubesim" in answer["message"]
    assert "kubectl create -f" in answer["message"]
    assert sim.store.get(("", "configmaps"), "default", "cm") is None


async def test_unknown_kind_and_broken_bodies_are_refused(sim) -> None:
    pod = _envelope("v1", "Pod", _field(1, _field(1, "p")))
    status, answer = await _post(sim, "/api/v1/namespaces/default/pods", pod)
    assert status == 415 and "no protobuf field table for Pod (v1)" in answer["message"]
    truncated = _envelope("v1", "ConfigMap", _field(1, _field(1, "cm")))[:-1]
    status, answer = await _post(sim, "/api/v1/namespaces/default/configmaps", truncated)
    assert status == 415 and "truncated" in answer["message"]
    status, answer = await _post(sim, "/api/v1/namespaces/default/configmaps", b"{}")
    assert status == 415 and "Kubernetes protobuf prefix" in answer["message"]
