"""The sim.kerf.dev/* fault annotations (SPEC §10): faults injected through the API alone,
acted out by kubesim's kubelet on app containers and sidecars."""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio import client

from kubesim import fault_annotations as fa
from kubesim.conditions import get_condition
from kubesim.sim import Simulator
from tests.kubesim.test_sidecars import raw_pod, resize_init, sidecar_pod

Obj = dict[str, Any]


async def annotate(core: client.CoreV1Api, sim: Simulator, key: str, value: str | None) -> Obj:
    """Set (or with None remove) an annotation on pod p through the API; the settled pod."""
    await core.patch_namespaced_pod("p", "default", {"metadata": {"annotations": {key: value}}})
    await sim.settle()
    return await raw_pod(core, "p")


def status_of(pod: Obj, name: str) -> Obj:
    entries = [*pod["status"].get("initContainerStatuses", []), *pod["status"]["containerStatuses"]]
    return next(s for s in entries if s["name"] == name)


def condition(pod: Obj, ctype: str) -> str:
    return next(c["status"] for c in pod["status"]["conditions"] if c["type"] == ctype)


async def running_pod(sim: Simulator, core: client.CoreV1Api, body: Obj | None = None) -> Obj:
    await sim.add_node("n1", cpu="2")
    await core.create_namespaced_pod("default", body or sidecar_pod())
    await sim.settle()
    return await raw_pod(core, "p")


async def test_oom_kill_once_per_value(sim: Simulator, core: client.CoreV1Api) -> None:
    await running_pod(sim, core)
    pod = await annotate(core, sim, fa.OOM_KILL, "app")
    app = status_of(pod, "app")
    terminated = app["lastState"]["terminated"]
    assert app["restartCount"] == 1
    assert (terminated["reason"], terminated["exitCode"]) == ("OOMKilled", 137)
    assert terminated["finishedAt"] and "running" in app["state"]
    # The same value is spent: more steps, and time passing, kill nothing more.
    await sim.advance(60)
    assert status_of(await raw_pod(core, "p"), "app")["restartCount"] == 1
    pod = await annotate(core, sim, fa.OOM_KILL, "app/2")
    assert status_of(pod, "app")["restartCount"] == 2
    assert status_of(pod, "app")["lastState"]["terminated"]["reason"] == "OOMKilled"
    kills = [e for e in sim.store.list(("", "events")) if e["reason"] == "OOMKilling"]
    assert [e["involvedObject"]["fieldPath"] for e in kills] == ["spec.containers{app}"] * 2


async def test_oom_kill_a_sidecar(sim: Simulator, core: client.CoreV1Api) -> None:
    await running_pod(sim, core)
    pod = await annotate(core, sim, fa.OOM_KILL, "proxy")
    proxy = status_of(pod, "proxy")
    assert proxy["restartCount"] == 1
    assert proxy["lastState"]["terminated"]["reason"] == "OOMKilled"
    assert status_of(pod, "app")["restartCount"] == 0
    kill = next(e for e in sim.store.list(("", "events")) if e["reason"] == "OOMKilling")
    assert kill["involvedObject"]["fieldPath"] == "spec.initContainers{proxy}"


async def test_crash_loop_until_removed(sim: Simulator, core: client.CoreV1Api) -> None:
    await running_pod(sim, core)
    pod = await annotate(core, sim, fa.CRASH_LOOP, "app")
    app = status_of(pod, "app")
    assert app["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert (
        app["lastState"]["terminated"]["reason"],
        app["lastState"]["terminated"]["exitCode"],
    ) == (
        "Error",
        1,
    )
    assert app["restartCount"] == 1 and not app["ready"] and not app["started"]
    assert condition(pod, "Ready") == condition(pod, "ContainersReady") == "False"
    # It fails again once each back-off (10 s, then 20 s) is over.
    await sim.advance(10)
    assert status_of(await raw_pod(core, "p"), "app")["restartCount"] == 2
    await sim.advance(20)
    app = status_of(await raw_pod(core, "p"), "app")
    assert app["restartCount"] == 3 and "waiting" in app["state"]
    pod = await annotate(core, sim, fa.CRASH_LOOP, None)
    app = status_of(pod, "app")
    assert "running" in app["state"] and app["ready"] and app["restartCount"] == 3
    assert condition(pod, "Ready") == "True"


async def test_crash_loop_a_sidecar(sim: Simulator, core: client.CoreV1Api) -> None:
    await running_pod(sim, core)
    pod = await annotate(core, sim, fa.CRASH_LOOP, "proxy")
    proxy = status_of(pod, "proxy")
    assert proxy["state"]["waiting"]["reason"] == "CrashLoopBackOff" and not proxy["ready"]
    assert condition(pod, "Ready") == "False"
    assert status_of(pod, "app")["ready"]
    pod = await annotate(core, sim, fa.CRASH_LOOP, None)
    assert "running" in status_of(pod, "proxy")["state"] and condition(pod, "Ready") == "True"


async def test_unready_until_removed(sim: Simulator, core: client.CoreV1Api) -> None:
    await running_pod(sim, core)
    pod = await annotate(core, sim, fa.UNREADY, "proxy")
    assert not status_of(pod, "proxy")["ready"] and status_of(pod, "app")["ready"]
    ready = next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "ContainersNotReady")
    assert ready["message"] == "containers with unready status: [proxy]"
    assert condition(pod, "ContainersReady") == "False"
    assert "running" in status_of(pod, "proxy")["state"]
    pod = await annotate(core, sim, fa.UNREADY, "app,proxy")
    assert not status_of(pod, "app")["ready"]
    pod = await annotate(core, sim, fa.UNREADY, None)
    assert status_of(pod, "proxy")["ready"] and condition(pod, "Ready") == "True"


async def test_resize_annotation_forces_the_verdict(sim: Simulator, core: client.CoreV1Api) -> None:
    await running_pod(sim, core)
    await annotate(core, sim, fa.RESIZE, "Deferred")
    await core.patch_namespaced_pod_resize(
        "p", "default", resize_init("proxy", {"requests": {"cpu": "200m"}})
    )
    await sim.settle()
    pending = get_condition(
        sim.store.get(("", "pods"), "default", "p")["status"], "PodResizePending"
    )
    assert (pending["reason"], pending["message"]) == ("Deferred", fa.FORCED_RESIZE["Deferred"])
    pod = await annotate(core, sim, fa.RESIZE, "Infeasible")
    pending = get_condition(pod["status"], "PodResizePending")
    assert (pending["reason"], pending["message"]) == ("Infeasible", fa.FORCED_RESIZE["Infeasible"])
    infeasible = next(
        e for e in sim.store.list(("", "events")) if e["reason"] == "ResizeInfeasible"
    )
    assert infeasible["type"] == "Warning"
    pod = await annotate(core, sim, fa.RESIZE, None)
    assert get_condition(pod["status"], "PodResizePending") is None
    assert status_of(pod, "proxy")["resources"]["requests"]["cpu"] == "200m"


async def test_a_pod_created_with_fault_annotations(sim: Simulator, core: client.CoreV1Api) -> None:
    body = sidecar_pod()
    body["metadata"]["annotations"] = {fa.OOM_KILL: "app", fa.UNREADY: "app"}
    pod = await running_pod(sim, core, body)
    assert status_of(pod, "app")["restartCount"] == 1
    assert condition(pod, "Ready") == "False"
    # The annotations are part of the object: the kubelet adds nothing of its own.
    assert pod["metadata"]["annotations"] == body["metadata"]["annotations"]
