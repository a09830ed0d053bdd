"""Recommendation ConfigMaps judged one by one, and the reasons a bad row or a bad
ConfigMap gives the decision (SPEC §4)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from app.model import recommendations
from app.outcome.explain import explain
from app.store.sources import SourceState, load_source
from kerf.cli import main
from tests.app import builders as b
from tests.app.test_kubex_rows import kubex_configmap, kubex_row

NEGATIVE = b.row(requests={"cpu": "250m", "memory": "-384Mi"})


def not_json(name: str = "other", namespace: str = b.NS) -> dict:
    cm = b.configmap(name=name, namespace=namespace)
    return {**cm, "data": {"recommendations.json": "{not json"}}


def test_an_invalid_row_blocks_its_workload_with_invalid_recommendation() -> None:
    v = b.view(*b.base_objects(), b.proactive(), b.configmap(NEGATIVE))
    d = b.decide(v, b.pod())
    assert (d.outcome, d.reason) == ("blocked", "InvalidRecommendation")
    assert "recommendations[0] (shop/Deployment/web/app)" in d.message
    assert "requests.memory '-384Mi' is not positive" in d.message
    assert b.final(d) == b.APP_RES  # never acted on


def test_an_invalid_row_is_not_the_business_of_a_workload_no_proactive_policy_matches() -> None:
    v = b.view(*b.base_objects(), b.configmap(NEGATIVE))
    assert b.decide(v, b.pod()).reason == "NoMatchingPolicy"


def test_an_invalid_row_of_one_container_is_named_while_the_others_apply() -> None:
    res = {"app": b.APP_RES, "side": b.APP_RES}
    v = b.view(
        *b.base_objects(containers=res),
        b.proactive(),
        b.configmap(b.row("app"), {**NEGATIVE, "container": "side"}),
    )
    d = b.decide(v, b.pod(containers=res))
    assert d.outcome == "apply" and d.changed == ("app",)
    assert "InvalidRecommendation: ConfigMap shop/recs: recommendations[1]" in d.message


def test_values_for_a_container_the_pod_lacks_say_no_such_container() -> None:
    v = b.view(*b.base_objects(), b.proactive(), b.configmap(b.row("ghost")))
    d = b.decide(v, b.pod())
    assert (d.outcome, d.reason) == ("skipped", "NoSuchContainer")
    assert "ghost" in d.message and "it has app" in d.message


def test_a_bad_configmap_stops_only_the_workloads_it_feeds() -> None:
    objects = [
        *b.base_objects(),
        b.deployment("api"),
        b.namespace("cart"),
        b.strategy(namespace="cart"),
        b.deployment("web", namespace="cart"),
        b.proactive(),
        b.proactive(namespace="cart"),
        b.configmap(b.row(requests={"cpu": "300m", "memory": "256Mi"})),
        b.configmap(b.row(namespace="cart"), name="cart-recs", namespace="cart"),
        not_json(),
    ]
    v = b.view(*objects)
    # web's rows come from the good ConfigMap shop/recs: they keep working.
    assert b.decide(v, b.pod()).outcome == "apply"
    # api has no rows anywhere: shop/other, in its namespace, would have fed it.
    api = b.decide(v, b.pod("api-7d4b9-aaaaa", workload="api"))
    assert (api.outcome, api.reason) == ("blocked", "HubUnreachable")
    assert "ConfigMap shop/other: recommendations.json is not JSON" in api.message
    # Another namespace's workload with its own rows is not touched.
    assert b.decide(v, b.pod(namespace="cart")).outcome == "apply"
    assert [s.failure is not None for s in v.recommendations("sources")] == [False, True, False]


def test_a_configmap_that_breaks_keeps_its_rows_and_stops_their_workloads_only() -> None:
    good = b.configmap(b.row(), name="other")
    v = b.view(
        *b.base_objects(),
        b.deployment("api"),
        b.proactive(),
        good,
        b.configmap(b.row(workload="api"), name="api-recs"),
    )
    v.apply(not_json())
    d = b.decide(v, b.pod())
    assert (d.outcome, d.reason) == ("blocked", "HubUnreachable")
    assert "ConfigMap shop/other" in d.message
    assert b.decide(v, b.pod("api-7d4b9-aaaaa", workload="api")).outcome == "apply"
    v.apply(good)
    assert b.decide(v, b.pod()).outcome == "apply"


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({}, "no recommendations.json key"),
        ({"recommendations.json": "[]"}, "needs a list 'recommendations'"),
        ({"recommendations.json": '{"recommendations": {}}'}, "needs a list"),
    ],
)
def test_the_wrong_shape_is_a_configmap_that_did_not_load(data: dict, words: str) -> None:
    cm = {**b.configmap(), "data": data}
    v = b.view(*b.base_objects(), b.proactive(), cm)
    d = b.decide(v, b.pod())
    assert (d.outcome, d.reason) == ("blocked", "HubUnreachable") and words in d.message


def test_explain_names_the_bad_row_and_the_bad_configmap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    objects = [
        *b.base_objects(),
        b.deployment("api"),
        b.proactive(),
        b.configmap(NEGATIVE),
        not_json(),
        b.pod(),
        b.pod("api-7d4b9-aaaaa", workload="api"),
    ]
    docs = [
        o.model_dump(by_alias=True, mode="json") if hasattr(o, "model_dump") else o for o in objects
    ]
    (tmp_path / "state.yaml").write_text(yaml.safe_dump_all(docs))
    assert main(["explain", "-f", str(tmp_path), "--now", b.ts(b.NOW), "-o", "json"]) == 0
    out = capsys.readouterr()
    pods = {p["name"]: p for p in orjson.loads(out.out)["pods"]}
    # web's only row is invalid, but web is in the bad ConfigMap's namespace without
    # rows: the ConfigMap that did not load comes first.
    assert pods["web-7d4b9-aaaaa"]["reason"] == "HubUnreachable"
    assert pods["api-7d4b9-aaaaa"]["reason"] == "HubUnreachable"
    assert "ConfigMap shop/other: recommendations.json is not JSON" in out.err
    assert "recommendations[0] (shop/Deployment/web/app) skipped" in out.err


def test_explain_reports_invalid_recommendation() -> None:
    v = b.view(*b.base_objects(), b.proactive(), b.configmap(NEGATIVE), b.pod())
    (pod,) = explain(v, now=b.NOW)["pods"]
    assert (pod["outcome"], pod["reason"]) == ("blocked", "InvalidRecommendation")
    assert "-384Mi" in pod["message"]


def test_configmaps_taken_together_are_indexed_once_and_read_as_taken_one_by_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from app.store import sources as module

    built: list[int] = []
    index_rows = module.index_rows

    def counted(rows):  # type: ignore[no-untyped-def]
        built.append(1)
        return index_rows(rows)

    monkeypatch.setattr(module, "index_rows", counted)
    sources = module.RecommendationSources()
    owner = ("Deployment", b.NS, "web")
    for i in range(5):
        sources.apply(b.configmap(b.row(f"c{i}"), name=f"recs-{i}"))
    assert built == []  # nothing read yet
    assert sorted(sources.rows_for(owner, respect_kubex=True)) == [f"c{i}" for i in range(5)]
    assert built == [1]
    sources.rows_for(owner, respect_kubex=False)
    assert built == [1]
    assert sources.delete(b.NS, "recs-0")
    sources.apply(not_json("recs-1"))  # it keeps its rows, and stops their workload
    assert sorted(sources.rows_for(owner, respect_kubex=True)) == [f"c{i}" for i in range(1, 5)]
    assert built == [1, 1]
    assert sources.about(owner, respect_kubex=True).unreachable


NAMESPACES = ("a", "b", "c", "d")


def _document(rows: list[tuple[str, int, bool]], kubex: bool) -> dict:
    """A ConfigMap of one version holding `rows` (namespace, workload, valid) in kerf's
    format or Kubex's."""
    if kubex:
        made = [
            kubex_row(
                f"c{i}",
                Namespace=ns,
                PodOwnerName=f"w{w}",
                RecommendedCpuRequestMCores=300 if valid else -1,
            )
            for i, (ns, w, valid) in enumerate(rows)
        ]
        cm = kubex_configmap(*made)
    else:
        made = [
            {
                **b.row(f"c{i}", namespace=ns, workload=f"w{w}"),
                **({} if valid else {"requests": NEGATIVE["requests"]}),
            }
            for i, (ns, w, valid) in enumerate(rows)
        ]
        cm = b.configmap(*made)
    cm["metadata"].update(uid="uid-1", resourceVersion="7")
    return cm


