"""Feed a ClusterView from the API server: list, then watch, one informer per resource.

Used by `kerf webhook` (and later the reconciler) when it runs without `--state-dir`.
Each `Informer` lists its resource in pages of `LIST_PAGE_SIZE` objects (`limit` and
`continue`, as client-go does), applies every object to the view as its page arrives,
then watches from the list's resourceVersion. A watch that ends normally resumes from the last version it
saw (events and bookmarks move it); a 410 Gone means that version is no longer served, so
the resource is listed again and objects that vanished meanwhile are deleted from the
view. Any other failure backs off exponentially, with jitter, and retries.

An API server that cannot be reached is not said by each informer: every request tells
the process's `app.kube.reachability.Reachability` how it went, which says the outage once,
then at most once a minute, then its end. A watch that breaks after it was answered is
routine (the next request says whether the server is still there). Other failures (403,
500, a bad object) are about one resource and are logged by its informer.

Responses are read raw (`_preload_content=False`) and parsed with orjson: it is faster
than the client's models and keeps the camelCase keys the view (and the YAML state-dir
path) expect. A kerf custom resource that does not validate is logged and left out of
the view; it never stops the feed.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml
from kubernetes_asyncio import client, config

from app.kube.errors import ApiStatusError, status_error
from app.kube.reachability import (
    OUTAGE_STATUSES,
    Reachability,
    describe,
    is_transport_error,
    reachability_of,
)
from app.kube.session import settle_environment
from app.model.crd import (
    ACTED_ON_KINDS,
    API_VERSION,
    CRD_KIND,
    CRD_SELECTOR,
    InvalidObject,
    KerfResource,
    object_label,
    parse_object,
    plural,
)
from app.model.recommendations import SOURCE_LABEL
from app.model.records import record_from_api
from app.runtime.clock import Clock, utc_now
from app.store.slim import kerf_metadata, kerf_object
from app.store.view import ClusterView, ObjectKey, object_key

logger = logging.getLogger("kerf.informer")

ListCall = Callable[..., Awaitable[Any]]
Lister = Callable[[client.ApiClient], ListCall]
Sleep = Callable[[float], Awaitable[None]]

#: Server-side watch timeout, drawn per watch so that replicas do not reconnect together.
WATCH_TIMEOUT_S = (300.0, 600.0)
#: A watch that stays silent this long past its own timeout is a dead connection.
WATCH_READ_GRACE_S = 30.0
LIST_TIMEOUT = aiohttp.ClientTimeout(total=120, sock_connect=10)
#: Objects per list page, as client-go's reflectors ask: a large cluster's pods arrive in
#: many small responses rather than one of ~100 MB (0 or None: one unpaged list).
LIST_PAGE_SIZE = 500
#: How often a resource that the cluster does not serve (a CRD not installed) is asked again.
ABSENT_RECHECK_S = 60.0
#: how often a stream of watch events is told as the server's contact (seconds)
EVENT_CONTACT_S = 0.5
SOURCE = "cluster"


@dataclass(frozen=True, slots=True)
class Resource:
    """One watched resource: how to list it and what its objects are."""

    kind: str
    api_version: str
    lister: Lister
    label_selector: str | None = None
    field_selector: str | None = None
    #: not served by every cluster (a third-party CRD): a 404 counts as an empty list
    optional: bool = False

    @property
    def is_kerf(self) -> bool:
        """Objects are kerf custom resources, validated into models."""
        return self.api_version == API_VERSION


def _typed(api: type, method: str) -> Lister:
    return lambda api_client: getattr(api(api_client), method)


def _custom(group: str, version: str, resource_plural: str) -> Lister:
    return lambda api_client: functools.partial(
        client.CustomObjectsApi(api_client).list_cluster_custom_object,
        group,
        version,
        resource_plural,
    )


def kubex_configmap(namespace: str, name: str) -> Resource:
    """Kubex's recommendation ConfigMap, watched by name: Kubex's chart does not label it."""
    return Resource(
        "ConfigMap",
        "v1",
        lambda api_client: functools.partial(
            client.CoreV1Api(api_client).list_namespaced_config_map, namespace
        ),
        field_selector=f"metadata.name={name}",
    )


def with_kubex(view: ClusterView, resources: Sequence[Resource]) -> list[Resource]:
    """`resources`, and the view's Kubex ConfigMap when they read the recommendation
    ConfigMaps: whoever reads kerf's rows reads Kubex's too."""
    if not any(r.kind == "ConfigMap" for r in resources):
        return list(resources)
    return [*resources, kubex_configmap(*view.kubex_source)]


def kerf_resources(kinds: Sequence[str] = ACTED_ON_KINDS) -> list[Resource]:
    """kerf custom resource kinds: by default every kind kerf acts on
    (`app.model.crd.ACTED_ON_KINDS`); the reconciler reads `STORED_KINDS` too."""
    group, version = API_VERSION.split("/")
    return [Resource(kind, API_VERSION, _custom(group, version, plural(kind))) for kind in kinds]


#: kerf's own CRDs, by their label: one being deleted means kerf is being uninstalled, and
#: the reconciler stands down (app/policy/uninstall.py).
KERF_CRDS = Resource(
    CRD_KIND,
    "apiextensions.k8s.io/v1",
    _typed(client.ApiextensionsV1Api, "list_custom_resource_definition"),
    label_selector=CRD_SELECTOR,
)

#: What the admission decision reads (SPEC §7 cluster view, issue 4 part 3).
WEBHOOK_RESOURCES: tuple[Resource, ...] = (
    Resource("Namespace", "v1", _typed(client.CoreV1Api, "list_namespace")),
    Resource("Pod", "v1", _typed(client.CoreV1Api, "list_pod_for_all_namespaces")),
    Resource("Node", "v1", _typed(client.CoreV1Api, "list_node")),
    Resource("LimitRange", "v1", _typed(client.CoreV1Api, "list_limit_range_for_all_namespaces")),
    Resource(
        "ResourceQuota", "v1", _typed(client.CoreV1Api, "list_resource_quota_for_all_namespaces")
    ),
    Resource(
        "ConfigMap",
        "v1",
        _typed(client.CoreV1Api, "list_config_map_for_all_namespaces"),
        label_selector=f"{SOURCE_LABEL}=true",
    ),
    Resource(
        "ReplicaSet", "apps/v1", _typed(client.AppsV1Api, "list_replica_set_for_all_namespaces")
    ),
    Resource(
        "Deployment", "apps/v1", _typed(client.AppsV1Api, "list_deployment_for_all_namespaces")
    ),
    Resource(
        "StatefulSet", "apps/v1", _typed(client.AppsV1Api, "list_stateful_set_for_all_namespaces")
    ),
    Resource(
        "DaemonSet", "apps/v1", _typed(client.AppsV1Api, "list_daemon_set_for_all_namespaces")
    ),
    Resource("Job", "batch/v1", _typed(client.BatchV1Api, "list_job_for_all_namespaces")),
    Resource("CronJob", "batch/v1", _typed(client.BatchV1Api, "list_cron_job_for_all_namespaces")),
    Resource(
        "HorizontalPodAutoscaler",
        "autoscaling/v2",
        _typed(client.AutoscalingV2Api, "list_horizontal_pod_autoscaler_for_all_namespaces"),
    ),
    # VPAs hold the values they set (VPACoupled); many clusters lack the CRD.
    Resource(
        "VerticalPodAutoscaler",
        "autoscaling.k8s.io/v1",
        _custom("autoscaling.k8s.io", "v1", "verticalpodautoscalers"),
        optional=True,
    ),
    # Argo Rollouts own ReplicaSets like Deployments do; most clusters lack the CRD.
    Resource(
        "Rollout",
        "argoproj.io/v1alpha1",
        _custom("argoproj.io", "v1alpha1", "rollouts"),
        optional=True,
    ),
    *kerf_resources(),
)


class Absent(Exception):
    """An optional resource is not served by this cluster."""


async def _lines(stream: aiohttp.StreamReader) -> AsyncIterator[bytes]:
    """The newline-delimited events of a watch body.

    `StreamReader.readline` refuses lines over 128 KiB, and one recommendations ConfigMap
    can be larger than that; this splits chunks of any size itself.
    """
    buffer = bytearray()
    scanned = 0
    async for chunk in stream.iter_any():
        buffer += chunk
        while (end := buffer.find(b"\n", scanned)) >= 0:
            line = bytes(buffer[:end])
            del buffer[: end + 1]
            scanned = 0
            if line.strip():
                yield line
        scanned = len(buffer)
    if buffer.strip():
        yield bytes(buffer)


class ObjectKeys:
    """A set of object keys kept as names by kind and namespace: an informer's objects in
    the view, which a relist that no longer holds them deletes. (As a set of (kind,
    namespace, name) tuples they weighed ~124 bytes an object, 13 MiB at 25,000
    workloads; as a name in its namespace's set, ~60.)"""

    def __init__(self) -> None:
        self._names: dict[tuple[str, str], set[str]] = {}

    def add(self, key: ObjectKey) -> None:
        """Add a key."""
        self._names.setdefault(key[:2], set()).add(key[2])

    def discard(self, key: ObjectKey) -> None:
        """Remove a key if present."""
        names = self._names.get(key[:2])
        if names is not None:
            names.discard(key[2])
            if not names:
                del self._names[key[:2]]

    def __contains__(self, key: ObjectKey) -> bool:
        return key[2] in self._names.get(key[:2], ())

    def __iter__(self) -> Iterator[ObjectKey]:
        for (kind, namespace), names in self._names.items():
            for name in names:
                yield kind, namespace, name

    def __len__(self) -> int:
        return sum(len(names) for names in self._names.values())

    def retain(self, kept: ObjectKeys) -> list[ObjectKey]:
        """Keep only the keys also in `kept`; returns those removed."""
        gone = [key for key in self if key not in kept]
        for key in gone:
            self.discard(key)
        return gone


class Backoff:
    """Exponential delays with equal jitter (half fixed, half random), so the replicas that
    failed together do not all retry together."""

    def __init__(
        self, base_s: float = 0.5, cap_s: float = 30.0, rng: random.Random | None = None
    ) -> None:
        self.base_s = base_s
        self.cap_s = cap_s
        self.attempt = 0
        self._rng = rng or random.Random()

    def next_delay(self) -> float:
        """The next delay (seconds); each call doubles the ceiling up to `cap_s`."""
        delay: float = min(self.cap_s, self.base_s * 2 ** min(self.attempt, 30))
        self.attempt += 1
        return delay / 2 + self._rng.uniform(0, delay / 2)

    def reset(self) -> None:
        """The last call worked: start again from `base_s`."""
        self.attempt = 0


class Informer:
    """Keeps one resource's objects in the view: list, watch, resume, relist on 410."""

    def __init__(
        self,
        resource: Resource,
        api_client: client.ApiClient,
        view: ClusterView,
        *,
        on_contact: Callable[[Informer], None] | None = None,
        on_page: Callable[[], object] | None = None,
        sleep: Sleep = asyncio.sleep,
        clock: Clock = utc_now,
        page_size: int | None = LIST_PAGE_SIZE,
        reachability: Reachability | None = None,
    ) -> None:
        self.resource = resource
        self.view = view
        self.page_size = page_size
        self._call = resource.lister(api_client)
        #: the process's voice about the API server (app.kube.reachability)
        self.reachability = reachability or reachability_of(api_client)
        self._on_contact = on_contact
        self._on_page = on_page
        self._sleep = sleep
        self._clock = clock
        self._rng = random.Random()
        self.backoff = Backoff(rng=self._rng)
        #: the version to resume watching from; None means "list first"
        self.resource_version: str | None = None
        #: the resource has been listed at least once (its part of the view is complete)
        self.listed = False
        #: when the server last confirmed this resource's state (list, event, bookmark)
        self.last_contact: datetime | None = None
        #: how long the last complete list took (seconds), for start-up diagnostics
        self.list_seconds: float | None = None
        #: why the last list or watch failed (None once a list succeeds)
        self.last_error: str | None = None
        #: the last failure's HTTP status, when it had one
        self.last_status: int | None = None
        self._keys = ObjectKeys()
        #: whether the view keeps an object of (kind, namespace): one of kerf's it does not
        #: keep is handed over unparsed, to be dropped (a sharded replica's foreign records)
        self.keeps: Callable[[str, str], bool] = lambda kind, namespace: True
        #: when the request under way was sent (Reachability.now), and whether a watch's
        #: answer had begun (a break after that is routine)
        self._sent = 0.0
        self._streaming = False
        #: when a watch event was last told as a contact (monotonic)
        self._event_contact = -EVENT_CONTACT_S

    async def run(self) -> None:
        """List and watch until cancelled; failures are logged and retried, never raised."""
        while True:
            try:
                if self.resource_version is None:
                    await self._list()
                await self._watch()
            except asyncio.CancelledError:
                raise
            except Absent:
                await self._sleep(ABSENT_RECHECK_S)
            except ApiStatusError as exc:
                if exc.code == 410:  # routine: that version is no longer served, list again
                    self.resource_version = None
                    await self._back_off(exc, logging.INFO)
                else:
                    await self._back_off(exc)
            except Exception as exc:  # transport, bad JSON: anything but cancellation retries
                await self._back_off(exc)

    async def list_once(self) -> None:
        """List the resource into the view once, no watch, no retry (a one-off reader such
        as `kerf report`): an API error raises; a resource the cluster does not serve is
        empty."""
        with contextlib.suppress(Absent):
            await self._list()

    async def _back_off(self, exc: Exception, level: int = logging.WARNING) -> None:
        delay = self.backoff.next_delay()
        self.last_error = describe(exc)
        self.last_status = exc.code if isinstance(exc, ApiStatusError) else None
        if self._streaming and is_transport_error(exc):
            level = logging.DEBUG  # a watch broke: the next request tells more
        elif self.reachability.failed(exc, self._sent) or self.reachability.quiet:
            level = logging.DEBUG  # said once for the whole process, or by the command
        self._streaming = False
        logger.log(
            level,
            "%s: list/watch failed (%s: %s); retrying in %.1fs",
            self.resource.kind,
            type(exc).__name__,
            exc,
            delay,
        )
        await self._sleep(delay)

    def _kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"_preload_content": False}
        if self.resource.label_selector:
            kwargs["label_selector"] = self.resource.label_selector
        if self.resource.field_selector:
            kwargs["field_selector"] = self.resource.field_selector
        return kwargs

    async def _list(self) -> None:
        """List the resource into the view, in pages of `page_size` objects.

        Each page is applied as it arrives, so neither a 100 MB response nor its parsed
        form is ever held whole, and the event loop gets a turn between pages. Objects
        the list no longer holds are deleted once the last page is in. A continuation
        the server has expired (410) raises like any 410: the list starts over.
        """
        started = time.monotonic()
        listed = ObjectKeys()
        token: str | None = None
        while True:
            doc = await self._list_page(token)
            with self.view.lock:
                for item in doc.pop("items", None) or []:
                    listed.add(self._upsert(item))
            # The view holds what it needs; the page itself is gone before on_page runs.
            if self._on_page is not None:
                self._on_page()
            token = (doc.get("metadata") or {}).get("continue") or None
            if token is None:
                break
        with self.view.lock:
            for key in self._keys.retain(listed):
                self.view.delete(*key)
        self.listed = True
        self.last_error = self.last_status = None
        self.resource_version = str(doc["metadata"]["resourceVersion"])
        self.list_seconds = time.monotonic() - started
        logger.info(
            "%s: listed %d objects in %.2fs", self.resource.kind, len(listed), self.list_seconds
        )
        self.backoff.reset()
        self._contact()

    async def _list_page(self, token: str | None) -> dict[str, Any]:
        kwargs = self._kwargs()
        if self.page_size:
            kwargs["limit"] = self.page_size
        if token:
            kwargs["_continue"] = token
        response = await self._send(**kwargs, _request_timeout=LIST_TIMEOUT)
        try:
            body = await response.read()
        finally:
            response.release()
        if response.status == 404 and self.resource.optional:
            self._clear()
            self._contact()
            raise Absent(self.resource.kind)
        if response.status != 200:
            raise status_error(response.status, body)
        doc: dict[str, Any] = orjson.loads(body)
        return doc

    def _clear(self) -> None:
        """The resource is not served: the view holds none of its objects."""
        with self.view.lock:
            for key in self._keys.retain(ObjectKeys()):
                self.view.delete(*key)
        self.listed = True

    async def _watch(self) -> None:
        timeout_s = self._rng.uniform(*WATCH_TIMEOUT_S)
        response = await self._send(
            **self._kwargs(),
            watch=True,
            allow_watch_bookmarks=True,
            resource_version=self.resource_version,
            timeout_seconds=max(1, int(timeout_s)),
            _request_timeout=aiohttp.ClientTimeout(
                sock_connect=10, sock_read=timeout_s + WATCH_READ_GRACE_S
            ),
        )
        events = 0
        try:
            if response.status != 200:
                raise status_error(response.status, await response.read())
            self._streaming = True
            async for line in _lines(response.content):
                self._event(orjson.loads(line))
                events += 1
        finally:
            response.close()
        self._streaming = False
        self._contact()  # a normal end: the next watch resumes from resource_version
        if not events:  # a server or proxy that closes watches at once is not hammered
            await self._sleep(self.backoff.next_delay())

    async def _send(self, **kwargs: Any) -> Any:
        """One list or watch request; its answer (or its absence) is told to the
        process's Reachability by `_back_off`, and here."""
        self._sent = self.reachability.now()
        self._streaming = False
        response = await self._call(**kwargs)
        if response.status not in OUTAGE_STATUSES:
            self.reachability.answered(self._sent)
        return response

    def _event(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        obj = event.get("object")
        if not isinstance(obj, dict):
            raise ValueError(f"watch event without an object: {str(event)[:200]}")
        if kind == "ERROR":
            raise status_error(500, obj)
        if kind in ("ADDED", "MODIFIED"):
            self._upsert(obj)
        elif kind == "DELETED":
            key = object_key(self._typed(obj))
            self.view.delete(*key)
            self._keys.discard(key)
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if version:
            self.resource_version = str(version)
        self.backoff.reset()
        # Each contact asks every informer of the feed for its last one: told once per
        # EVENT_CONTACT_S of a stream of events, which the sync age then lags by at most.
        now = time.monotonic()
        if now - self._event_contact >= EVENT_CONTACT_S:
            self._event_contact = now
            self._contact()

    def _typed(self, obj: dict[str, Any]) -> dict[str, Any]:
        # List items of built-in kinds come without kind and apiVersion; the view keys on kind.
        obj.setdefault("kind", self.resource.kind)
        obj.setdefault("apiVersion", self.resource.api_version)
        # Server-side apply bookkeeping, often a third of an object: nothing kerf reads.
        metadata = obj.get("metadata")
        if isinstance(metadata, dict):
            metadata.pop("managedFields", None)
        return obj

    def _upsert(self, raw: dict[str, Any]) -> ObjectKey:
        """Apply one object; an object that cannot be used is removed from the view."""
        key = object_key(self._typed(raw))
        parse = self.resource.is_kerf and self.keeps(key[0], key[1])
        try:
            # The view projects plain objects itself; kerf's are projected before they
            # become models (app/store/slim.py). ClusterView.apply's annotation leaves the models
            # out until view.py's restructure lands.
            self.view.apply(self._parsed(key[0], raw) if parse else raw)  # type: ignore[arg-type]
        except InvalidObject as exc:
            logger.warning("skipping an invalid object: %s", exc)
        except Exception:  # one odd object must not stop the resource's feed
            logger.exception("skipping %s: the view cannot use it", object_label(raw))
        else:
            self._keys.add(key)
            return key
        if key in self._keys:  # its last valid version no longer reflects the cluster
            self.view.delete(*key)
            self._keys.discard(key)
        return key

    @staticmethod
    def _parsed(kind: str, raw: dict[str, Any]) -> KerfResource:
        """One of kerf's objects as the view keeps it; a record packed as it came
        (`record_from_api`), not parsed whole and packed from its parse."""
        if kind == "RightsizingRecommendation":
            return record_from_api(raw, kerf_metadata(raw), SOURCE)
        return parse_object(kerf_object(raw), SOURCE)

    def _contact(self) -> None:
        self.last_contact = self._clock()
        if self._on_contact is not None:
            self._on_contact(self)


class ClusterFeed:
    """All the informers of one view; the view is synced once every resource is listed.

    `view.synced_at` then follows the oldest of the informers' last contacts with the
    server (lists, events and bookmarks), so the webhook's sync-age metric grows when a
    watch is broken and stays small while every watch is healthy.

    `on_synced` is called once, when the view first becomes synced, before
    `wait_synced` returns and before any other task runs: the place for one-off work on
    the loaded view, such as `app.runtime.heap.freeze_loaded_state`. Later relists do not call
    it again. `on_initial_page` is called after each list page applied before that
    (`app.runtime.heap.freeze_page`). `page_size` is the informers' list page size
    (`LIST_PAGE_SIZE`).
    """

    def __init__(
        self,
        api_client: client.ApiClient,
        view: ClusterView,
        resources: Sequence[Resource] = WEBHOOK_RESOURCES,
        *,
        sleep: Sleep = asyncio.sleep,
        clock: Clock = utc_now,
        on_synced: Callable[[], object] | None = None,
        on_initial_page: Callable[[], object] | None = None,
        page_size: int | None = LIST_PAGE_SIZE,
        reachability: Reachability | None = None,
    ) -> None:
        self.view = view
        #: shared by every informer (and every other request over `api_client`)
        self.reachability = reachability or reachability_of(api_client)
        #: when an initial list last brought a page (Reachability.now): a first sync that
        #: is slow but moving is not a server that cannot be reached (app.kube.firstsync)
        self.progress_at = self.reachability.now()
        self._synced = asyncio.Event()
        self._on_synced = on_synced
        self._on_initial_page = on_initial_page
        self.informers = [
            Informer(
                resource,
                api_client,
                view,
                on_contact=self._contact,
                on_page=self._page,
                sleep=sleep,
                clock=clock,
                page_size=page_size,
                reachability=self.reachability,
            )
            for resource in with_kubex(view, resources)
        ]

    async def run(self) -> None:
        """Run every informer until cancelled."""
        async with asyncio.TaskGroup() as group:
            for informer in self.informers:
                group.create_task(informer.run(), name=f"informer {informer.resource.kind}")

    async def wait_synced(self) -> None:
        """Return once every resource has been listed into the view."""
        await self._synced.wait()

    def unlisted(self) -> list[Informer]:
        """The informers whose resource has not been listed yet."""
        return [i for i in self.informers if not i.listed]

    def _page(self) -> None:
        if self._synced.is_set():
            return
        self.progress_at = self.reachability.now()
        if self._on_initial_page is not None:
            self._on_initial_page()

    def _contact(self, _: Informer) -> None:
        contacts = [i.last_contact for i in self.informers if i.listed]
        if len(contacts) < len(self.informers):
            return
        self.view.mark_synced(min(c for c in contacts if c is not None))
        if not self._synced.is_set():
            self._synced.set()
            if self._on_synced is not None:
                self._on_synced()


async def api_client_from_config(kubeconfig: str | Path | None = None) -> client.ApiClient:
    """An ApiClient the way kubectl finds its cluster: `kubeconfig`, else `$KUBECONFIG`,
    else the pod's service account when running in a cluster, else ~/.kube/config."""
    configuration = client.Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG")
    if path is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config(client_configuration=configuration)
    else:
        default = path is None
        path = str(path or Path.home() / ".kube" / "config")
        if default and not Path(path).is_file():
            # One line for the user, not the client library's traceback.
            raise config.ConfigException(
                f"no cluster to talk to: no --kubeconfig, $KUBECONFIG is unset, this is not a "
                f"pod (no KUBERNETES_SERVICE_HOST) and {path} does not exist"
            )
        try:
            await config.load_kube_config(config_file=path, client_configuration=configuration)
        except yaml.YAMLError as exc:
            reason = " ".join(str(exc).split())
            raise config.ConfigException(
                f"{path} is not a kubeconfig (not YAML): {reason}"
            ) from None
    return settle_environment(client.ApiClient(configuration))
