"""HTTP routing: the REST paths, content types and watch streaming of kube-apiserver."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
import yaml
from aiohttp import web
from multidict import CIMultiDict

from kubesim import cadvisor, discovery, openapi, patch, protoschema, protowire, tables
from kubesim.admission import collect_warnings
from kubesim.apiserver import ApiServer
from kubesim.audit import AuditLog
from kubesim.disruption import evict
from kubesim.errors import ApiError, bad_request, internal, method_not_allowed
from kubesim.faults import Faults
from kubesim.proxy import parse_proxy_path, proxy
from kubesim.requestlog import RequestLog
from kubesim.resources import ResourceType
from kubesim.selectors import parse_field_selector, parse_label_selector
from kubesim.store import WatchEvent
from kubesim.writes import WriteLog

JSON = "application/json"
log = logging.getLogger(__name__)


def _json(body: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status, content_type=JSON, headers=headers)


def _error(exc: ApiError) -> web.Response:
    return _json(exc.status(), exc.code, exc.headers or None)


@dataclass(frozen=True)
class Route:
    """A parsed resource path: type, namespace, name, subresource."""

    rt: ResourceType
    namespace: str
    name: str
    subresource: str


class HttpApi:
    """The aiohttp application serving an `ApiServer`."""

    def __init__(
        self,
        api: ApiServer,
        faults: Faults,
        on_write: Callable[[], None],
        bookmark_interval: float = 60.0,
        service_addresses: dict[tuple[str, str], str] | None = None,
    ) -> None:
        self.api = api
        #: Service (namespace, name) -> "host:port", shared with admission: the proxy's upstreams.
        self.service_addresses = {} if service_addresses is None else service_addresses
        self.faults = faults
        self.writes = WriteLog(api.store)
        self._on_write = on_write
        self.bookmark_interval = bookmark_interval
        #: the writes received and who sent them (off unless enabled)
        self.requests = RequestLog()
        #: the audit log of writes (`python -m kubesim --audit-log`; None: not kept)
        self.audit: AuditLog | None = None
        self.server_address = "127.0.0.1:0"
        self.app = web.Application(client_max_size=16 * 1024 * 1024)
        self.app.router.add_route("*", "/{tail:.*}", self._handle)

    # ----------------------------------------------------------------- entry

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self._dispatch(request)
        except ApiError as exc:
            return _error(exc)
        except ConnectionError:
            # The client went away mid-request (killed, or gave up): there is no one to answer,
            # and like the API server kubesim has changed nothing, so this is not an error.
            log.info(
                "kubesim: %s %s: the client closed the connection", request.method, request.path
            )
            return web.Response(status=499, text="the client closed the connection")
        except Exception as exc:
            # A simulator bug must still answer like the API server would, with a Status.
            log.exception("kubesim: unhandled error for %s %s", request.method, request.path)
            return _error(internal(f"{type(exc).__name__}: {exc}"))

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        if path in ("/healthz", "/livez", "/readyz"):
            return web.Response(text="ok")
        if path == "/version":
            return _json(discovery.KUBE_VERSION)
        if path == "/metrics/cadvisor":
            return self._cadvisor()
        if path == "/api":
            return _json(discovery.api_versions(self.server_address))
        if path == "/apis":
            return _json(discovery.api_group_list(self.api.registry))
        if path.startswith("/openapi/"):
            return self._openapi(request, path)
        parts = [p for p in path.split("/") if p]
        if parts[0] == "api" and len(parts) >= 2:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis" and len(parts) >= 2:
            if len(parts) == 2:
                doc = discovery.api_group(self.api.registry, parts[1])
                if doc is None:
                    raise ApiError(
                        404, "NotFound", "the server could not find the requested resource"
                    )
                return _json(doc)
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if group == "" and (target := parse_proxy_path(rest)) is not None:
            return await proxy(request, self.service_addresses, target)
        if not rest:
            doc = discovery.resource_list(self.api.registry, group, version)
            if doc is None:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            return _json(doc)
        if rest[0] == "watch":
            rest = rest[1:]
            watch_path = True
        else:
            watch_path = False
        route = self._route(group, version, rest)
        return await self._resource(request, route, watch_path)

    def _cadvisor(self) -> web.Response:
        pods = self.api.registry.get("", "v1", "pods")
        assert pods is not None  # the core types are always registered
        text = cadvisor.render(self.api.store.list(pods.key), self.api.clock.now())
        return web.Response(text=text, headers={"Content-Type": cadvisor.CONTENT_TYPE})

    def _openapi(self, request: web.Request, path: str) -> web.Response:
        if path == "/openapi/v2":
            if "protobuf" in request.headers.get("Accept", ""):
                # An empty protobuf message is a valid (empty) OpenAPI v2 Document.
                return web.Response(body=b"", content_type=openapi.V2_PROTOBUF)
            return _json(openapi.v2_json())
        if path == "/openapi/v3":
            return _json(openapi.v3_root(self.api.registry))
        parts = path.split("/")[3:]
        if len(parts) == 2 and parts[0] == "api":
            doc = openapi.v3_group_version(self.api.registry, "", parts[1])
        elif len(parts) == 3 and parts[0] == "apis":
            doc = openapi.v3_group_version(self.api.registry, parts[1], parts[2])
        else:
            doc = None
        if doc is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return _json(doc)

    def _route(self, group: str, version: str, rest: list[str]) -> Route:
        namespace = ""
        if (
            rest[0] == "namespaces"
            and len(rest) >= 3
            and self.api.registry.get(group, version, rest[2]) is not None
        ):
            rt = self.api.registry.get(group, version, rest[2])
            assert rt is not None
            if rt.namespaced:
                namespace, rest = rest[1], rest[2:]
        rt = self.api.resource(group, version, rest[0])
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        if len(rest) > 3 or (sub and sub not in rt.subresources):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return Route(rt, namespace, name, sub)

    # ----------------------------------------------------------------- resources

    async def _resource(
        self, request: web.Request, route: Route, watch_path: bool
    ) -> web.StreamResponse:
        q = request.query
        method = request.method
        dry_run = q.get("dryRun") == "All"
        rt, ns, name, sub = route.rt, route.namespace, route.name, route.subresource
        watching = watch_path or _flag(q.get("watch"))
        verb = _verb(method, bool(name), watching)
        if watching and verb == "watch":
            return await self._watch(request, route)
        writing = verb not in ("get", "list")
        received = datetime.now(UTC)
        if writing:
            auth = request.headers.get("Authorization", "")
            self.requests.add(auth, verb, rt.plural, ns, name, sub)
        try:
            await self.faults.apply(verb, rt, ns, name, sub)
            version_before = self.api.store.resource_version
            with collect_warnings() as warnings:
                status, body = await self._call(request, route, verb, dry_run)
        except ApiError as exc:
            if writing:
                await self._audit(request, route, verb, exc.code, received)
            raise
        if writing:
            self._on_write()
            lost = self.faults.pick_after_commit(verb, rt, ns, name, sub)
            if lost is not None and lost.lag is not None and not dry_run:
                # From the write's own version, or for an answer without one (an eviction's
                # is a Status) from the first after the write began. No await since the
                # store took the write: no watch has sent its event yet.
                lost.lag.start(_written_version(body) or version_before + 1)
            if not dry_run:
                self._record(request, route, verb, status, body, lost is not None)
            # The server's own answer: a lost one was lost after the server logged it.
            await self._audit(request, route, verb, status, received)
            if lost is not None:
                await self.faults.act(lost, rt, name)
        headers = CIMultiDict(("Warning", _warning(w)) for w in warnings)
        if verb in ("get", "list") and tables.wants_table(request.headers.get("Accept", "")):
            body = tables.to_table(
                rt, body, self.api.clock.now(), q.get("includeObject", "Metadata")
            )
        return _json(body, status, headers)

    async def _audit(
        self, request: web.Request, route: Route, verb: str, code: int, received: datetime
    ) -> None:
        if self.audit is None:
            return
        name = route.name
        if not name and verb == "create" and not route.subresource:
            # As the real server: the name the request's object carries (none for
            # generateName), whatever the answer.
            with contextlib.suppress(ApiError):
                sent = await _body(request, optional=True)
                if isinstance(sent, dict):
                    name = str((sent.get("metadata") or {}).get("name") or "")
        sent_lease = None
        if route.rt.plural == "leases" and verb in ("create", "update", "patch"):
            with contextlib.suppress(ApiError):
                sent_lease = await _body(request, optional=True)
        token = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        self.audit.record(
            verb=verb,
            rt=route.rt,
            namespace=route.namespace,
            name=name,
            subresource=route.subresource,
            user=token or "system:anonymous",
            uri=str(request.rel_url),
            code=code,
            received=received,
            request_object=sent_lease,
        )

    def _record(
        self, request: web.Request, route: Route, verb: str, status: int, body: Any, lost: bool
    ) -> None:
        name = route.name
        if not name and verb == "create" and isinstance(body, dict):
            name = str((body.get("metadata") or {}).get("name") or "")  # generateName
        token = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        self.writes.record(
            verb,
            route.rt,
            route.namespace,
            name,
            route.subresource,
            user=token,
            status=status,
            answer_lost=lost,
        )

    async def _call(
        self, request: web.Request, route: Route, verb: str, dry_run: bool
    ) -> tuple[int, Any]:
        q = request.query
        rt, ns, name, sub = route.rt, route.namespace, route.name, route.subresource
        if sub in ("eviction", "binding") and verb != "create":
            raise method_not_allowed()
        if sub == "scale":
            if verb == "get":
                return 200, self.api.scale(rt, ns, name)
            ctype = request.content_type if verb == "patch" else ""
            return 200, await self.api.set_scale(rt, ns, name, await _body(request), ctype)
        if verb == "get":
            return 200, self.api.get(rt, ns, name)
        if verb == "list":
            limit = int(q["limit"]) if q.get("limit") else None
            return 200, self.api.list(
                rt,
                ns or None,
                q.get("labelSelector"),
                q.get("fieldSelector"),
                limit,
                q.get("continue"),
                copy=False,  # serialised below before anything can change the store
            )
        if verb == "create":
            body = await _body(request)
            if sub == "eviction":
                return 201, await evict(self.api, rt, ns, name, body, dry_run=dry_run)
            if sub == "binding":
                return 201, await self.api.bind(ns, name, body)
            if sub:
                raise method_not_allowed()
            return 201, await self.api.create(
                rt, ns, body, dry_run=dry_run, field_validation=q.get("fieldValidation")
            )
        if verb == "update":
            return 200, await self.api.update(
                rt,
                ns,
                name,
                await _body(request),
                subresource=sub,
                dry_run=dry_run,
                field_validation=q.get("fieldValidation"),
            )
        if verb == "patch":
            ctype = request.content_type
            if ctype == patch.APPLY_PATCH:
                raise ApiError(
                    415,
                    "UnsupportedMediaType",
                    "server-side apply is not supported by kubesim; use client-side apply",
                )
            return 200, await self.api.patch(
                rt,
                ns,
                name,
                ctype,
                await _body(request),
                subresource=sub,
                dry_run=dry_run,
                field_validation=q.get("fieldValidation"),
            )
        if verb == "delete":
            options = await _body(request, optional=True) or {}
            if q.get("propagationPolicy"):
                options["propagationPolicy"] = q["propagationPolicy"]
            return 200, await self.api.delete(rt, ns, name, options, dry_run=dry_run)
        if verb == "deletecollection":
            listed = self.api.list(rt, ns or None, q.get("labelSelector"), q.get("fieldSelector"))
            for item in listed["items"]:
                await self.api.delete(rt, ns, item["metadata"]["name"], dry_run=dry_run)
            return 200, listed
        raise method_not_allowed()

    # ----------------------------------------------------------------- watch

    async def _watch(self, request: web.Request, route: Route) -> web.StreamResponse:
        q = request.query
        rt, ns = route.rt, route.namespace
        labels = parse_label_selector(q.get("labelSelector"))
        fields = parse_field_selector(q.get("fieldSelector"), rt.plural)
        if route.name:
            name_filter = parse_field_selector(f"metadata.name={route.name}", rt.plural)
            base_fields = fields
            fields = lambda obj: base_fields(obj) and name_filter(obj)  # noqa: E731
        translate = self.api.watch_filter(rt, ns or None, labels, fields)
        bookmarks = _flag(q.get("allowWatchBookmarks"))
        timeout = float(q["timeoutSeconds"]) if q.get("timeoutSeconds") else None
        rv_text = q.get("resourceVersion", "")
        initial = _flag(q.get("sendInitialEvents"))

        response = web.StreamResponse(
            status=200, headers={"Content-Type": JSON, "Transfer-Encoding": "chunked"}
        )
        await response.prepare(request)

        as_table = tables.wants_table(request.headers.get("Accept", ""))
        include_object = q.get("includeObject", "Metadata")

        async def send(event_type: str, obj: Any) -> None:
            if as_table and event_type in ("ADDED", "MODIFIED", "DELETED"):
                # kubectl get -w asks for each object as a one-row Table, like a list.
                obj = tables.to_table(rt, obj, self.api.clock.now(), include_object)
            await response.write(orjson.dumps({"type": event_type, "object": obj}) + b"\n")

        try:
            await self.faults.apply("watch", rt, ns, route.name)
            if rv_text in ("", "0") or initial:
                listed = self.api.list(rt, ns or None, labels, None)
                start_rv = int(listed["metadata"]["resourceVersion"])
                backlog, sub = self.api.store.subscribe(start_rv, rt.key)
                snapshot = [("ADDED", o) for o in listed["items"] if fields(o)]
            else:
                try:
                    since = int(rv_text)
                except ValueError as exc:
                    raise bad_request(f"invalid resource version: {rv_text}") from exc
                backlog, sub = self.api.store.subscribe(since, rt.key)
                snapshot = []
        except ApiError as exc:
            await send("ERROR", exc.status())
            return response

        try:
            for event_type, obj in snapshot:
                await send(event_type, obj)
            if initial and bookmarks:
                await send("BOOKMARK", self._bookmark(rt, {"k8s.io/initial-events-end": "true"}))
            await self._stream(sub.queue, backlog, translate, send, bookmarks, timeout, rt)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            sub.close()
        with contextlib.suppress(ConnectionResetError):
            await response.write_eof()
        return response

    async def _stream(
        self,
        queue: asyncio.Queue[WatchEvent | None],
        backlog: list[WatchEvent],
        translate: Callable[[WatchEvent], tuple[str, Any] | None],
        send: Callable[[str, Any], Any],
        bookmarks: bool,
        timeout: float | None,
        rt: ResourceType,
    ) -> None:
        for event in backlog:
            out = translate(event)
            if out:
                await self.faults.deliverable(event, rt)
                await send(*out)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout if timeout else None
        while True:
            wait = self.bookmark_interval if bookmarks else None
            if deadline is not None:
                left = deadline - loop.time()
                if left <= 0:
                    break
                wait = min(wait, left) if wait else left
            try:
                event = await asyncio.wait_for(queue.get(), wait)
            except TimeoutError:
                if bookmarks:
                    await send("BOOKMARK", self._bookmark(rt))
                continue
            if event is None:
                return
            out = translate(event)
            if out:
                await self.faults.deliverable(event, rt)
                await send(*out)
        if bookmarks:
            await send("BOOKMARK", self._bookmark(rt))

    def _bookmark(
        self, rt: ResourceType, annotations: dict[str, str] | None = None
    ) -> dict[str, Any]:
        meta: dict[str, Any] = {"resourceVersion": str(self.api.store.resource_version)}
        if annotations:
            meta["annotations"] = annotations
        return {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta}


def _warning(text: str) -> str:
    """One `Warning` header value (RFC 7234 warn-code 299, the text quoted and escaped)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'299 - "{escaped}"'


