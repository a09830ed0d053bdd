"""Kubex's recommendation file (issue 34, part 3): every field of a row, bad rows, the
choice between rows, and what the decisions make of them."""

from __future__ import annotations

import argparse
import itertools
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.kube.kubexflags import kubex_source, parse_kubex_source
from app.model.kubex_rows import parse_results
from app.model.quantities import parse_resource
from app.model.recommendations import RecommendationRow, index_rows
from app.store.sources import RecommendationSources
from app.store.statedir import load_view
from app.store.view import ClusterView
from kerf.cli import main
from tests.app import builders as b

FIXTURE = Path(__file__).with_name("kubex_recommendations.yaml")
SOURCE = "ConfigMap kerf-system/recommendations"


def fixture_document() -> Any:
    configmap = yaml.safe_load(FIXTURE.read_text(encoding="utf-8"))
    return orjson.loads(configmap["data"]["recommendations.json"])


def kubex_row(container: str = "app", **fields: Any) -> dict[str, Any]:
    """A Kubex row for Deployment shop/web, inside kerf's guardrails for `b.APP_RES`."""
    row: dict[str, Any] = {
        "Cluster": "local-cluster",
        "Namespace": b.NS,
        "PodOwnerKind": "Deployment",
        "PodOwnerName": "web",
        "Container": container,
        "EntityId": "entity-1",
        "ContainerId": f"container-{container}",
        "KubexAutomation": "true",
        "HpaMetricName": "",
        "AnalyzedOn": b.ts(b.NOW - timedelta(days=1)),
        "CurrentCpuRequestMCores": 400,
        "CurrentMemRequestBytes": 512 * 2**20,
        "CurrentCpuLimitMCores": 1000,
        "CurrentMemLimitBytes": 2**30,
        "RecommendedCpuRequestMCores": 300,
        "RecommendedMemRequestBytes": 384 * 2**20,
        "RecommendedCpuLimitMCores": 800,
        "RecommendedMemLimitBytes": 768 * 2**20,
    }
    row.update(fields)
    return {k: v for k, v in row.items() if v is not None}


