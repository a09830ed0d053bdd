"""Pod semantics of the API server: defaulting, validation, QoS, update and resize rules."""

from __future__ import annotations

import re
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from kubesim import quantity
from kubesim.errors import Cause

Obj = dict[str, Any]

RESIZABLE = ("cpu", "memory")
_CONTAINER_LISTS = ("initContainers", "containers")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def default_pod(pod: Obj) -> None:
    """Apply the defaults the real server sets on create (and admission plugins that
    always run: ServiceAccount, DefaultTolerationSeconds)."""
    spec = pod.setdefault("spec", {})
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("priority", 0)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    spec.setdefault("serviceAccountName", "default")
    spec.setdefault("serviceAccount", spec["serviceAccountName"])
    tolerations = spec.setdefault("tolerations", [])
    for taint in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        if not any(t.get("key") == taint for t in tolerations):
            tolerations.append(
                {
                    "key": taint,
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
            )
    for list_name in _CONTAINER_LISTS:
        for container in spec.get(list_name) or []:
            _default_container(container)


def _default_container(container: Obj) -> None:
    image = str(container.get("image", ""))
    tag = image.rsplit("/", 1)[-1]
    if "imagePullPolicy" not in container:
        latest = "@" not in tag and (":" not in tag or tag.endswith(":latest"))
        container["imagePullPolicy"] = "Always" if latest else "IfNotPresent"
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    resources = container.setdefault("resources", {})
    limits = resources.get("limits") or {}
    if limits:
        # The real defaulting: a limit without a request makes the request equal to it.
        requests = resources.setdefault("requests", {})
        for name, value in limits.items():
            requests.setdefault(name, value)


def qos_class(pod: Obj) -> str:
    """BestEffort, Burstable or Guaranteed, computed from cpu and memory like the kubelet."""
    spec = pod.get("spec") or {}
    containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    any_set = False
    guaranteed = True
    for container in containers:
        res = container.get("resources") or {}
        requests, limits = res.get("requests") or {}, res.get("limits") or {}
        for name in RESIZABLE:
            if name in requests or name in limits:
                any_set = True
            if name not in limits or quantity.parse(
                requests.get(name, limits[name])
            ) != quantity.parse(limits[name]):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def validate_pod(pod: Obj) -> list[Cause]:
    """Field errors for a pod spec, with the real server's field paths and wording.

    App containers are checked first, then init containers, whose names must differ from
    the app containers' (the real `ValidatePodSpec` order: a sidecar and an app container
    both named "proxy" is a duplicate at `spec.initContainers[i].name`)."""
    spec = pod.get("spec") or {}
    causes: list[Cause] = []
    if not spec.get("containers"):
        causes.append(Cause("FieldValueRequired", "Required value", "spec.containers"))
    seen: set[str] = set()
    for list_name in ("containers", "initContainers"):
        for i, container in enumerate(spec.get(list_name) or []):
            path = f"spec.{list_name}[{i}]"
            name = container.get("name")
            if not name:
                causes.append(Cause("FieldValueRequired", "Required value", f"{path}.name"))
            elif not _DNS_LABEL.match(name) or len(name) > 63:
                causes.append(
                    Cause(
                        "FieldValueInvalid",
                        f"Invalid value: \"{name}\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
                        f"{path}.name",
                    )
                )
            elif name in seen:
                causes.append(
                    Cause("FieldValueDuplicate", f'Duplicate value: "{name}"', f"{path}.name")
                )
            else:
                seen.add(name)
            if not container.get("image"):
                causes.append(Cause("FieldValueRequired", "Required value", f"{path}.image"))
            causes.extend(validate_resources(container.get("resources") or {}, f"{path}.resources"))
    return causes


def validate_resources(resources: Obj, path: str) -> list[Cause]:
    """Quantity syntax, non-negativity and requests <= limits for one container."""
    causes: list[Cause] = []
    parsed: dict[str, dict[str, Fraction]] = {}
    for section in ("limits", "requests"):
        parsed[section] = {}
        for name, raw in (resources.get(section) or {}).items():
            field = f"{path}.{section}[{name}]"
            try:
                value = quantity.parse(raw)
            except quantity.QuantityError as exc:
                causes.append(Cause("FieldValueInvalid", f'Invalid value: "{raw}": {exc}', field))
                continue
            if value < 0:
                causes.append(
                    Cause(
                        "FieldValueInvalid",
                        f'Invalid value: "{raw}": must be greater than or equal to 0',
                        field,
                    )
                )
            parsed[section][name] = value
    requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
    for name, value in parsed["requests"].items():
        limit = parsed["limits"].get(name)
        if limit is not None and value > limit:
            causes.append(
                Cause(
                    "FieldValueInvalid",
                    f'Invalid value: "{requests[name]}": must be less than or equal to {name} limit of {limits[name]}',
                    f"{path}.requests",
                )
            )
    return causes


_UPDATE_FORBIDDEN = (
    "pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
    "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
    "(allow it to be set to 1 if it was previously negative)"
)


def _mutable_view(spec: Obj) -> Obj:
    view = {
        k: v
        for k, v in spec.items()
        if k
        not in (
            "activeDeadlineSeconds",
            "tolerations",
            "terminationGracePeriodSeconds",
            "schedulingGates",
        )
    }
    for list_name in _CONTAINER_LISTS:
        if list_name in view:
            view[list_name] = [
                {k: v for k, v in c.items() if k != "image"} for c in view[list_name]
            ]
    return view


def validate_pod_update(old: Obj, new: Obj) -> list[Cause]:
    """The pod spec is immutable on the main resource except the few fields above.

    Resources in particular can only change through the `resize` subresource.
    """
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    causes = validate_pod(new)
    if _mutable_view(old_spec) != _mutable_view(new_spec):
        causes.append(Cause("FieldValueForbidden", f"Forbidden: {_UPDATE_FORBIDDEN}", "spec"))
    old_tol = old_spec.get("tolerations") or []
    if any(t not in (new_spec.get("tolerations") or []) for t in old_tol):
        causes.append(
            Cause("FieldValueForbidden", f"Forbidden: {_UPDATE_FORBIDDEN}", "spec.tolerations")
        )
    return causes


def is_sidecar(container: Obj) -> bool:
    """An init container that keeps running beside the app containers (`restartPolicy:
    Always`): since Kubernetes 1.33 it is resized in place like an app container, and its
    requests count with theirs."""
    return container.get("restartPolicy") == "Always"


def _resize_merge(old: Obj, written: Obj) -> Obj:
    """The pod the real resize strategy makes of a write: the stored pod, with `resources`
    and `resizePolicy` taken from the written app containers and sidecars that it has by
    name. A plain init container's resources are not taken (the strategy copies only
    restartable init containers'). A written container the stored pod does not have is
    kept as written, so validation sees it as the real server does."""
    from kubesim.store import clone

    new = clone(old)
    written_spec = written.get("spec") or {}
    for list_name in _CONTAINER_LISTS:
        stored = {c.get("name"): c for c in old["spec"].get(list_name) or []}
        if list_name not in written_spec and not stored:
            continue
        merged: list[Obj] = []
        for target in written_spec.get(list_name) or []:
            current = stored.get(target.get("name"))
            if current is None:
                merged.append(clone(target))
                continue
            current = clone(current)
            if list_name == "containers" or is_sidecar(current):
                for key in ("resources", "resizePolicy"):
                    if key in target:
                        current[key] = clone(target[key])
                    else:
                        current.pop(key, None)
            merged.append(current)
        new["spec"][list_name] = merged
    return new


def _resize_ordering(old: Obj, new: Obj) -> list[Cause]:
    """Containers added, removed, renamed or reordered by a resize (the real server checks
    this before anything that compares containers by position)."""
    causes: list[Cause] = []
    for list_name in _CONTAINER_LISTS:
        before = [c.get("name") for c in old["spec"].get(list_name) or []]
        after = [c.get("name") for c in new["spec"].get(list_name) or []]
        if len(before) != len(after):
            causes.append(
                Cause(
                    "FieldValueForbidden",
                    f"Forbidden: {list_name} may not be added or removed on resize",
                    f"spec.{list_name}",
                )
            )
        elif before != after:
            causes.append(
                Cause(
                    "FieldValueForbidden",
                    f"Forbidden: {list_name} may not be renamed or reordered on resize",
                    f"spec.{list_name}",
                )
            )
    return causes


def resize_target(old: Obj, written: Obj) -> tuple[Obj, list[Cause]]:
    """The pod a resize write produces, and the real `ValidatePodResize` errors.

    Only `resources` and `resizePolicy` of app containers and sidecars (`is_sidecar`) are
    taken from the written object; everything else stays as stored (`_resize_merge`). A
    written container the stored pod lacks (a sidecar named under `spec.containers` by a
    strategic merge patch becomes a new app container without an image) makes the real
    server's 422: the pod's own field errors, then "containers may not be added or removed
    on resize". The same rules apply to sidecars as to app containers: only cpu and memory
    change, none is removed, `resizePolicy` is fixed, and the pod's QoS class (over app
    and init containers) may not change.
    """
    from kubesim.store import clone

    new = _resize_merge(old, written)
    ordering = _resize_ordering(old, new)
    if ordering:
        return old, [*validate_pod(new), *ordering]
    causes: list[Cause] = []
    for list_name in _CONTAINER_LISTS:
        for i, (stored, current) in enumerate(
            zip(old["spec"].get(list_name) or [], new["spec"].get(list_name) or [], strict=True)
        ):
            if list_name == "initContainers" and not is_sidecar(stored):
                continue
            path = f"spec.{list_name}[{i}].resources"
            before, after = stored.get("resources") or {}, current.get("resources") or {}
            for section in ("requests", "limits"):
                b_sec, a_sec = before.get(section) or {}, after.get(section) or {}
                changed = {k for k in set(b_sec) | set(a_sec) if b_sec.get(k) != a_sec.get(k)}
                if changed - set(RESIZABLE):
                    causes.append(
                        Cause(
                            "FieldValueForbidden",
                            "Forbidden: only cpu and memory resources are mutable",
                            "spec",
                        )
                    )
                    return old, causes
                if any(k in b_sec and k not in a_sec for k in RESIZABLE):
                    # The real field is the section, not the resource (seen on 1.35.4).
                    causes.append(
                        Cause(
                            "FieldValueForbidden",
                            f"Forbidden: resource {section} cannot be removed",
                            f"{path}.{section}",
                        )
                    )
            # resizePolicy is fixed at creation; the real server reports a change of it
            # with the same wording as any other non-resource change.
            if stored.get("resizePolicy") != current.get("resizePolicy"):
                causes.append(
                    Cause(
                        "FieldValueForbidden",
                        "Forbidden: only cpu and memory resources are mutable",
                        "spec",
                    )
                )
            causes.extend(validate_resources(after, path))
            current["resources"] = clone(after)
    if causes:
        return old, causes
    old_qos = (old.get("status") or {}).get("qosClass") or qos_class(old)
    if qos_class(new) != old_qos:
        causes.append(
            Cause(
                "FieldValueInvalid",
                f'Invalid value: "{old_qos}": Pod QOS Class may not change as a result of resizing',
                "spec",
            )
        )
    return new, causes


def container_requests(
    container: Obj, allocated: Obj | None = None, source: str = "max"
) -> dict[str, Fraction]:
    """A container's requests as numbers.

    `source` picks what counts: "spec" (the desired requests), "allocated" (what the node
    granted, from status; falls back to spec before the kubelet reports), or "max" of the
    two per resource — what the scheduler reserves while a resize is pending.
    """
    spec = {
        k: quantity.parse(v)
        for k, v in ((container.get("resources") or {}).get("requests") or {}).items()
    }
    if source == "spec" or allocated is None:
        return spec
    granted = {k: quantity.parse(v) for k, v in allocated.items()}
    if source == "allocated":
        return granted
    return {
        k: max(spec.get(k, Fraction(0)), granted.get(k, Fraction(0)))
        for k in set(spec) | set(granted)
    }


def pod_requests(pod: Obj, source: str = "max") -> dict[str, Fraction]:
    """What a pod takes from a node, as the kubelet and scheduler count it: app containers
    and sidecars summed, or a plain init container with the sidecars started before it,
    whichever is larger; plus one `pods` slot (see `container_requests` for `source`; a
    sidecar's allocation is read from `initContainerStatuses`)."""
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    statuses = {
        s.get("name"): s
        for key in ("initContainerStatuses", "containerStatuses")
        for s in status.get(key) or []
    }
    running: dict[str, Fraction] = {}
    peak: dict[str, Fraction] = {}

    def add(total: dict[str, Fraction], container: Obj, use: str) -> None:
        alloc = (statuses.get(container.get("name")) or {}).get("allocatedResources")
        for k, v in container_requests(container, alloc, use).items():
            total[k] = total.get(k, Fraction(0)) + v

    for container in spec.get("initContainers") or []:
        if is_sidecar(container):
            add(running, container, source)
            continue
        # A plain init container runs to completion beside the sidecars before it.
        during = dict(running)
        add(during, container, "spec")
        for k, v in during.items():
            peak[k] = max(peak.get(k, Fraction(0)), v)
    for container in spec.get("containers") or []:
        add(running, container, source)
    total = {
        k: max(running.get(k, Fraction(0)), peak.get(k, Fraction(0)))
        for k in set(running) | set(peak)
    }
    total["pods"] = Fraction(1)
    return total


def aggregate(
    pod: Obj, of: Callable[[Obj, bool], dict[str, quantity.Amount]]
) -> dict[str, quantity.Amount]:
    """A pod's requests or limits as kube's PodRequests and PodLimits add them up: app
    containers and sidecars summed, or a plain init container with the sidecars started
    before it, whichever is larger. `of(container, running)` gives one container's list;
    `running` is false for a plain init container, which only its spec describes."""

    def add(total: dict[str, quantity.Amount], more: dict[str, quantity.Amount]) -> None:
        for name, amount in more.items():
            total[name] = total[name] + amount if name in total else amount

    def widen(total: dict[str, quantity.Amount], more: dict[str, quantity.Amount]) -> None:
        for name, amount in more.items():
            if name not in total or amount.value > total[name].value:
                total[name] = amount

    spec = pod.get("spec") or {}
    total: dict[str, quantity.Amount] = {}
    for container in spec.get("containers") or []:
        add(total, of(container, True))
    sidecars: dict[str, quantity.Amount] = {}
    peak: dict[str, quantity.Amount] = {}
    for container in spec.get("initContainers") or []:
        during: dict[str, quantity.Amount] = {}
        if is_sidecar(container):
            own = of(container, True)
            add(total, own)
            add(sidecars, own)
            during = dict(sidecars)
        else:
            add(during, of(container, False))
            add(during, sidecars)
        widen(peak, during)
    widen(total, peak)
    return total


def is_terminal(pod: Obj) -> bool:
    """Succeeded or Failed pods no longer hold node resources."""
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def is_ready(pod: Obj) -> bool:
    """Whether the pod's Ready condition is True."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False
