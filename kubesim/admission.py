"""Mutating admission: calls MutatingWebhookConfigurations over HTTPS, as the API server does.

The server certificate is verified against the webhook's `caBundle` and the name the real
API server would use (`<service>.<namespace>.svc` for `clientConfig.service`, the URL's
host otherwise). `clientConfig.service` is sent to the local address registered in
`service_addresses`; `clientConfig.url` is used as is.
"""

from __future__ import annotations

import base64
import contextlib
import contextvars
import ssl
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import jsonpatch
import orjson

from kubesim.cel import CelEvalError, CelSyntaxError, compile_expression, evaluate_condition
from kubesim.errors import ApiError, bad_request, internal
from kubesim.resources import ResourceType
from kubesim.selectors import from_label_selector
from kubesim.store import Obj, Store, clone
from kubesim.webhookconfig import SIDE_EFFECTS

MWC = ("admissionregistration.k8s.io", "mutatingwebhookconfigurations")
_WARNINGS: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "kubesim_warnings", default=None
)
_SKIPPED_GROUPS = {"admissionregistration.k8s.io"}
# The in-tree mutating plugins, run again when a webhook changed the object:
# (operation, rt, object, old object, subresource) -> the object.
InTree = Callable[[str, ResourceType, Obj, Obj | None, str], Obj]


@contextlib.contextmanager
def collect_warnings() -> Iterator[list[str]]:
    """Collect webhook warnings raised while handling one request (for `Warning` headers)."""
    bucket: list[str] = []
    token = _WARNINGS.set(bucket)
    try:
        yield bucket
    finally:
        _WARNINGS.reset(token)


def warn(message: str) -> None:
    """Send `message` back as a `Warning` header of the request being handled."""
    bucket = _WARNINGS.get()
    if bucket is not None:
        bucket.append(message)


class WebhookCallError(Exception):
    """Calling a webhook failed (connection, TLS, timeout, bad answer): subject to failurePolicy."""


@dataclass
class Call:
    """One record of a webhook call, for tests to inspect (`sim.admission.calls`)."""

    webhook: str
    operation: str
    resource: str
    namespace: str
    name: str
    patched: bool
    error: str = ""