def kubex_configmap(
    *rows: dict[str, Any], name: str = "recommendations", namespace: str = "kerf-system"
) -> dict[str, Any]:
    """Kubex's ConfigMap: named, not labelled."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": {"recommendations.json": orjson.dumps({"results": list(rows)}).decode()},
    }


KUBEX_VALUES = {
    "requests": {"cpu": "300m", "memory": "384Mi"},
    "limits": {"cpu": "800m", "memory": "768Mi"},
}

# ------------------------------------------------------------------------- parsing


def test_kubexs_example_file_loads_with_every_field_mapped() -> None:
    rows, invalid = parse_results(fixture_document(), SOURCE)
    assert invalid == [] and len(rows) == 6
    api, db = rows[0], rows[1]
    assert (api.namespace, api.owner_kind, api.owner_name, api.container) == (
        "demo",
        "Deployment",
        "api-service",
        "api",
    )
    # MCores become millicores, Bytes the largest exact binary unit.
    assert api.requests == {"cpu": "750m", "memory": "768Mi"}
    assert api.limits == {"cpu": "1200m", "memory": "1536Mi"}
    assert api.analyzed_at == datetime(2026, 1, 29, 19, 36, 50, tzinfo=UTC)
    assert (api.origin, api.automation) == ("kubex", True)
    # Kubex reports no coverage, samples, confidence or throttling: the hub's final word.
    assert (api.coverage_hours, api.samples, api.confidence, api.cpu_throttling_ratio) == (
        None,
        None,
        None,
        None,
    )
    assert (db.owner_kind, db.container, db.automation) == ("StatefulSet", "postgres", False)
    assert db.limits == {"cpu": "900m", "memory": "2Gi"}
    assert [r.automation for r in rows] == [True, False, True, True, False, True]


def test_field_names_match_without_case_as_kubexs_decoder_does() -> None:
    pascal = kubex_row()
    camel = {k[0].lower() + k[1:].replace("MCores", "mCores"): v for k, v in pascal.items()}
    assert "recommendedCpuRequestmCores" in camel  # the json tag of Kubex's API
    (one,), _ = parse_results({"results": [pascal]}, SOURCE)
    (other,), _ = parse_results({"results": [camel]}, SOURCE)
    assert one == other


def test_kubex_automation_takes_booleans_and_their_strings() -> None:
    for value, expected in (("false", False), ("True", True), (False, False), (True, True)):
        (row,), _ = parse_results({"results": [kubex_row(KubexAutomation=value)]}, SOURCE)
        assert row.automation is expected


def test_a_value_kubex_leaves_at_zero_is_not_recommended() -> None:
    raw = kubex_row(RecommendedCpuLimitMCores=0, RecommendedMemLimitBytes=None)
    (row,), invalid = parse_results({"results": [raw]}, SOURCE)
    assert invalid == [] and row.limits == {} and row.requests == KUBEX_VALUES["requests"]


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"Cluster": None}, "missing cluster"),
        ({"EntityId": ""}, "missing entityid"),
        ({"AnalyzedOn": None}, "missing analyzedon"),
        ({"AnalyzedOn": "yesterday"}, "not an RFC3339 time"),
        ({"AnalyzedOn": "2026-11-28T10:00:00"}, "no time zone"),
        ({"KubexAutomation": None}, "missing KubexAutomation"),
        ({"KubexAutomation": "yes"}, 'is not "true" or "false"'),
        ({"RecommendedCpuRequestMCores": -5}, "is negative"),
        ({"RecommendedMemRequestBytes": 1.5}, "not a whole number"),
        ({"RecommendedMemLimitBytes": "1Gi"}, "not a whole number"),
        ({"CurrentCpuRequestMCores": True}, "not a whole number"),
        ({"EstimatedSavingsPerContainer": "a lot"}, "not a number"),
        ({"Namespace": 7}, "namespace 7 is not a string"),
        ({"RecommendedCpuRequestMCores": 900}, "cpu request 900 is above its limit 800"),
        (
            {f"Recommended{r}": 0 for r in ("CpuRequestMCores", "MemRequestBytes")}
            | {f"Recommended{r}": None for r in ("CpuLimitMCores", "MemLimitBytes")},
            "no Recommended… value above 0",
        ),
    ],
)
def test_a_bad_row_is_named_in_one_line_and_skipped(fields: dict[str, Any], words: str) -> None:
    good = kubex_row("side")
    rows, invalid = parse_results({"results": [kubex_row(**fields), good]}, SOURCE)
    assert [r.container for r in rows] == ["side"]
    (bad,) = invalid
    assert bad.warning.startswith(f"{SOURCE}: results[0] (")
    assert words in bad.warning and "\n" not in bad.warning


def test_a_row_that_is_not_a_mapping_is_skipped() -> None:
    rows, invalid = parse_results({"results": ["nope", kubex_row()]}, SOURCE)
    assert len(rows) == 1 and invalid[0].owner_key is None
    assert "results[0] (?) skipped: row is not a mapping" in invalid[0].warning


def test_results_that_are_not_a_list_do_not_load() -> None:
    with pytest.raises(ValueError, match="'results' is not a list"):
        parse_results({"results": {"a": 1}}, SOURCE)


_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=True),
    st.text(max_size=8),
    st.sampled_from(["true", "false", "2026-11-30T12:00:00Z", "demo"]),
)


#: the machine's load must not fail a property (its inputs are cheap)
SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(st.dictionaries(st.sampled_from(list(kubex_row())), _VALUES, max_size=8))
def test_any_row_loads_sound_or_is_skipped_with_a_reason(changes: dict[str, Any]) -> None:
    rows, invalid = parse_results({"results": [kubex_row(**changes)]}, SOURCE)
    assert len(rows) + len(invalid) == 1
    if invalid:
        assert " skipped: " in invalid[0].warning
        return
    (row,) = rows
    amounts = {
        (f, r): parse_resource(r, q)
        for f in ("requests", "limits")
        for r, q in getattr(row, f).items()
    }
    assert amounts and all(v > 0 for v in amounts.values())
    for resource in ("cpu", "memory"):
        request, limit = amounts.get(("requests", resource)), amounts.get(("limits", resource))
        assert request is None or limit is None or request <= limit


# ----------------------------------------------------------------- the two sources


def kerf_row(container: str = "app", days: float = 1, cpu: str = "250m") -> RecommendationRow:
    return RecommendationRow(
        namespace=b.NS,
        owner_kind="Deployment",
        owner_name="web",
        container=container,
        requests={"cpu": cpu},
        limits={},
        analyzed_at=b.NOW - timedelta(days=days),
        coverage_hours=240,
        samples=100,
        confidence=0.9,
        cpu_throttling_ratio=None,
    )


def test_a_kubex_row_wins_over_kerfs_own_even_when_older() -> None:
    (kubex,), _ = parse_results(
        {"results": [kubex_row(AnalyzedOn=b.ts(b.NOW - timedelta(days=3)))]}, SOURCE
    )
    newer = kerf_row(days=0)
    for rows in ((kubex, newer), (newer, kubex)):
        assert index_rows(rows)[("Deployment", b.NS, "web")]["app"] is kubex


_ROWS = st.builds(
    lambda origin, days, cpu, automation: RecommendationRow(
        namespace=b.NS,
        owner_kind="Deployment",
        owner_name="web",
        container="app",
        requests={"cpu": f"{cpu}m"},
        limits={},
        analyzed_at=b.NOW - timedelta(days=days),
        coverage_hours=None if origin == "kubex" else 240,
        samples=None,
        confidence=None,
        cpu_throttling_ratio=None,
        origin=origin,
        automation=automation or origin == "kerf",
    ),
    st.sampled_from(["kerf", "kubex"]),
    st.integers(0, 3),
    st.integers(1, 4),
    st.booleans(),
)


@SETTINGS
@given(st.lists(_ROWS, min_size=1, max_size=6), st.randoms())
def test_the_row_chosen_for_a_container_does_not_depend_on_the_order(
    rows: list[RecommendationRow], rng: Any
) -> None:
    chosen = index_rows(rows)[("Deployment", b.NS, "web")]["app"]
    shuffled = list(rows)
    rng.shuffle(shuffled)
    assert index_rows(shuffled)[("Deployment", b.NS, "web")]["app"] == chosen
    assert chosen.origin == ("kubex" if any(r.origin == "kubex" for r in rows) else "kerf")


def test_a_held_container_is_left_out_only_while_kubex_automation_is_respected() -> None:
    sources = RecommendationSources(kubex=("kerf-system", "recommendations"))
    sources.apply(kubex_configmap(kubex_row(), kubex_row("side", KubexAutomation="false")))
    owner = ("Deployment", b.NS, "web")
    assert set(sources.rows_for(owner, respect_kubex=True)) == {"app"}
    assert set(sources.rows_for(owner, respect_kubex=False)) == {"app", "side"}
    assert sources.about(owner, respect_kubex=True).held == ("side",)
    assert sources.about(owner, respect_kubex=False).held == ()


# ---------------------------------------------------------------------- decisions


def kubex_view(*rows: dict[str, Any], containers: b.Res | None = None, **config: Any) -> Any:
    objects = [*b.base_objects(containers=containers), b.proactive(), kubex_configmap(*rows)]
    if config:
        objects.append(b.global_config(**config))
    return b.view(*objects)


def test_a_kubex_row_is_applied_by_a_proactive_policy() -> None:
    d = b.decide(kubex_view(kubex_row()), b.pod())
    # No coverage and no confidence: LearningPeriod and LowConfidence pass it by.
    assert (d.outcome, d.reason) == ("apply", None)
    assert b.final(d) == KUBEX_VALUES


def test_the_admission_path_applies_it_too() -> None:
    d = b.decide(kubex_view(kubex_row()), b.pod(), "admission")
    assert d.outcome == "apply" and b.final(d) == KUBEX_VALUES


def test_a_container_kubex_holds_is_not_acted_on_and_is_named() -> None:
    res = {"app": b.APP_RES, "side": b.APP_RES}
    v = kubex_view(kubex_row(), kubex_row("side", KubexAutomation="false"), containers=res)
    d = b.decide(v, b.pod(containers=res))
    assert d.outcome == "apply" and d.changed == ("app",)
    assert b.final(d, "side") == b.APP_RES
    assert "KubexAutomationDisabled: Kubex's recommendation sets KubexAutomation false" in d.message
    assert "container(s) side" in d.message


def test_a_workload_kubex_holds_entirely_is_skipped_with_its_reason() -> None:
    d = b.decide(kubex_view(kubex_row(KubexAutomation="false")), b.pod())
    assert (d.outcome, d.reason) == ("skipped", "KubexAutomationDisabled")
    assert "container(s) app" in d.message and b.final(d) == b.APP_RES


def test_respect_kubex_automation_false_applies_the_held_row() -> None:
    v = kubex_view(kubex_row(KubexAutomation="false"), respectKubexAutomation=False)
    d = b.decide(v, b.pod())
    assert d.outcome == "apply" and b.final(d) == KUBEX_VALUES


def test_turning_respect_kubex_automation_off_decides_again() -> None:
    v = kubex_view(kubex_row(KubexAutomation="false"))
    for path in ("running", "admission"):
        assert b.decide(v, b.pod(), path).reason == "KubexAutomationDisabled"
    v.apply(b.global_config(respectKubexAutomation=False))
    for path in ("running", "admission"):
        assert b.final(b.decide(v, b.pod(), path)) == KUBEX_VALUES


def test_kubex_wins_per_container_and_kerfs_rows_fill_the_others() -> None:
    res = {"app": b.APP_RES, "side": b.APP_RES}
    v = b.view(
        *b.base_objects(containers=res),
        b.proactive(),
        b.configmap(b.row("app"), b.row("side")),  # kerf's rows: 250m/256Mi
        kubex_configmap(kubex_row()),
    )
    d = b.decide(v, b.pod(containers=res))
    assert b.final(d)["requests"] == KUBEX_VALUES["requests"]
    assert b.final(d, "side")["requests"] == {"cpu": "250m", "memory": "256Mi"}


def test_a_held_kubex_row_holds_the_container_against_kerfs_row() -> None:
    v = b.view(
        *b.base_objects(),
        b.proactive(),
        b.configmap(b.row("app")),
        kubex_configmap(kubex_row(KubexAutomation="false")),
    )
    assert b.decide(v, b.pod()).reason == "KubexAutomationDisabled"


def test_kubexs_old_analysis_is_stale_like_any_other() -> None:
    old = kubex_row(AnalyzedOn="2026-01-29T19:36:50Z")
    assert b.decide(kubex_view(old), b.pod()).reason == "StaleRecommendation"


def test_a_bad_kubex_row_blocks_its_workload_with_invalid_recommendation() -> None:
    d = b.decide(kubex_view(kubex_row(KubexAutomation="maybe")), b.pod())
    assert (d.outcome, d.reason) == ("blocked", "InvalidRecommendation")
    assert "results[0] (shop/Deployment/web/app) skipped" in d.message
    assert b.final(d) == b.APP_RES


def test_only_the_named_configmap_is_kubexs_and_the_name_is_configurable() -> None:
    other = kubex_configmap(kubex_row(), name="other")
    v = b.view(*b.base_objects(), b.proactive(), other)
    assert b.decide(v, b.pod()).reason == "NoMatchingPolicy"
    v = ClusterView(kubex_source=("kerf-system", "other"))
    for obj in (*b.base_objects(), b.proactive(), other):
        v.apply(obj)
    assert b.decide(v, b.pod()).outcome == "apply"


def test_a_labelled_configmap_in_kubexs_format_loads_too() -> None:
    labelled = b.configmap(name="kubex", namespace=b.NS)
    labelled["data"] = kubex_configmap(kubex_row())["data"]
    v = b.view(*b.base_objects(), b.proactive(), labelled)
    assert b.decide(v, b.pod()).outcome == "apply"


def test_kubexs_configmap_that_does_not_load_stops_proactive_workloads_everywhere() -> None:
    broken = kubex_configmap() | {"data": {"recommendations.json": "{"}}
    d = b.decide(b.view(*b.base_objects(), b.proactive(), broken), b.pod())
    assert (d.outcome, d.reason) == ("blocked", "HubUnreachable")
    assert "ConfigMap kerf-system/recommendations: recommendations.json is not JSON" in d.message


def test_a_change_of_the_configmap_decides_again() -> None:
    v = kubex_view(kubex_row())
    assert b.decide(v, b.pod()).outcome == "apply"
    v.apply(kubex_configmap(kubex_row(KubexAutomation="false")))
    assert b.decide(v, b.pod()).reason == "KubexAutomationDisabled"
    v.delete("ConfigMap", "kerf-system", "recommendations")
    assert b.decide(v, b.pod()).reason == "NoMatchingPolicy"


def test_a_state_dir_reads_kubexs_configmap(tmp_path: Path) -> None:
    objects = [*b.base_objects(), b.proactive()]
    docs = [
        o.model_dump(by_alias=True, mode="json") if hasattr(o, "model_dump") else o for o in objects
    ]
    (tmp_path / "objects.yaml").write_text(yaml.safe_dump_all(docs), encoding="utf-8")
    (tmp_path / "kubex.yaml").write_text(
        yaml.safe_dump(kubex_configmap(kubex_row())), encoding="utf-8"
    )
    v = load_view([tmp_path])
    assert [s.name for s in v.recommendations("sources")] == ["recommendations"]
    assert b.final(b.decide(v, b.pod())) == KUBEX_VALUES


def test_every_pairing_of_kubex_and_kerf_rows_for_one_container_decides_the_same() -> None:
    rows = [kubex_row(), kubex_row(RecommendedCpuRequestMCores=350)]
    outcomes = set()
    for order in itertools.permutations(rows):
        d = b.decide(kubex_view(*order), b.pod())
        outcomes.add(orjson.dumps(b.final(d)))
    assert len(outcomes) == 1


# --------------------------------------------------------------------------- the flag


@pytest.mark.parametrize(
    ("text", "expected"),
    [("recommendations", (None, "recommendations")), ("kubex/recs.v1", ("kubex", "recs.v1"))],
)
def test_the_flag_names_a_configmap_in_kerfs_namespace_or_another(
    text: str, expected: tuple[str | None, str]
) -> None:
    assert parse_kubex_source(text) == expected
    assert kubex_source(expected, "kerf-system") == (expected[0] or "kerf-system", expected[1])


@pytest.mark.parametrize("text", ["", "Recs", "kubex/", "a/b/c", "-x", "ns_1/recs"])
def test_a_flag_that_names_no_configmap_is_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        parse_kubex_source(text)


def test_the_reconcilers_plan_reads_the_configmap_the_flag_names(
    tmp_path: Path, capsys: Any
) -> None:
    objects = [*b.base_objects(), b.proactive(), b.node(), b.pod(node="node-a")]
    docs = [
        o.model_dump(by_alias=True, mode="json") if hasattr(o, "model_dump") else o for o in objects
    ]
    fresh = kubex_row(AnalyzedOn=b.ts(datetime.now(UTC) - timedelta(hours=1)))  # the plan's now
    docs.append(kubex_configmap(fresh, name="recs", namespace="kubex"))
    (tmp_path / "state.yaml").write_text(yaml.safe_dump_all(docs), encoding="utf-8")

    def resizes(*flags: str) -> list[dict[str, Any]]:
        assert main(["reconciler", "--state-dir", str(tmp_path), *flags]) == 0
        lines = [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]
        return [line for line in lines if line["action"] == "resize"]

    assert resizes() == []  # kerf-system/recommendations: none here
    (resize,) = resizes("--kubex-recommendations", "kubex/recs")
    assert resize["containers"]["app"] == KUBEX_VALUES


def test_explain_reads_the_configmap_the_flag_names(tmp_path: Path, capsys: Any) -> None:
    objects = [*b.base_objects(), b.proactive(), b.pod()]
    docs = [
        o.model_dump(by_alias=True, mode="json") if hasattr(o, "model_dump") else o for o in objects
    ]
    docs.append(kubex_configmap(kubex_row(), name="recs", namespace="kubex"))
    (tmp_path / "state.yaml").write_text(yaml.safe_dump_all(docs), encoding="utf-8")
    argv = ["explain", "-f", str(tmp_path), "--now", b.ts(b.NOW)]
    assert main([*argv, "--kubex-recommendations", "kubex/recs"]) == 0
    (pod,) = orjson.loads(capsys.readouterr().out)["pods"]
    assert (pod["outcome"], pod["containers"]["app"]) == ("apply", KUBEX_VALUES)
