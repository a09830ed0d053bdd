"""The webhook over TLS with the real decision (`app.decide.admission.admit_pod`) on a state dir."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import jsonpatch
import orjson
import pytest

from app.model.annotations import POD_INFO
from app.store.statedir import load_view
from tests.webhook.fakes import load_example
from tests.webhook.tls_helpers import client_context, issue_into, running_server
from webhook.review import decode_patch
from webhook.server import create_app

STOREFRONT = Path(__file__).resolve().parents[2] / "examples" / "storefront"


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    issue_into(tmp_path)
    app = create_app(load_view([STOREFRONT]))
    async with running_server(app, tmp_path) as server:
        context = client_context(tmp_path / "ca.crt")
        async with httpx.AsyncClient(verify=context, base_url=server.url) as http:
            yield http


async def mutate(client: httpx.AsyncClient, review: dict[str, Any]) -> dict[str, Any]:
    response = await client.post("/mutate", content=orjson.dumps(review))
    assert response.status_code == 200
    answer = response.json()
    assert answer["response"]["uid"] == review["request"]["uid"]
    assert answer["response"]["allowed"] is True
    return answer


async def test_static_policy_is_applied_and_reinvocation_is_a_no_op(
    client: httpx.AsyncClient,
) -> None:
    review = load_example("replicaset-pod.json")
    answer = await mutate(client, review)
    pod = jsonpatch.apply_patch(review["request"]["object"], decode_patch(answer))
    resources = pod["spec"]["containers"][0]["resources"]
    assert resources["requests"] == {"cpu": "250m", "memory": "256Mi"}
    assert resources["limits"]["memory"] == "512Mi"
    info = orjson.loads(pod["metadata"]["annotations"][POD_INFO])
    assert info["containers"]["app"] == resources
    again = copy.deepcopy(review)
    again["request"]["object"] = pod
    assert decode_patch(await mutate(client, again)) == []


async def test_dry_run_gets_the_same_patch(client: httpx.AsyncClient) -> None:
    normal = await mutate(client, load_example("replicaset-pod.json"))
    dry = await mutate(client, load_example("dry-run.json"))
    assert decode_patch(dry) == decode_patch(normal) != []


@pytest.mark.parametrize(
    "example", ["multi-container.json", "protected-namespace.json", "mirror-pod.json"]
)
async def test_pods_without_a_decision_are_untouched(
    client: httpx.AsyncClient, example: str
) -> None:
    answer = await mutate(client, load_example(example))
    assert "patch" not in answer["response"]
