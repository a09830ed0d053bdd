"""The API server's request semantics, independent of HTTP.

The HTTP layer (api.py) and the in-process controllers, scheduler and kubelet all go
through these methods, so a pod a ReplicaSet creates passes defaulting, admission
webhooks and validation exactly like one a client creates.
"""

from __future__ import annotations

import base64
import random
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from kubesim import defaults, limitranger, patch, pods, quota, schema, views
from kubesim.clock import Clock
from kubesim.crdrules import rule_causes
from kubesim.crds import crd_status, register, validate_crd
from kubesim.errors import (
    ApiError,
    Cause,
    already_exists,
    bad_request,
    conflict,
    gone,
    invalid,
    namespace_not_found,
    not_found,
)
from kubesim.fieldvalidation import check_unknown_fields
from kubesim.resources import Registry, ResourceType, split_api_version
from kubesim.selectors import (
    FieldPredicate,
    Selector,
    parse_field_selector,
    parse_label_selector,
    selector_string,
)
from kubesim.status import status_write
from kubesim.store import Obj, Store, WatchEvent, clone
from kubesim.webhookconfig import KINDS as WEBHOOK_CONFIGURATIONS
from kubesim.webhookconfig import validate_webhook_configuration

# Called for mutating admission: (operation, rt, object, old object, dry_run, subresource)
# -> the possibly mutated object. Set by the simulator when admission is wired.
Admit = Callable[[str, ResourceType, Obj, Obj | None, bool, str], Awaitable[Obj]]

_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"
_SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
# Kinds whose status may be set on create (the rest start with an empty status).
_STATUS_ON_CREATE = {("", "nodes"), ("", "events")}