def _written_version(body: Any) -> int | None:
    """The resourceVersion of the object a write answered with, if it answered with one."""
    meta = body.get("metadata") if isinstance(body, dict) else None
    version = meta.get("resourceVersion") if isinstance(meta, dict) else None
    return int(version) if isinstance(version, str) and version.isdigit() else None


def _flag(value: str | None) -> bool:
    """Query booleans: clients send `true`, `True` or `1`."""
    return (value or "").lower() in ("true", "1")


def _verb(method: str, named: bool, watching: bool) -> str:
    if method == "GET":
        if watching:
            return "watch"
        return "get" if named else "list"
    if method == "POST":
        return "create"
    if method == "PUT" and named:
        return "update"
    if method == "PATCH" and named:
        return "patch"
    if method == "DELETE":
        return "delete" if named else "deletecollection"
    raise method_not_allowed()


async def _body(request: web.Request, optional: bool = False) -> Any:
    raw = await request.read()
    if not raw:
        if optional:
            return None
        raise bad_request("the request body is empty")
    if request.content_type == protowire.CONTENT_TYPE:
        try:
            return protoschema.decode_object(raw)
        except protowire.DecodeError as exc:
            raise ApiError(
                415,
                "UnsupportedMediaType",
                f"kubesim could not decode this protobuf body: {exc}. kubesim reads protobuf "
                "only for what kubectl's typed commands send; send the object as JSON or YAML "
                "instead, for example with `kubectl create -f FILE`",
            ) from exc
    try:
        if request.content_type in ("application/yaml", patch.APPLY_PATCH):
            return yaml.safe_load(raw)
        return orjson.loads(raw)
    except (orjson.JSONDecodeError, yaml.YAMLError) as exc:
        raise bad_request(f"the body of the request is not valid JSON: {exc}") from exc
