"""The bundled examples never age: their recommendations carry times relative to the one
kerf decides at (`${now-24h}`), which the state-file loader fills in (docs/decisions.md)."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.decide import decide_pod
from app.outcome.explain import explain
from app.outcome.report import build_report
from app.store.statedir import LoadError, load_objects, load_view, relative_times
from kerf.cli import main
from reconciler.main import plan_state_dir

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
STATE_DIRS = sorted(p for p in EXAMPLES.iterdir() if p.is_dir() and any(p.glob("*.y*ml")))
#: Long after the examples were written, and long before.
FAR = ("2100-01-01T00:00:00Z", "2001-01-01T00:00:00Z")
AT = datetime(2030, 6, 1, 12, 0, 0, tzinfo=UTC)


def test_relative_times_are_filled_in_from_now() -> None:
    text = '{"a": "${now}", "b": "${now-24h}", "c": "${now+1h30m}", "d": "${now-90s}"}'
    assert orjson.loads(relative_times(text, AT)) == {
        "a": "2030-06-01T12:00:00Z",
        "b": "2030-05-31T12:00:00Z",
        "c": "2030-06-01T13:30:00Z",
        "d": "2030-06-01T11:58:30Z",
    }


def test_other_placeholders_are_left_as_they_are() -> None:
    # A manifest meant for envsubst or a template keeps its own variables.
    text = "image: ${IMAGE}\ntag: ${NOW}\nat: ${nowhere}\nplain: now-24h\n"
    assert relative_times(text, AT) == text


def test_a_bad_offset_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "rows.yaml"
    path.write_text("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n  note: ${now-2days}\n")
    with pytest.raises(LoadError, match=r"rows.yaml: line 5: \$\{now-2days\}: invalid duration"):
        load_objects([path], AT)


def test_a_bad_offset_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "ns.yaml").write_text(
        "kind: Namespace\napiVersion: v1\nmetadata: {name: ${now-}}\n"
    )
    assert main(["explain", "-f", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "line 3: ${now-}" in err, err


def reasons(path: Path, now: datetime) -> set[str | None]:
    result = explain(load_view([path], now=now), now=now)
    return {pod["reason"] for pod in result["pods"]}


@settings(max_examples=20, deadline=None)
@given(now=st.datetimes(datetime(2000, 1, 1), datetime(2200, 1, 1), timezones=st.just(UTC)))
def test_no_example_is_ever_stale(now: datetime) -> None:
    for path in STATE_DIRS:
        assert "StaleRecommendation" not in reasons(path, now), path.name


@pytest.mark.parametrize("at", FAR)
def test_explain_on_the_storefront_applies_its_recommendation(
    at: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain", "-f", str(EXAMPLES / "storefront"), "--now", at]) == 0
    pods = {p["name"]: p for p in orjson.loads(capsys.readouterr().out)["pods"]}
    assert {name: p["outcome"] for name, p in pods.items()} == {
        "api-5f6c7-xyz12": "apply",
        "web-7d4b9-abcde": "apply",
        "web-7d4b9-new01": "apply",
    }


@pytest.mark.parametrize("at", FAR)
def test_the_blocked_example_blocks_for_its_own_reasons(
    at: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain", "-f", str(EXAMPLES / "blocked"), "--now", at]) == 0
    pods = orjson.loads(capsys.readouterr().out)["pods"]
    found = {p["owner"]["name"]: p["reason"] for p in pods}
    assert found["ingest"] == "LowConfidence"
    assert found["warehouse"] == "LearningPeriod"


@pytest.mark.parametrize("at", FAR)
def test_report_on_the_storefront_counts_its_recommendation(
    at: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["report", "-f", str(EXAMPLES / "storefront"), "--now", at, "-o", "json"]
    assert main(argv) == 0
    body = orjson.loads(capsys.readouterr().out)
    # web 2 × 400m → 250m and api 500m → 300m: api's row is applied, so it is not stale.
    assert body["cluster"]["cpuCores"]["applied"] == pytest.approx(0.8)


def test_the_reconcilers_state_dir_loads_at_the_clock_and_decides_there() -> None:
    """`kerf reconciler --state-dir` loads at the wall clock (the default `now`)."""
    now = datetime.now(UTC)
    view = load_view([EXAMPLES / "storefront"])
    [api] = [p for p in view.pods() if p["metadata"]["name"].startswith("api-")]
    decision = decide_pod(view, api, now=now + timedelta(minutes=1), path="running")
    assert (decision.outcome, decision.method) == ("apply", "inPlace")
    report = build_report(view, now=now)
    assert [w.ref.name for w in report.workloads] == ["api", "web"]


async def test_the_reconcilers_dry_run_over_the_storefront_blocks_nothing() -> None:
    """`kerf reconciler --state-dir examples/storefront`: both running pods resized."""
    out = io.StringIO()
    assert await plan_state_dir(EXAMPLES / "storefront", out) == 0
    summary = orjson.loads(out.getvalue().splitlines()[-1])
    assert (summary["blocked"], summary["wouldResizeInPlace"]) == ({}, 2)