class ApiServer:
    """CRUD, subresources and watch over the store, with the real server's rules."""

    def __init__(
        self,
        clock: Clock,
        store: Store | None = None,
        registry: Registry | None = None,
        seed: int = 0,
    ) -> None:
        self.clock = clock
        self.store = store or Store()
        self.registry = registry or Registry()
        self.admit: Admit | None = None
        self._rng = random.Random(seed)
        for name in _SYSTEM_NAMESPACES:
            self._bootstrap_namespace(name)

    # ----------------------------------------------------------------- lookups

    def resource(self, group: str, version: str, plural: str) -> ResourceType:
        """The served type at group/version/plural, else 404 like the real server."""
        rt = self.registry.get(group, version, plural)
        if rt is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        return rt

    def get(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        """One object, or 404."""
        obj = self.store.get(rt.key, self._ns(rt, namespace), name)
        if obj is None:
            raise not_found(rt, name)
        return self._present(rt, obj)

    def list(
        self,
        rt: ResourceType,
        namespace: str | None,
        label_selector: str | Selector | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        *,
        copy: bool = True,
    ) -> Obj:
        """A `<Kind>List` with selectors and `limit`/`continue` paging.

        Like the real server, every page of a paged list carries the resourceVersion of
        its first page, and a continuation whose version has been compacted away is
        refused with 410 Expired (the client lists again from the start). Items are
        copies unless `copy` is false: then they share the stored objects' contents, for
        a caller that serialises the list at once and changes nothing.
        """
        labels = (
            label_selector
            if isinstance(label_selector, Selector)
            else parse_label_selector(label_selector)
        )
        fields = parse_field_selector(field_selector, rt.plural)
        list_rv = self.store.resource_version
        start: tuple[str, str] | None = None
        if continue_token:
            list_rv, start = _decode_continue(continue_token)
            if list_rv < self.store.compacted:
                raise gone(
                    "The provided continue parameter is too old to display a consistent list "
                    "result. You can start a new list without the continue parameter."
                )
        ns = self._ns(rt, namespace) if namespace else None
        items: list[Obj] = []
        more = ""
        for obj in self.store.iter(rt.key, ns, after=start):
            meta = obj["metadata"]
            if not (labels.matches(meta.get("labels")) and fields(obj)):
                continue
            if limit and len(items) >= limit:
                last = items[-1]["metadata"]
                more = _encode_continue(list_rv, (last.get("namespace", ""), last["name"]))
                break
            items.append(self._present(rt, clone(obj) if copy else {**obj}))
        meta_out: dict[str, Any] = {"resourceVersion": str(list_rv)}
        if more:
            meta_out["continue"] = more
        return {
            "kind": f"{rt.kind}List",
            "apiVersion": rt.api_version,
            "metadata": meta_out,
            "items": items,
        }

    def watch_filter(
        self, rt: ResourceType, namespace: str | None, labels: Selector, fields: FieldPredicate
    ) -> Callable[[WatchEvent], tuple[str, Obj] | None]:
        """A function turning store events into this watch's events (or None to skip).

        An object that starts or stops matching the selectors is reported ADDED or
        DELETED, as the real watch cache does.
        """
        ns = self._ns(rt, namespace) if namespace else None

        def matches(obj: Obj | None) -> bool:
            if obj is None:
                return False
            meta = obj["metadata"]
            if ns is not None and meta.get("namespace", "") != ns:
                return False
            return labels.matches(meta.get("labels")) and fields(obj)

        def translate(event: WatchEvent) -> tuple[str, Obj] | None:
            if event.key != rt.key:
                return None
            now, before = matches(event.obj), matches(event.old)
            if event.type == "DELETED":
                kind = "DELETED" if before else None
            elif now and before:
                kind = "MODIFIED"
            elif now:
                kind = "ADDED"
            elif before:
                kind = "DELETED"
            else:
                kind = None
            return None if kind is None else (kind, self._present(rt, clone(event.obj)))

        return translate

    # ----------------------------------------------------------------- writes

    async def create(
        self,
        rt: ResourceType,
        namespace: str,
        body: Obj,
        *,
        dry_run: bool = False,
        field_validation: str | None = None,
    ) -> Obj:
        """Create an object: unknown fields, defaulting, admission, validation, then
        storage."""
        obj = self._check_body(rt, namespace, _known_fields(rt, body, field_validation))
        meta = obj["metadata"]
        ns = self._ns(rt, namespace or meta.get("namespace", ""))
        if rt.namespaced:
            self._require_namespace(ns)
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        if not meta.get("name") and not meta.get("generateName"):
            raise invalid(
                rt,
                "",
                [
                    Cause(
                        "FieldValueRequired",
                        "Required value: name or generateName is required",
                        "metadata.name",
                    )
                ],
            )
        for key in (
            "uid",
            "creationTimestamp",
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "selfLink",
        ):
            meta.pop(key, None)
        if rt.has_status and rt.key not in _STATUS_ON_CREATE:
            obj.pop("status", None)
        self._default(rt, obj)
        # Mutating admission runs before the name is generated and the uid and
        # creationTimestamp are set, so webhooks see what the real server shows them.
        self.mutate_in_tree("CREATE", rt, obj, None, "")
        if self.admit is not None:
            obj = await self.admit("CREATE", rt, obj, None, dry_run, "")
            self._default(rt, obj)
        meta = obj["metadata"]
        if not meta.get("name"):
            meta["name"] = self._generate_name(rt, ns, meta["generateName"])
        if self.store.peek(rt.key, ns, meta["name"]) is not None:
            raise already_exists(rt, meta["name"])
        meta["uid"] = str(uuid.UUID(int=self._rng.getrandbits(128), version=4))
        meta["creationTimestamp"] = self.clock.stamp()
        self._on_create(rt, obj)
        self._validate(rt, obj, None)
        self._validate_in_tree("CREATE", rt, obj, None, "", dry_run)
        if self._tracks_generation(rt, obj):
            meta["generation"] = 1
        if dry_run:
            return self._present(rt, obj)
        stored = self.store.put(rt.key, obj, "ADDED")
        self._after_write(rt, stored)
        return self._present(rt, stored)

    async def bind(self, namespace: str, name: str, body: Obj) -> Obj:
        """POST pods/{name}/binding: assign a pending pod to a node (what a scheduler does)."""
        rt = self.resource("", "v1", "pods")
        pod = self.store.get(rt.key, namespace, name)
        if pod is None:
            raise not_found(rt, name)
        target = (body or {}).get("target") or {}
        node = target.get("name")
        if not node:
            raise invalid(rt, name, [Cause("FieldValueRequired", "Required value", "target.name")])
        current = pod["spec"].get("nodeName")
        if current:
            raise conflict(rt, name, f'pod {name} is already assigned to node "{current}"')
        pod["spec"]["nodeName"] = node
        conditions = [
            c
            for c in pod.setdefault("status", {}).get("conditions") or []
            if c.get("type") != "PodScheduled"
        ]
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": self.clock.stamp(),
            }
        )
        pod["status"]["conditions"] = conditions
        stored = self.store.put(rt.key, pod, "MODIFIED")
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "code": 201,
            "details": {"name": stored["metadata"]["name"], "kind": "pods"},
        }

    async def update(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        body: Obj,
        *,
        subresource: str = "",
        dry_run: bool = False,
        field_validation: str | None = None,
    ) -> Obj:
        """Replace an object (PUT), honouring resourceVersion preconditions and the
        split between the main resource and its `status`/`resize` subresources."""
        ns = self._ns(rt, namespace)
        old = self.store.get(rt.key, ns, name)
        if old is None:
            raise not_found(rt, name)
        obj = self._check_body(rt, namespace, _known_fields(rt, body, field_validation))
        meta = obj["metadata"]
        if meta.get("name") and meta["name"] != name:
            raise bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL ({name})"
            )
        wanted_rv = meta.get("resourceVersion")
        if wanted_rv and wanted_rv != old["metadata"]["resourceVersion"]:
            raise conflict(rt, name)
        return await self._replace(rt, old, obj, subresource, dry_run)

    async def patch(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        patch_type: str,
        body: Any,
        *,
        subresource: str = "",
        dry_run: bool = False,
        field_validation: str | None = None,
    ) -> Obj:
        """Apply a JSON, merge or strategic merge patch (PATCH); the patched object's
        unknown fields are handled as `field_validation` says."""
        ns = self._ns(rt, namespace)
        old = self.store.get(rt.key, ns, name)
        if old is None:
            raise not_found(rt, name)
        patched = self._apply_patch(rt, self._present(rt, clone(old)), patch_type, body)
        check_unknown_fields(rt, patched, field_validation)
        wanted_rv = (patched.get("metadata") or {}).get("resourceVersion")
        if wanted_rv and wanted_rv != old["metadata"]["resourceVersion"]:
            raise conflict(rt, name)
        patched.setdefault("metadata", {})["resourceVersion"] = old["metadata"]["resourceVersion"]
        return await self._replace(rt, old, patched, subresource, dry_run)

    def _apply_patch(self, rt: ResourceType, current: Obj, patch_type: str, body: Any) -> Obj:
        if patch_type == patch.JSON_PATCH:
            patched = patch.apply_json_patch(current, body)
        elif patch_type == patch.MERGE_PATCH:
            patched = patch.apply_merge_patch(current, body)
        elif patch_type == patch.STRATEGIC_PATCH and not rt.is_custom:
            patched = patch.apply_strategic_patch(current, body)
        else:
            accepted = [patch.JSON_PATCH, patch.MERGE_PATCH] + (
                [] if rt.is_custom else [patch.STRATEGIC_PATCH]
            )
            raise ApiError(
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format - accepted media types include: "
                + ", ".join(accepted),
            )
        if not isinstance(patched, dict):
            raise bad_request("the patch did not produce an object")
        return patched

    def scale(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        """GET .../scale: the autoscaling/v1 Scale view of a workload."""
        obj = self.get(rt, namespace, name)
        meta = obj["metadata"]
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        return {
            "apiVersion": "autoscaling/v1",
            "kind": "Scale",
            "metadata": {
                k: meta[k]
                for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                if k in meta
            },
            "spec": {"replicas": spec.get("replicas", 0)},
            "status": {
                "replicas": status.get("replicas", 0),
                "selector": selector_string(spec.get("selector")),
            },
        }

    async def set_scale(
        self, rt: ResourceType, namespace: str, name: str, body: Any, patch_type: str = ""
    ) -> Obj:
        """PUT or PATCH .../scale: change only spec.replicas."""
        current = self.scale(rt, namespace, name)
        wanted = self._apply_patch(rt, clone(current), patch_type, body) if patch_type else body
        if not isinstance(wanted, dict):
            raise bad_request("the body of the request must be a Scale object")
        wanted_rv = (wanted.get("metadata") or {}).get("resourceVersion")
        if wanted_rv and wanted_rv != current["metadata"]["resourceVersion"]:
            raise conflict(rt, name)
        replicas = (wanted.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or replicas < 0:
            raise invalid(
                rt,
                name,
                [
                    Cause(
                        "FieldValueInvalid",
                        f"Invalid value: {replicas}: must be greater than or equal to 0",
                        "spec.replicas",
                    )
                ],
            )
        old = self.store.get(rt.key, self._ns(rt, namespace), name)
        if old is None:
            raise not_found(rt, name)
        updated = clone(old)
        updated["spec"]["replicas"] = replicas
        await self._replace(rt, old, updated, "", False)
        return self.scale(rt, namespace, name)

    async def _replace(
        self, rt: ResourceType, old: Obj, obj: Obj, subresource: str, dry_run: bool
    ) -> Obj:
        name = old["metadata"]["name"]
        obj = views.to_storage(rt, obj)
        if subresource == "status":
            new = status_write(rt, old, obj)
        elif subresource == "resize":
            self.mutate_in_tree("UPDATE", rt, obj, old, subresource)
            new, causes = pods.resize_target(old, obj)
            if causes:
                raise invalid(rt, name, causes)
        elif subresource:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        else:
            new = obj
            meta = new.setdefault("metadata", {})
            for key in (
                "uid",
                "creationTimestamp",
                "namespace",
                "name",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
            ):
                if key in old["metadata"]:
                    meta[key] = old["metadata"][key]
                else:
                    meta.pop(key, None)
            if rt.has_status:
                if "status" in old:
                    new["status"] = old["status"]
                else:
                    new.pop("status", None)
            self._default(rt, new)
            if self.admit is not None:
                new = await self.admit(
                    "UPDATE", rt, new, self._present(rt, clone(old)), dry_run, ""
                )
                self._default(rt, new)
        # A CR's rules compare with the stored object on a status write too (ratcheting).
        self._validate(rt, new, old if not subresource or rt.is_custom else None)
        self._validate_in_tree("UPDATE", rt, new, old, subresource, dry_run)
        new["apiVersion"], new["kind"] = (
            old.get("apiVersion", rt.api_version),
            old.get("kind", rt.kind),
        )
        if self._spec_changed(rt, old, new) and "generation" in old["metadata"]:
            new["metadata"]["generation"] = old["metadata"]["generation"] + 1
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        if new == old:
            # A write that changes nothing keeps its resourceVersion and sends no event.
            return self._present(rt, new)
        if dry_run:
            return self._present(rt, new)
        if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
            return self._present(rt, self._remove(rt, new) or new)
        stored = self.store.put(rt.key, new, "MODIFIED")
        self._after_write(rt, stored)
        return self._present(rt, stored)

    async def delete(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        options: Obj | None = None,
        *,
        dry_run: bool = False,
    ) -> Obj:
        """Delete an object (preconditions, finalizers and propagation honoured)."""
        ns = self._ns(rt, namespace)
        old = self.store.get(rt.key, ns, name)
        if old is None:
            raise not_found(rt, name)
        options = options or {}
        pre = options.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != old["metadata"]["uid"]:
            raise conflict(
                rt,
                name,
                f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: {old['metadata']['uid']}",
            )
        if (
            pre.get("resourceVersion")
            and pre["resourceVersion"] != old["metadata"]["resourceVersion"]
        ):
            raise conflict(
                rt,
                name,
                f"Precondition failed: ResourceVersion in precondition: {pre['resourceVersion']}, ResourceVersion in object meta: {old['metadata']['resourceVersion']}",
            )
        if dry_run:
            return self._present(rt, old)
        if options.get("propagationPolicy") == "Orphan":
            self._orphan_dependents(old["metadata"]["uid"])
        if old["metadata"].get("finalizers"):
            if not old["metadata"].get("deletionTimestamp"):
                old["metadata"]["deletionTimestamp"] = self.clock.stamp()
                old["metadata"]["deletionGracePeriodSeconds"] = 0
                old = self.store.put(rt.key, old, "MODIFIED")
            return self._present(rt, old)
        removed = self._remove(rt, old)
        return self._present(rt, removed or old)

    def _remove(self, rt: ResourceType, obj: Obj) -> Obj | None:
        meta = obj["metadata"]
        if rt.key == ("", "namespaces"):
            for other in self.registry.all():
                if other.namespaced:
                    for item in list(self.store.iter(other.key, meta["name"])):
                        self.store.remove(other.key, meta["name"], item["metadata"]["name"])
        removed = self.store.remove(rt.key, meta.get("namespace", ""), meta["name"])
        if removed is not None and rt.key == ("apiextensions.k8s.io", "customresourcedefinitions"):
            spec = removed.get("spec") or {}
            self.store.drop_resource(
                (spec.get("group", ""), (spec.get("names") or {}).get("plural", ""))
            )
            self.registry.remove_crd(meta["name"])
        return removed

    def _orphan_dependents(self, owner_uid: str) -> None:
        for rt in self.registry.all():
            for obj in list(self.store.iter(rt.key)):
                refs = obj["metadata"].get("ownerReferences") or []
                if any(r.get("uid") == owner_uid for r in refs):
                    updated = clone(obj)
                    updated["metadata"]["ownerReferences"] = [
                        r for r in refs if r.get("uid") != owner_uid
                    ]
                    self.store.put(rt.key, updated, "MODIFIED")

    # ----------------------------------------------------------------- internal writes

    def write_status(self, rt: ResourceType, obj: Obj) -> Obj:
        """Store a status change made by a simulated component (controller, kubelet).

        Skips the write when nothing changed, so settling reaches a fixed point.
        """
        meta = obj["metadata"]
        old = self.store.peek(rt.key, meta.get("namespace", ""), meta["name"])
        if old is None:
            raise not_found(rt, meta["name"])
        meta["resourceVersion"] = old["metadata"]["resourceVersion"]
        if old == obj:
            return obj
        return self.store.put(rt.key, obj, "MODIFIED")

    def insert(self, rt: ResourceType, obj: Obj) -> Obj:
        """Store a new object a simulated component wrote (Events): identity set, no
        admission or validation, so synchronous component code can call it."""
        obj = views.to_storage(rt, clone(obj))
        meta = obj["metadata"]
        meta["uid"] = str(uuid.UUID(int=self._rng.getrandbits(128), version=4))
        meta["creationTimestamp"] = self.clock.stamp()
        return self._present(rt, self.store.put(rt.key, obj, "ADDED"))

    def remove_now(self, rt: ResourceType, namespace: str, name: str) -> Obj | None:
        """Remove an object at once (garbage collection and kubelet cleanup)."""
        obj = self.store.peek(rt.key, namespace, name)
        return None if obj is None else self._remove(rt, obj)

    # ----------------------------------------------------------------- in-tree admission

    def mutate_in_tree(
        self, operation: str, rt: ResourceType, obj: Obj, old: Obj | None, subresource: str
    ) -> None:
        """The in-tree mutating admission plugins kubesim has (LimitRanger's defaults), run
        before the webhooks, and again after them when a webhook changed the object, as
        the real admission chain is reinvoked."""
        if rt.key == ("", "pods") and limitranger.applies(operation, subresource, old):
            limitranger.default_pod(self.store, obj)

    def reinvoke_in_tree(
        self, operation: str, rt: ResourceType, obj: Obj, old: Obj | None, subresource: str
    ) -> Obj:
        """`mutate_in_tree` over an object a webhook patched, defaulted first as the real
        server defaults a webhook's answer."""
        self._default(rt, obj)
        self.mutate_in_tree(operation, rt, obj, old, subresource)
        return obj

    def _validate_in_tree(
        self,
        operation: str,
        rt: ResourceType,
        obj: Obj,
        old: Obj | None,
        subresource: str,
        dry_run: bool,
    ) -> None:
        """The in-tree validating plugins, after the object's own validation as on the
        real server: LimitRanger, then ResourceQuota, last because it charges the quotas
        (not on a dry run)."""
        if rt.key != ("", "pods"):
            return
        if limitranger.applies(operation, subresource, old):
            limitranger.check_pod(self.store, rt, obj)
        if quota.handles(operation, subresource, obj, old):
            quotas = self.resource("", "v1", "resourcequotas")
            for charged in quota.charge(self.store, rt, obj, old, self.clock.now()):
                if not dry_run:
                    self.write_status(quotas, charged)

    # ----------------------------------------------------------------- kind rules

    def _default(self, rt: ResourceType, obj: Obj) -> None:
        if rt.is_custom:
            return
        if rt.key == ("", "pods"):
            pods.default_pod(obj)
        else:
            defaults.default_object(rt.plural, rt.group, obj)

    def _on_create(self, rt: ResourceType, obj: Obj) -> None:
        meta = obj["metadata"]
        if rt.key == ("", "pods"):
            obj["status"] = {"phase": "Pending", "qosClass": pods.qos_class(obj)}
        elif rt.key == ("", "namespaces"):
            meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta["name"]
            obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
            obj["status"] = {"phase": "Active"}
        elif rt.key == ("batch", "jobs"):
            defaults.prepare_job(obj)
        elif rt.key == ("apiextensions.k8s.io", "customresourcedefinitions"):
            obj["status"] = crd_status(obj)

    def _validate(self, rt: ResourceType, obj: Obj, old: Obj | None) -> None:
        name = obj["metadata"].get("name", "")
        causes: list[Cause] = []
        if rt.is_custom:
            causes = schema.prepare(obj, rt.schema)
            causes += rule_causes(obj, rt.schema, rt.rules, old, causes)
        elif rt.key == ("", "pods"):
            causes = (
                pods.validate_pod_update(old, obj) if old is not None else pods.validate_pod(obj)
            )
        elif rt.key == ("apiextensions.k8s.io", "customresourcedefinitions"):
            causes = validate_crd(obj)
        elif rt.group == "admissionregistration.k8s.io" and rt.plural in WEBHOOK_CONFIGURATIONS:
            causes = validate_webhook_configuration(obj)
        else:
            causes = defaults.validate_object(rt.plural, rt.group, obj, creating=old is None)
        if causes:
            raise invalid(rt, name, causes)

    def _after_write(self, rt: ResourceType, obj: Obj) -> None:
        if rt.key == ("apiextensions.k8s.io", "customresourcedefinitions"):
            register(self.registry, obj)
            spec = obj.get("spec") or {}
            plural = (spec.get("names") or {}).get("plural", "")
            self.store.start_watch_cache((spec.get("group", ""), plural))

    def _tracks_generation(self, rt: ResourceType, obj: Obj) -> bool:
        return rt.is_custom or "spec" in obj or rt.key == ("", "pods")

    def _spec_changed(self, rt: ResourceType, old: Obj, new: Obj) -> bool:
        if rt.is_custom:
            ignore = {"metadata", "status"} if rt.has_status else {"metadata"}
            return {k: v for k, v in old.items() if k not in ignore} != {
                k: v for k, v in new.items() if k not in ignore
            }
        return old.get("spec") != new.get("spec")

    # ----------------------------------------------------------------- helpers

    def _ns(self, rt: ResourceType, namespace: str | None) -> str:
        return (namespace or "") if rt.namespaced else ""

    def _require_namespace(self, ns: str) -> None:
        if not ns:
            raise bad_request(
                "the server could not find the requested resource: a namespace is required"
            )
        existing = self.store.peek(("", "namespaces"), "", ns)
        if existing is None:
            raise namespace_not_found(ns)
        if existing["metadata"].get("deletionTimestamp"):
            raise ApiError(
                403,
                "Forbidden",
                f"unable to create new content in namespace {ns} because it is being terminated",
            )

    def _check_body(self, rt: ResourceType, namespace: str, body: Any) -> Obj:
        if not isinstance(body, dict):
            raise bad_request("the body of the request must be a JSON object")
        obj = clone(body)
        kind, api_version = obj.get("kind"), obj.get("apiVersion")
        if kind and kind != rt.kind:
            raise bad_request(f"the kind of the object ({kind}) does not match the URL ({rt.kind})")
        if api_version:
            group, _ = split_api_version(api_version)
            if group != rt.group:
                raise bad_request(
                    f"the API version in the data ({api_version}) does not match the expected API version ({rt.api_version})"
                )
        obj["kind"], obj["apiVersion"] = rt.kind, rt.api_version
        obj = views.to_storage(rt, obj)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        body_ns = meta.get("namespace")
        if rt.namespaced and namespace and body_ns and body_ns != namespace:
            raise bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        return obj

    def _generate_name(self, rt: ResourceType, ns: str, prefix: str) -> str:
        for _ in range(100):
            name = prefix[:58] + random_suffix(self._rng)
            if self.store.peek(rt.key, ns, name) is None:
                return name
        raise ApiError(409, "AlreadyExists", f"could not generate a unique name from {prefix!r}")

    def _present(self, rt: ResourceType, obj: Obj) -> Obj:
        """The object as served at `rt`'s version (CR versions convert with strategy None)."""
        view = views.present(rt, obj)
        if view is not None:
            return view
        obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
        return obj

    def _bootstrap_namespace(self, name: str) -> None:
        obj = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": name,
                "uid": str(uuid.UUID(int=self._rng.getrandbits(128), version=4)),
                "creationTimestamp": self.clock.stamp(),
                "labels": {"kubernetes.io/metadata.name": name},
            },
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        }
        self.store.put(("", "namespaces"), obj, "ADDED")


def _known_fields(rt: ResourceType, body: Any, field_validation: str | None) -> Any:
    """A copy of a written body without its unknown fields (warned or refused)."""
    if not isinstance(body, dict):
        return body
    body = clone(body)
    check_unknown_fields(rt, body, field_validation)
    return body


def _encode_continue(rv: int, position: tuple[str, str]) -> str:
    """An opaque continue token: the list's resourceVersion and the last item returned."""
    return base64.urlsafe_b64encode(orjson.dumps({"rv": rv, "start": list(position)})).decode()


def _decode_continue(token: str) -> tuple[int, tuple[str, str]]:
    try:
        decoded = orjson.loads(base64.urlsafe_b64decode(token.encode()))
        rv, (namespace, name) = decoded["rv"], decoded["start"]
        if not (isinstance(rv, int) and isinstance(namespace, str) and isinstance(name, str)):
            raise TypeError("continue token fields")
    except (ValueError, KeyError, TypeError) as exc:
        raise bad_request(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
        ) from exc
    return rv, (namespace, name)


def random_suffix(rng: random.Random, n: int = 5) -> str:
    """Kubernetes-style random name suffix (no vowels, no ambiguous characters)."""
    return "".join(rng.choice(_NAME_CHARS) for _ in range(n))