class Admission:
    """Runs the mutating webhooks that match a request and applies their patches."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.service_addresses: dict[tuple[str, str], str] = {}
        self.calls: list[Call] = []
        self._session: aiohttp.ClientSession | None = None
        self._contexts: dict[str, ssl.SSLContext] = {}
        #: the API server's in-tree mutating plugins (LimitRanger), set when it is wired
        self.in_tree: InTree | None = None

    def set_service_address(self, namespace: str, name: str, address: str) -> None:
        """Send calls for `clientConfig.service` namespace/name to `address` ("host:port")."""
        self.service_addresses[(namespace, name)] = address

    async def close(self) -> None:
        """Close the HTTP client."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def admit(
        self,
        operation: str,
        rt: ResourceType,
        obj: Obj,
        old: Obj | None,
        dry_run: bool,
        subresource: str,
    ) -> Obj:
        """Run every matching webhook in order; when one changed the object, run the
        in-tree plugins again and reinvoke once each `IfNeeded` webhook that a later change
        makes stale (the real chain's reinvocation)."""
        if rt.group in _SKIPPED_GROUPS:
            return obj
        hooks = [
            h
            for h in self._webhooks()
            if self._matches(h, operation, rt, obj, old, subresource)
            and _conditions_hold(h, operation, rt, obj, old, dry_run)
        ]
        for hook in hooks:
            if dry_run and hook.get("sideEffects") not in SIDE_EFFECTS:
                raise bad_request(
                    f'admission webhook "{hook.get("name", "")}" does not support dry run'
                )
        seen: list[Obj] = []
        changed = False
        for hook in hooks:
            before = obj
            obj = await self._call(hook, operation, rt, obj, old, dry_run, subresource)
            changed = changed or obj != before
            seen.append(clone(obj))
        if changed and self.in_tree is not None:
            obj = self.in_tree(operation, rt, obj, old, subresource)
        for hook, last in zip(hooks, seen, strict=True):
            if hook.get("reinvocationPolicy") == "IfNeeded" and obj != last:
                obj = await self._call(hook, operation, rt, obj, old, dry_run, subresource)
        return obj

    def _webhooks(self) -> list[dict[str, Any]]:
        hooks: list[dict[str, Any]] = []
        for config in self._store.iter(MWC):
            hooks.extend(config.get("webhooks") or [])
        return hooks

    def _matches(
        self,
        hook: dict[str, Any],
        operation: str,
        rt: ResourceType,
        obj: Obj,
        old: Obj | None,
        subresource: str,
    ) -> bool:
        if not any(
            _rule_matches(rule, operation, rt, subresource) for rule in hook.get("rules") or []
        ):
            return False
        if rt.namespaced:
            ns = self._store.peek(("", "namespaces"), "", obj["metadata"].get("namespace", ""))
            ns_labels = (ns or {}).get("metadata", {}).get("labels") or {}
            if not from_label_selector(hook.get("namespaceSelector")).matches(ns_labels):
                return False
        elif rt.key == ("", "namespaces") and not from_label_selector(
            hook.get("namespaceSelector")
        ).matches(obj["metadata"].get("labels")):
            return False
        object_selector = from_label_selector(hook.get("objectSelector"))
        return object_selector.matches(obj["metadata"].get("labels")) or (
            old is not None and object_selector.matches(old["metadata"].get("labels"))
        )

    async def _call(
        self,
        hook: dict[str, Any],
        operation: str,
        rt: ResourceType,
        obj: Obj,
        old: Obj | None,
        dry_run: bool,
        subresource: str,
    ) -> Obj:
        name = hook.get("name", "")
        meta = obj["metadata"]
        request_uid = str(uuid.uuid4())
        gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}
        gvr = {"group": rt.group, "version": rt.version, "resource": rt.plural}
        request: dict[str, Any] = {
            "uid": request_uid,
            "kind": gvk,
            "resource": gvr,
            "requestKind": gvk,
            "requestResource": gvr,
            "name": meta.get("name", ""),
            "namespace": meta.get("namespace", ""),
            "operation": operation,
            "userInfo": {
                "username": "kubesim-admin",
                "groups": ["system:masters", "system:authenticated"],
            },
            "object": obj,
            "oldObject": old,
            "dryRun": dry_run,
            "options": {
                "kind": "CreateOptions" if operation == "CREATE" else "UpdateOptions",
                "apiVersion": "meta.k8s.io/v1",
            },
        }
        if subresource:
            request["subResource"] = subresource
        review = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": request,
        }
        record = Call(
            name, operation, rt.plural, meta.get("namespace", ""), meta.get("name", ""), False
        )
        self.calls.append(record)
        try:
            response = await self._post(hook, review, request_uid)
        except WebhookCallError as exc:
            record.error = str(exc)
            if hook.get("failurePolicy", "Fail") == "Ignore":
                return obj
            raise internal(f'failed calling webhook "{name}": {exc}') from exc
        for warning in response.get("warnings") or []:
            warn(str(warning))
        if not response.get("allowed"):
            result = response.get("status") or {}
            message = f'admission webhook "{name}" denied the request'
            if result.get("message"):
                message += f": {result['message']}"
            code = int(result.get("code") or 400)
            raise ApiError(
                code,
                result.get("reason") or ("BadRequest" if code == 400 else "Forbidden"),
                message,
            )
        if not response.get("patch"):
            return obj
        if response.get("patchType") != "JSONPatch":
            raise internal(
                f'failed calling webhook "{name}": unsupported patch type {response.get("patchType")!r}'
            )
        try:
            ops = orjson.loads(base64.b64decode(response["patch"]))
            patched = jsonpatch.apply_patch(obj, ops)
        except (ValueError, jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
            raise internal(f'admission webhook "{name}" returned an invalid patch: {exc}') from exc
        record.patched = patched != obj
        return patched

    async def _post(
        self, hook: dict[str, Any], review: dict[str, Any], request_uid: str
    ) -> dict[str, Any]:
        config = hook.get("clientConfig") or {}
        timeout = int(hook.get("timeoutSeconds") or 10)
        url, server_hostname = self._target(config)
        shown = f"{url}?timeout={timeout}s"
        if self._session is None:
            self._session = aiohttp.ClientSession()
        try:
            async with self._session.post(
                shown,
                data=orjson.dumps(review),
                headers={"Content-Type": "application/json", "Accept": "application/json"},
                ssl=self._ssl(config.get("caBundle", "")),
                server_hostname=server_hostname,
                timeout=aiohttp.ClientTimeout(total=timeout),
            ) as resp:
                raw = await resp.read()
                if resp.status != 200:
                    raise WebhookCallError(
                        f"failed to call webhook: the server responded with status {resp.status}: {raw[:200].decode(errors='replace')}"
                    )
        except TimeoutError as exc:
            raise WebhookCallError(
                f'failed to call webhook: Post "{self._display(config, shown)}": context deadline exceeded'
            ) from exc
        except (aiohttp.ClientError, ssl.SSLError, OSError) as exc:
            raise WebhookCallError(
                f'failed to call webhook: Post "{self._display(config, shown)}": {exc}'
            ) from exc
        try:
            answer = orjson.loads(raw)
            response = answer["response"]
        except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
            raise WebhookCallError(f"received invalid webhook response: {exc}") from exc
        if response.get("uid") != request_uid:
            raise WebhookCallError(
                f'expected response.uid="{request_uid}", got "{response.get("uid")}"'
            )
        return response

    def _target(self, config: dict[str, Any]) -> tuple[str, str | None]:
        if config.get("url"):
            return config["url"], None
        service = config.get("service") or {}
        key = (service.get("namespace", ""), service.get("name", ""))
        address = self.service_addresses.get(key)
        if address is None:
            raise WebhookCallError(
                f'failed to call webhook: service "{key[0]}/{key[1]}" has no address registered with kubesim'
            )
        path = service.get("path") or "/"
        return f"https://{address}{path}", f"{key[1]}.{key[0]}.svc"

    def _display(self, config: dict[str, Any], shown: str) -> str:
        """The URL as the real API server names it in errors (service DNS name and port)."""
        service = config.get("service")
        if config.get("url") or not service:
            return shown
        query = shown.partition("?")[2]
        return f"https://{service['name']}.{service['namespace']}.svc:{service.get('port', 443)}{service.get('path') or '/'}?{query}"

    def _ssl(self, ca_bundle: str) -> ssl.SSLContext:
        context = self._contexts.get(ca_bundle)
        if context is None:
            if ca_bundle:
                try:
                    pem = base64.b64decode(ca_bundle).decode()
                except ValueError as exc:
                    raise WebhookCallError(f"invalid caBundle: {exc}") from exc
                context = ssl.create_default_context(cadata=pem)
            else:
                context = ssl.create_default_context()
            context.minimum_version = ssl.TLSVersion.TLSv1_2
            self._contexts[ca_bundle] = context
        return context


def _conditions_hold(
    hook: dict[str, Any],
    operation: str,
    rt: ResourceType,
    obj: Obj,
    old: Obj | None,
    dry_run: bool,
) -> bool:
    """Whether every `matchCondition` is true. Any false one skips the webhook; otherwise
    an error skips it under `failurePolicy: Ignore` and refuses the request (403) under
    `Fail`, as the real dispatcher does."""
    meta = obj.get("metadata") or {}
    request = {
        "operation": operation,
        "namespace": meta.get("namespace", ""),
        "name": meta.get("name", ""),
        "dryRun": dry_run,
        "kind": {"group": rt.group, "version": rt.version, "kind": rt.kind},
        "resource": {"group": rt.group, "version": rt.version, "resource": rt.plural},
        "userInfo": {"username": "kubesim-admin", "groups": ["system:masters"]},
    }
    env = {"object": obj, "oldObject": old, "request": request}
    errors: list[str] = []
    for condition in hook.get("matchConditions") or []:
        expression = str(condition.get("expression", ""))
        try:
            if not evaluate_condition(compile_expression(expression), env):
                return False
        except (CelEvalError, CelSyntaxError) as exc:
            errors.append(f"expression '{expression}' resulted in error: {exc}")
    if not errors:
        return True
    if hook.get("failurePolicy", "Fail") == "Ignore":
        return False
    resource = f"{rt.plural}.{rt.group}" if rt.group else rt.plural
    joined = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    raise ApiError(403, "Forbidden", f'{resource} "{meta.get("name", "")}" is forbidden: {joined}')


def _rule_matches(rule: dict[str, Any], operation: str, rt: ResourceType, subresource: str) -> bool:
    def has(values: Any, value: str) -> bool:
        return "*" in (values or []) or value in (values or [])

    if not (
        has(rule.get("operations"), operation)
        and has(rule.get("apiGroups"), rt.group)
        and has(rule.get("apiVersions"), rt.version)
    ):
        return False
    scope = rule.get("scope", "*")
    if scope == "Namespaced" and not rt.namespaced or scope == "Cluster" and rt.namespaced:
        return False
    for pattern in rule.get("resources") or []:
        res, _, sub = pattern.partition("/")
        if res not in ("*", rt.plural):
            continue
        if pattern == "*/*" or (sub == "*" and subresource) or sub == subresource:
            return True
    return False
