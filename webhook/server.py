"""The FastAPI app: POST /mutate, GET /healthz, /readyz, /metrics.

The request path never talks to the API server: the decision comes from `admit` over the
in-memory cluster view. Whatever goes wrong after the body was read as JSON, the answer is
`allowed: true` without a patch (fail open), because a webhook that blocks pods takes the
cluster down with it; the failure is counted, logged with the request uid and returned as
a warning.

The decision runs on the event loop, not in a worker thread: it is tens of microseconds
of in-memory work, and handing it to a thread and back cost more than the decision itself
(threads also fight the event loop for the GIL under load). The deadline is therefore
checked when the decision returns: a decision that took longer is not applied, the pod is
admitted unchanged. See docs/decisions.md ("Admission deadline") for why this is enough.
"""

from __future__ import annotations

import inspect
import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import orjson
from fastapi import FastAPI
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.responses import Response
from starlette.routing import Route

from app.decide.admission import memo_counts
from app.model.quantities import QuantityError
from app.runtime.clock import Clock, utc_now
from webhook.bounds import DEFAULT_BOUNDS, RequestBounds, over_bounds
from webhook.endpoint import PostEndpoint, Reply
from webhook.finished import FinishedAnswer, FinishedAnswers
from webhook.limits import (
    DEFAULT_READ_TIMEOUT_S,
    MAX_BODY_BYTES,
    MAX_BODY_VALUES,
    BodyTimeout,
    BodyTooLarge,
    ClientGone,
    TooManyValues,
    declared_length,
    read_body,
    too_many_values,
)
from webhook.logs import LOGGER_NAME, DecisionLog, bounded, identifier, render_decided
from webhook.metrics import WebhookMetrics, create_metrics
from webhook.review import (
    API_VERSION_V1,
    AdmissionRequest,
    BodyError,
    ReviewError,
    load_json,
    parse_review,
    pod_shape_problem,
    review_response,
)

if TYPE_CHECKING:
    from starlette.types import Receive, Scope

    from app.decide.admission import AdmissionResult
    from app.store.view import ClusterView

    Admit = Callable[[ClusterView, Mapping[str, Any], str, datetime], AdmissionResult]

JSON = "application/json"


class DeadlineExceeded(Exception):
    """The decision took longer than the handler deadline; its result is not used."""


class _Refusal(Exception):
    """A request answered without a decision; `reply` is the answer (4xx)."""

    def __init__(self, reply: Reply):
        super().__init__(reply.status)
        self.reply = reply


# Not frozen, for the reason `AdmissionRequest` is not: one is built per request.
@dataclass(slots=True)
class _Answer:
    """What one /mutate request produced, for the response, the metrics and the log."""

    body: bytes
    outcome: str
    reason: str | None
    message: str
    #: the decision and its finished patch and log fields; None without a decision
    finished: FinishedAnswer | None = None


#: Recent FastAPI versions check on every request whether OpenTelemetry providers are
#: configured (a third of the framework's cost per request with FastAPI 0.165);
#: kerf reports through Prometheus and its decision lines, so the check is turned off
#: where FastAPI has it.
_NO_TELEMETRY: dict[str, Any] = (
    {"telemetry": {"tracing": False, "metrics": False, "logs": False}}
    if "telemetry" in inspect.signature(FastAPI.__init__).parameters
    else {}
)

#: AdmissionReview warnings are shown to whoever created the pod; keep them one line.
MAX_WARNING = 240


