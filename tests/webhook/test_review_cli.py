"""`kerf review`: an AdmissionReview answer turned back into the pod it makes.

The answers come from the real app over the storefront example (what the README's curl
against `make run` returns), so the helper is tested on the patches the webhook writes.
"""

from __future__ import annotations

import io
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonpatch
import orjson
import pytest
import yaml
from fastapi.testclient import TestClient

from app.store.statedir import load_view
from kerf.cli import main
from webhook.review import decode_patch
from webhook.server import create_app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ADMISSION = EXAMPLES / "admission"


@pytest.fixture(scope="module")
def http() -> Iterator[TestClient]:
    with TestClient(create_app(load_view([EXAMPLES / "storefront"]))) as client:
        yield client


def answer_for(http: TestClient, name: str, tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """POST an example like the README's curl does; the answer is saved as curl -o would."""
    response = http.post(
        "/mutate",
        content=(ADMISSION / name).read_bytes(),
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 200
    path = tmp_path / f"answer-{name}"
    path.write_bytes(response.content)
    return path, response.json()


def review(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["review", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_prints_the_patched_pod_as_yaml(
    http: TestClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    request = ADMISSION / "replicaset-pod.json"
    path, answer = answer_for(http, request.name, tmp_path)
    patch = decode_patch(answer)
    assert patch, "the storefront's web pod is expected to be patched"
    code, out, _ = review([str(path), "--request", str(request)], capsys)
    assert code == 0
    expected = jsonpatch.apply_patch(orjson.loads(request.read_bytes())["request"]["object"], patch)
    assert yaml.safe_load(out) == expected
    assert expected["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "250m"


def test_diff_names_each_change_then_shows_a_unified_diff(
    http: TestClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    request = ADMISSION / "replicaset-pod.json"
    path, _ = answer_for(http, request.name, tmp_path)
    code, out, _ = review([str(path), "--request", str(request), "--diff"], capsys)
    assert code == 0
    assert '# replace /spec/containers/0/resources/requests/cpu: "500m" -> "250m"' in out
    assert "+++ patched" in out
    assert "-        cpu: 500m" in out
    assert "+        cpu: 250m" in out


def test_reads_the_answer_from_stdin_and_can_print_the_patch(
    http: TestClient,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    request = ADMISSION / "replicaset-pod.json"
    path, answer = answer_for(http, request.name, tmp_path)
    stdin = io.TextIOWrapper(io.BytesIO(path.read_bytes()))
    monkeypatch.setattr(sys, "stdin", stdin)
    code, out, _ = review(["--request", str(request), "--patch"], capsys)
    assert code == 0
    assert orjson.loads(out) == decode_patch(answer)


def test_an_answer_without_patch_leaves_the_pod_and_says_so(
    http: TestClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    request = ADMISSION / "mirror-pod.json"
    path, _ = answer_for(http, request.name, tmp_path)
    code, out, err = review([str(path), "--request", str(request)], capsys)
    assert code == 0
    assert yaml.safe_load(out) == orjson.loads(request.read_bytes())["request"]["object"]
    assert "no patch" in err


def test_webhook_warnings_and_uid_mismatch_go_to_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    answer = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": "other", "allowed": True, "warnings": ["kerf admitted ..."]},
    }
    path = tmp_path / "answer.json"
    path.write_bytes(orjson.dumps(answer))
    request = ADMISSION / "replicaset-pod.json"
    code, out, err = review([str(path), "--request", str(request), "--diff"], capsys)
    assert (code, out) == (0, "")
    assert "uid 'other'" in err
    assert "webhook warning: kerf admitted ..." in err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"<html>", "not JSON"),
        (b'{"kind": "Pod"}', "not an AdmissionReview"),
        (b'{"kind": "AdmissionReview", "request": {}}', "has no response"),
        (
            b'{"kind": "AdmissionReview", "response": {"patch": "!!"}}',
            "not base64 JSON",
        ),
    ],
)
def test_unusable_answers_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, message: str
) -> None:
    path = tmp_path / "answer.json"
    path.write_bytes(content)
    code, out, err = review([str(path), "--request", str(ADMISSION / "dry-run.json")], capsys)
    assert (code, out) == (2, "")
    assert message in err
    assert err.count("\n") == 1


def test_a_patch_for_another_pod_is_refused(
    http: TestClient, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = answer_for(http, "replicaset-pod.json", tmp_path)
    other = ADMISSION / "no-resources.json"
    code, _, err = review([str(path), "--request", str(other)], capsys)
    assert code == 2
    assert "does not apply" in err


def test_a_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = review([str(tmp_path / "nope.json"), "--request", "x.json"], capsys)
    assert code == 2
    assert "nope.json" in err


@pytest.mark.parametrize("name", sorted(p.name for p in ADMISSION.glob("*.json")))
def test_every_readme_example_is_a_valid_request(http: TestClient, name: str) -> None:
    """The README's curl accepts any file of examples/admission: each must be answered
    as a real AdmissionReview (uid echoed, no fail-open warning), not as malformed input."""
    body = orjson.loads((ADMISSION / name).read_bytes())
    response = http.post("/mutate", content=orjson.dumps(body))
    assert response.status_code == 200
    answer = response.json()["response"]
    assert answer["uid"] == body["request"]["uid"]
    assert answer["allowed"] is True
    assert "warnings" not in answer


def test_a_reader_that_stops_early_gets_no_traceback(http: TestClient, tmp_path: Path) -> None:
    """`kerf review --diff ... | head -1`: a pod whose diff is far larger than a pipe
    holds, so kerf is still writing when head exits."""
    review_doc = orjson.loads((ADMISSION / "replicaset-pod.json").read_bytes())
    labels = review_doc["request"]["object"]["metadata"]["labels"]
    labels.update({f"example.com/label-{i}": "v" * 40 for i in range(5_000)})
    request = tmp_path / "big-request.json"
    request.write_bytes(orjson.dumps(review_doc))
    response = http.post("/mutate", content=request.read_bytes())
    answer = tmp_path / "answer.json"
    answer.write_bytes(response.content)
    kerf = Path(sys.executable).parent / "kerf"
    result = subprocess.run(
        [
            "bash",
            "-c",
            f'"{kerf}" review --diff "{answer}" --request "{request}" | head -1; '
            'echo "status ${PIPESTATUS[0]}"',
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    first, status = result.stdout.splitlines()
    assert first.startswith("# replace /spec/containers/0/resources/requests/cpu")
    assert status == "status 141"
    assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr, result.stderr
