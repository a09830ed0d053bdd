"""Defaulting and validation for built-in kinds other than pods (pods live in pods.py)."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from kubesim import pods
from kubesim.errors import Cause
from kubesim.selectors import from_label_selector

Obj = dict[str, Any]


def _template_defaults(spec: Obj) -> None:
    template = spec.get("template")
    if isinstance(template, dict):
        pod = {"spec": template.setdefault("spec", {})}
        pods.default_pod(pod)


def default_object(plural: str, group: str, obj: Obj) -> None:
    """Apply the API server's defaults for one built-in kind, in place."""
    spec = obj.get("spec")
    if group == "apps" and isinstance(spec, dict):
        if plural != "daemonsets":
            spec.setdefault("replicas", 1)
        spec.setdefault("revisionHistoryLimit", 10)
        if plural == "deployments":
            spec.setdefault("progressDeadlineSeconds", 600)
            spec.setdefault(
                "strategy",
                {
                    "type": "RollingUpdate",
                    "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"},
                },
            )
        elif plural == "statefulsets":
            spec.setdefault("podManagementPolicy", "OrderedReady")
            spec.setdefault(
                "updateStrategy", {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
            )
        elif plural == "daemonsets":
            spec.setdefault(
                "updateStrategy",
                {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
            )
        _template_defaults(spec)
    elif group == "batch" and plural == "jobs" and isinstance(spec, dict):
        spec.setdefault("parallelism", 1)
        spec.setdefault("completions", 1)
        spec.setdefault("backoffLimit", 6)
        spec.setdefault("completionMode", "NonIndexed")
        spec.setdefault("suspend", False)
        _template_defaults(spec)
    elif group == "batch" and plural == "cronjobs" and isinstance(spec, dict):
        spec.setdefault("concurrencyPolicy", "Allow")
        spec.setdefault("suspend", False)
        spec.setdefault("successfulJobsHistoryLimit", 3)
        spec.setdefault("failedJobsHistoryLimit", 1)
        job_spec = spec.setdefault("jobTemplate", {}).setdefault("spec", {})
        _template_defaults(job_spec)
    elif plural == "services" and group == "" and isinstance(spec, dict):
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        for port in spec.get("ports") or []:
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))
    elif plural == "limitranges" and group == "" and isinstance(spec, dict):
        for item in spec.get("limits") or []:
            _default_limit_range_item(item)
    elif plural == "mutatingwebhookconfigurations":
        for hook in obj.get("webhooks") or []:
            hook.setdefault("failurePolicy", "Fail")
            hook.setdefault("matchPolicy", "Equivalent")
            hook.setdefault("reinvocationPolicy", "Never")
            hook.setdefault("timeoutSeconds", 10)
            hook.setdefault("namespaceSelector", {})
            hook.setdefault("objectSelector", {})
            for rule in hook.get("rules") or []:
                rule.setdefault("scope", "*")
            service = (hook.get("clientConfig") or {}).get("service")
            if isinstance(service, dict):
                service.setdefault("port", 443)


def _default_limit_range_item(item: Obj) -> None:
    """A `Container` item's default limit falls back to its max, and its default request
    to the default limit, then to the min (the real SetDefaults_LimitRangeItem): what the
    LimitRanger plugin later puts into containers that set none."""
    if item.get("type") != "Container":
        return
    default = {**(item.get("max") or {}), **(item.get("default") or {})}
    default_request = {
        **(item.get("min") or {}),
        **default,
        **(item.get("defaultRequest") or {}),
    }
    # Empty maps are left out, as the real server's JSON leaves them out.
    for key, values in (("default", default), ("defaultRequest", default_request)):
        if values:
            item[key] = values


def prepare_job(obj: Obj) -> None:
    """A Job's selector and pod labels are generated from its uid, as the real server does."""
    spec = obj.setdefault("spec", {})
    uid, name = obj["metadata"]["uid"], obj["metadata"]["name"]
    if spec.get("manualSelector"):
        return
    spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    labels = spec.setdefault("template", {}).setdefault("metadata", {}).setdefault("labels", {})
    labels.update(
        {
            "batch.kubernetes.io/controller-uid": uid,
            "batch.kubernetes.io/job-name": name,
            "controller-uid": uid,
            "job-name": name,
        }
    )