def _seen(state: SourceState) -> tuple[object, ...]:
    rows = sorted(
        (r.namespace, r.owner_name, r.container, sorted(r.requests.items())) for r in state.rows
    )
    return rows, state.counted, state.left_out, state.invalid


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.sampled_from(NAMESPACES), st.integers(0, 3), st.booleans()), max_size=12
    ),
    kept=st.lists(st.sets(st.sampled_from(NAMESPACES)), min_size=2, max_size=5),
    kubex=st.booleans(),
)
def test_a_version_listed_again_with_other_namespaces_kept_reads_as_read_afresh(
    rows: list[tuple[str, int, bool]], kept: list[set[str]], kubex: bool
) -> None:
    """A sharded replica's buckets change and the ConfigMaps are listed again: the same
    version yields the rows, skipped rows and count it yields read whole."""
    cm = _document(rows, kubex)
    state = load_source(cm, None, kept[0].__contains__)
    for namespaces in kept[1:]:
        state = load_source(cm, state, namespaces.__contains__)
    assert _seen(state) == _seen(load_source(cm, None, kept[-1].__contains__))


def test_a_version_listed_again_reads_only_the_rows_of_namespaces_newly_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cm = _document([("a", 0, True), ("a", 1, True), ("b", 0, True), ("c", 0, False)], False)
    state = load_source(cm, None, {"a"}.__contains__)
    read: list[str] = []
    row = recommendations._row

    def counted(raw, shared):  # type: ignore[no-untyped-def]
        read.append(raw["namespace"])
        return row(raw, shared)

    monkeypatch.setattr(recommendations, "_row", counted)
    again = load_source(cm, state, {"a", "b"}.__contains__)
    assert read == ["b"]
    assert sorted(r.namespace for r in again.rows) == ["a", "a", "b"]
    assert (again.counted, again.left_out, len(again.invalid)) == (3, 0, 1)
    # a new version is read whole
    cm["metadata"]["resourceVersion"] = "8"
    read.clear()
    load_source(cm, again, {"a", "b"}.__contains__)
    assert read == ["a", "a", "b", "c"]
    # unsharded, the version already read is not read again
    whole = load_source(cm, None)
    read.clear()
    assert load_source(cm, whole) == whole and read == []
    cm["metadata"]["uid"] = "uid-2"  # deleted and created again
    assert load_source(cm, whole).uid == "uid-2" and read == ["a", "a", "b", "c"]