def create_app(
    view: ClusterView,
    *,
    admit: Admit | None = None,
    deadline_s: float = 1.0,
    clock: Clock = utc_now,
    max_body_bytes: int = MAX_BODY_BYTES,
    max_body_values: int = MAX_BODY_VALUES,
    decision_log: DecisionLog | None = None,
    bounds: RequestBounds = DEFAULT_BOUNDS,
    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S,
    reachable: Callable[[], bool] = lambda: True,
) -> FastAPI:
    """Build the webhook app over `view`.

    `admit` defaults to `app.decide.admission.admit_pod`, the one admission decision of kerf;
    tests pass a stand-in. `deadline_s` bounds one decision; past it the pod is allowed
    unchanged. `clock` supplies the decision time. Decisions are written to
    `decision_log` (JSON lines on stderr by default). A pod over `bounds` is admitted
    unchanged without a decision; a body not read within `read_timeout_s` gets 408, one
    over `max_body_bytes` or holding more than `max_body_values` JSON values gets 413.
    `/readyz` answers 503 until the view is synced and while `reachable()` is false (an
    API server outage, app/kube/reachability.py).

    `app.state.refuse(status, reason, message)` counts and logs a request answered
    without a decision; the connection guard (`webhook.connections`) reports through it.
    """
    if admit is None:
        from app.decide.admission import admit_pod

        admit = admit_pod
    decide: Admit = admit
    logger = logging.getLogger(LOGGER_NAME)
    decisions = decision_log if decision_log is not None else DecisionLog()
    finished = FinishedAnswers()

    def sync_age() -> float:
        # The view may record when it was last fully in sync; without it the age is unknown.
        synced_at = getattr(view, "synced_at", None)
        if not view.synced or not isinstance(synced_at, datetime):
            return math.nan
        return max(0.0, (clock() - synced_at).total_seconds())

    metrics: WebhookMetrics = create_metrics(sync_age, lambda: memo_counts(view))

    # No OpenAPI schema and no docs pages: the API server needs neither, and they tell
    # anyone who can reach the port more than they need to know.
    api = FastAPI(
        title="kerf webhook", docs_url=None, redoc_url=None, openapi_url=None, **_NO_TELEMETRY
    )
    api.state.metrics = metrics

    def refuse(status: int | None, reason: str, message: str) -> None:
        metrics.count_refused(reason)
        decisions.refused(status, reason, message)

    api.state.refuse = refuse

    def refused(status: int, reason: str, message: str) -> Reply:
        refuse(status, reason, message)
        # The rest of a refused body may still be on its way: do not read on after it.
        return Reply(orjson.dumps({"error": message}), status, close=status in (408, 413))

    async def body_of(scope: Scope, receive: Receive) -> Any:
        """The parsed body; `_Refusal` carries the answer when there is none to decide."""
        try:
            body = await read_body(
                receive, declared_length(scope["headers"]), max_body_bytes, read_timeout_s
            )
            if too_many_values(body, max_body_values):
                raise TooManyValues(max_body_values)
            return load_json(body)
        except BodyTooLarge as exc:
            raise _Refusal(refused(413, "TooLarge", str(exc))) from None
        except TooManyValues as exc:
            raise _Refusal(refused(413, "TooManyValues", str(exc))) from None
        except BodyTimeout as exc:
            raise _Refusal(refused(408, "ReadTimeout", str(exc))) from None
        except BodyError as exc:
            raise _Refusal(refused(400, "NotJSON", str(exc))) from None
        except ClientGone:
            # Nobody is left to read an answer; uvicorn drops it. Unhandled, the client's
            # disconnect reached uvicorn as a 500 with a traceback.
            refuse(None, "ClientGone", "the client closed the connection before sending the body")
            raise _Refusal(Reply(b"", 400)) from None

    def fail_open(uid: str, cause: str, message: str, api_version: str = API_VERSION_V1) -> _Answer:
        metrics.count_fail_open(cause)
        warning = bounded(f"kerf admitted the pod unchanged: {message}", MAX_WARNING)
        body = review_response(uid, api_version=api_version, warnings=[warning])
        return _Answer(body, "failopen", cause, message)

    def decide_in_time(request: AdmissionRequest, pod: dict[str, Any]) -> AdmissionResult:
        metadata = pod.get("metadata") or {}
        namespace = request.namespace or metadata.get("namespace") or ""
        started = time.perf_counter()
        result = decide(view, pod, namespace, clock())
        if time.perf_counter() - started > deadline_s:
            raise DeadlineExceeded
        return result

    def answer(request: AdmissionRequest) -> _Answer:
        if not request.is_pod_create:
            body = review_response(request.uid, api_version=request.api_version)
            return _Answer(body, "ignored", None, "not a pod CREATE")
        problem = pod_shape_problem(request.object)
        if problem is not None:
            return fail_open(request.uid, "UnknownShape", problem, request.api_version)
        pod = request.object or {}
        limit = over_bounds(pod, bounds)
        if limit is not None:
            return fail_open(request.uid, "OverLimit", limit, request.api_version)
        try:
            result = decide_in_time(request, pod)
        except DeadlineExceeded:
            message = f"decision exceeded the {deadline_s:g}s deadline"
            return fail_open(request.uid, "Deadline", message, request.api_version)
        except QuantityError:
            # Bad input, not a fault of kerf's: say which kind, never the value.
            message = "a resource quantity of the pod is not a valid Kubernetes quantity"
            return fail_open(request.uid, "InvalidQuantity", message, request.api_version)
        done = finished.answer_for(pod, result)
        warnings: list[str] = []
        if result.outcome == "blocked":
            # SPEC §9: whoever created the pod learns why kerf left it alone.
            reason = f"kerf did not rightsize the pod ({result.reason}): {result.message}"
            warnings.append(bounded(reason, MAX_WARNING))
        body = review_response(
            request.uid, api_version=request.api_version, patch=done.encoded, warnings=warnings
        )
        return _Answer(body, result.outcome, result.reason, result.message, done)

    def record(request: AdmissionRequest | None, uid: str, done: _Answer) -> None:
        metrics.count_request(done.outcome, done.reason or "")
        finished = done.finished
        if finished is not None and request and not request.dry_run:
            for resource, values in finished.values:
                metrics.count_patched(resource, values)
        pod = (request.object or {}) if request else {}
        # The pod may be malformed (that is why some answers fail open): read it defensively.
        metadata = pod.get("metadata")
        if not isinstance(metadata, Mapping):
            metadata = {}
        decisions.decision(
            uid=uid,
            namespace=(request.namespace if request else None)
            or identifier(metadata.get("namespace")),
            pod=identifier(metadata.get("name")) or identifier(metadata.get("generateName")),
            decided=finished.logged
            if finished is not None
            else render_decided(
                owner=None, outcome=done.outcome, reason=done.reason, message=done.message
            ),
            failed=done.outcome == "failopen",
            patch_ops=finished.ops if finished is not None else 0,
            dry_run=bool(request and request.dry_run),
        )

    async def mutate(scope: Scope, receive: Receive) -> Reply:
        started = time.perf_counter()
        try:
            doc = await body_of(scope, receive)
        except _Refusal as refusal:
            return refusal.reply
        request: AdmissionRequest | None = None
        uid = ""
        try:
            request = parse_review(doc)
            uid = request.uid
            done = answer(request)
        except ReviewError as exc:
            uid = exc.uid
            done = fail_open(exc.uid, "MalformedReview", str(exc), exc.api_version)
        except Exception as exc:  # any failure must still admit the pod
            # Malformed pods end here too (a list where a string belongs): the decision
            # line names the exception, the traceback is for --log-level debug only.
            logger.debug("admission failed (uid %s)", identifier(uid), exc_info=True)
            version = request.api_version if request else API_VERSION_V1
            done = fail_open(uid, "InternalError", type(exc).__name__, version)
        try:
            record(request, uid, done)
        except Exception:  # observability must never turn an answer into a 5xx
            logger.exception("recording the decision failed (uid %s)", identifier(uid))
        metrics.latency.observe(time.perf_counter() - started)
        return Reply(done.body)

    # /mutate is a plain ASGI route, outside FastAPI's dependency injection and request
    # objects: it runs on every admission, and that machinery cost more than reading and
    # answering the request (docs/benchmarks.md, the webhook bench).
    api.router.routes.insert(0, Route("/mutate", PostEndpoint(mutate), methods=["POST"]))

    @api.get("/healthz")
    async def healthz() -> Response:
        return Response(b'{"status":"ok"}', media_type=JSON)

    @api.get("/readyz")
    async def readyz() -> Response:
        if not view.synced:
            return Response(b'{"status":"cluster view not synced"}', 503, media_type=JSON)
        if not reachable():
            return Response(b'{"status":"API server unreachable"}', 503, media_type=JSON)
        return Response(b'{"status":"ready"}', media_type=JSON)

    @api.get("/metrics")
    async def prometheus() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    return api