#: An events.k8s.io/v1 note longer than this many bytes is refused (the real server counts
#: bytes, and words its error in characters, on the field `message` it stores it as).
EVENT_NOTE_LIMIT = 1024


#: A ConfigMap's values (data and decoded binaryData, keys not counted) may hold this many
#: bytes at most.
CONFIGMAP_LIMIT = 1024 * 1024


def configmap_size(obj: Obj) -> int:
    """The bytes of a ConfigMap's values the real server counts against CONFIGMAP_LIMIT."""
    size = sum(len(str(value).encode()) for value in (obj.get("data") or {}).values())
    for value in (obj.get("binaryData") or {}).values():
        try:
            size += len(base64.b64decode(str(value), validate=True))
        except binascii.Error:
            size += len(str(value))
    return size


def _event_causes(group: str, obj: Obj, *, creating: bool) -> list[Cause]:
    """An Event, stored as a v1 Event by the time it is validated (the note is its
    `message`): the note's length, for an events.k8s.io Event and for a v1 Event of the
    new kind (with an eventTime); an events.k8s.io Event may not be created with the old
    fields."""
    causes: list[Cause] = []
    note = obj.get("message")
    new_kind = group == "events.k8s.io" or bool(obj.get("eventTime"))
    if new_kind and isinstance(note, str) and len(note.encode()) > EVENT_NOTE_LIMIT:
        message = f'Invalid value: "": can have at most {EVENT_NOTE_LIMIT} characters'
        causes.append(Cause("FieldValueInvalid", message, "message"))
    if group == "events.k8s.io" and creating:
        for field in ("firstTimestamp", "lastTimestamp", "count"):
            if obj.get(field):
                causes.append(
                    Cause("FieldValueInvalid", 'Invalid value: "": needs to be unset', field)
                )
    return causes


def validate_object(plural: str, group: str, obj: Obj, *, creating: bool = True) -> list[Cause]:
    """Field errors for built-in workload kinds (selector present and matching the template),
    for Events (`_event_causes`) and for ConfigMaps (their size)."""
    spec = obj.get("spec") or {}
    causes: list[Cause] = []
    if (group, plural) == ("", "configmaps") and configmap_size(obj) > CONFIGMAP_LIMIT:
        # The real server's path for the whole object renders as "[]".
        message = f"Too long: may not be more than {CONFIGMAP_LIMIT} bytes"
        causes.append(Cause("FieldValueTooLong", message, "[]"))
    if plural == "events" and group in ("", "events.k8s.io"):
        causes += _event_causes(group, obj, creating=creating)
    if group == "apps" or (group == "batch" and plural == "jobs"):
        if group == "apps" and not spec.get("selector"):
            causes.append(Cause("FieldValueRequired", "Required value", "spec.selector"))
        template = spec.get("template") or {}
        labels = (template.get("metadata") or {}).get("labels") or {}
        if spec.get("selector") and not from_label_selector(spec["selector"]).matches(labels):
            causes.append(
                Cause(
                    "FieldValueInvalid",
                    "Invalid value: map[string]string{...}: `selector` does not match template `labels`",
                    "spec.template.metadata.labels",
                )
            )
        if not (template.get("spec") or {}).get("containers"):
            causes.append(
                Cause("FieldValueRequired", "Required value", "spec.template.spec.containers")
            )
        if plural == "jobs" and (template.get("spec") or {}).get("restartPolicy") not in (
            "Never",
            "OnFailure",
        ):
            causes.append(
                Cause(
                    "FieldValueNotSupported",
                    'Unsupported value: "Always": supported values: "OnFailure", "Never"',
                    "spec.template.spec.restartPolicy",
                )
            )
        for i, container in enumerate((template.get("spec") or {}).get("containers") or []):
            causes.extend(
                pods.validate_resources(
                    container.get("resources") or {},
                    f"spec.template.spec.containers[{i}].resources",
                )
            )
    if plural == "cronjobs" and group == "batch" and not spec.get("schedule"):
        causes.append(Cause("FieldValueRequired", "Required value", "spec.schedule"))
    if plural == "leases" and group == "coordination.k8s.io":
        duration = spec.get("leaseDurationSeconds")
        if duration is not None and (not isinstance(duration, int) or duration <= 0):
            causes.append(
                Cause(
                    "FieldValueInvalid",
                    f"Invalid value: {duration}: must be greater than 0",
                    "spec.leaseDurationSeconds",
                )
            )
    return causes
