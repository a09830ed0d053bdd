"""`kerf report`: requests now, recommended and applied per workload, namespace and cluster;
reclaimable cores and GiB; monthly cost at 730 hours; the CLI's outputs and its errors."""

from __future__ import annotations

import asyncio
import csv
import io
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kubernetes_asyncio import client

from app.kube.snapshot import snapshot_view
from app.outcome.report import (
    COMPARISONS,
    HOURS_PER_MONTH,
    RESOURCES,
    Prices,
    Totals,
    build_report,
    report_json,
)
from kerf.cli import main
from kerf.report_html import render_html
from kerf.report_table import TABLE_WIDTH, csv_rows, render_markdown, render_table, table_rows
from kubesim.testing import running_sim
from tests.app.builders import (
    NOW,
    base_objects,
    configmap,
    decide,
    deployment,
    namespace,
    node,
    oom_status,
    pod,
    proactive,
    row,
    static,
    strategy,
    view,
)
from tests.cluster import deployment as cluster_deployment
from tests.cluster import install_shop

ROOT = Path(__file__).resolve().parents[2]
KERF = str(Path(sys.executable).parent / "kerf")
GIB = 1024**3


def storefront_view(mode: str = "auto"):
    """web: two running pods at 400m/512Mi, a StaticPolicy of 250m/256Mi."""
    return view(
        *base_objects(replicas=2),
        node(),
        static(mode=mode),
        pod("web-7d4b9-aaaaa", node="node-a"),
        pod("web-7d4b9-bbbbb", node="node-a"),
    )


def test_a_workload_sums_its_pods_now_recommended_and_applied() -> None:
    report = build_report(storefront_view(), now=NOW)
    (web,) = report.workloads
    assert (web.ref.kind, web.ref.namespace, web.ref.name) == ("Deployment", "shop", "web")
    t = web.totals
    assert t.pods == 2
    assert t.millicores == {"manifest": 800, "now": 800, "recommended": 500, "applied": 500}
    assert t.memory_bytes == {
        "manifest": GIB,
        "now": GIB,
        "recommended": GIB // 2,
        "applied": GIB // 2,
    }
    assert t.reclaimable_cores() == pytest.approx(0.3)
    assert t.reclaimable_gib() == pytest.approx(0.5)


def test_a_blocked_or_skipped_decision_applies_nothing_but_keeps_its_recommendation() -> None:
    t = build_report(storefront_view(mode="audit"), now=NOW).cluster
    assert t.millicores == {"manifest": 800, "now": 800, "recommended": 500, "applied": 800}
    assert t.reclaimable_cores("applied") == 0
    assert t.reclaimable_cores("recommended") == pytest.approx(0.3)


def test_the_guardrails_cap_what_is_applied_not_what_is_recommended() -> None:
    # 400m → 100m is a 75 % cut: maxChangePercent 50 lets 200m through.
    small = {"app": {"requests": {"cpu": "100m", "memory": "512Mi"}}}
    v = view(*base_objects(replicas=1), node(), static(containers=small), pod(node="node-a"))
    t = build_report(v, now=NOW).cluster
    assert t.millicores == {"manifest": 400, "now": 400, "recommended": 100, "applied": 200}


def test_what_kerf_already_changed_counts_as_saved_against_the_manifest() -> None:
    resized = {"app": {"requests": {"cpu": "250m", "memory": "256Mi"}}}
    v = view(
        *base_objects(replicas=1),
        node(),
        static(),
        pod(node="node-a", containers=resized),
    )
    t = build_report(v, now=NOW).cluster
    assert t.millicores == {"manifest": 400, "now": 250, "recommended": 250, "applied": 250}
    assert t.saved_cores() == pytest.approx(0.15)
    assert t.saved_gib() == pytest.approx(0.25)
    assert t.reclaimable_cores() == 0


def test_terminal_and_bare_pods_are_not_counted_and_a_podless_workload_is_zero() -> None:
    bare = pod("lonely", node="node-a")
    bare["metadata"]["ownerReferences"] = []
    v = view(
        *base_objects(replicas=1),
        node(),
        static(),
        pod("web-7d4b9-aaaaa", node="node-a"),
        pod("web-7d4b9-done1", node="node-a", phase="Succeeded"),
        bare,
        deployment("idle"),
    )
    report = build_report(v, now=NOW)
    by_name = {w.ref.name: w.totals for w in report.workloads}
    assert set(by_name) == {"idle", "web"}
    assert by_name["web"].pods == 1
    assert by_name["idle"].pods == 0 and by_name["idle"].millicores["now"] == 0
    assert report.cluster.millicores["now"] == 400


def test_namespaces_and_the_cluster_add_up_their_workloads() -> None:
    v = view(
        *base_objects(replicas=1),
        namespace("blog"),
        node(),
        static(),
        pod("web-7d4b9-aaaaa", node="node-a"),
        deployment("web", namespace="blog"),
        pod("web-7d4b9-ccccc", namespace="blog", node="node-a"),
    )
    report = build_report(v, now=NOW)
    assert list(report.namespaces) == ["blog", "shop"]
    # blog has no policy: nothing is recommended there.
    assert report.namespaces["blog"].millicores["recommended"] == 400
    assert report.namespaces["shop"].millicores["recommended"] == 250
    assert report.cluster.millicores == {
        "manifest": 800,
        "now": 800,
        "recommended": 650,
        "applied": 650,
    }
    assert report.cluster.pods == 2


def test_monthly_cost_is_cores_and_gib_times_their_hourly_price_over_730_hours() -> None:
    prices = Prices(cpu_core_hour=0.04, memory_gib_hour=0.005)
    body = report_json(build_report(storefront_view(), now=NOW), prices)
    cluster = body["cluster"]
    assert HOURS_PER_MONTH == 730
    assert cluster["monthlyCost"]["now"] == pytest.approx((0.8 * 0.04 + 1 * 0.005) * 730, abs=0.005)
    assert cluster["monthlyCost"]["recommended"] == pytest.approx(
        (0.5 * 0.04 + 0.5 * 0.005) * 730, abs=0.005
    )
    assert cluster["reclaimable"]["recommended"] == {"cpuCores": 0.3, "memoryGiB": 0.5}
    assert body["prices"] == {
        "currency": "USD",
        "cpuCoreHour": 0.04,
        "memoryGiBHour": 0.005,
        "hoursPerMonth": 730,
    }
    assert (
        "monthlyCost" not in report_json(build_report(storefront_view(), now=NOW), None)["cluster"]
    )


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["report", *argv]) == 0
    return capsys.readouterr().out


STOREFRONT = str(ROOT / "examples" / "storefront")
AT = "2026-11-29T12:00:00Z"


def test_the_cli_json_names_every_workload_namespace_and_the_cluster(
    capsys: pytest.CaptureFixture[str],
) -> None:
    body = orjson.loads(run(capsys, "-f", STOREFRONT, "--now", AT, "-o", "json"))
    assert [(w["kind"], w["name"]) for w in body["workloads"]] == [
        ("Deployment", "api"),
        ("Deployment", "web"),
    ]
    assert [n["namespace"] for n in body["namespaces"]] == ["shop"]
    # web: 2 pods 400m → 250m; api: 1 pod 500m → 300m (its proactive row).
    assert body["cluster"]["cpuCores"] == {
        "manifest": 1.3,
        "now": 1.3,
        "recommended": 0.8,
        "applied": 0.8,
    }
    assert body["cluster"]["saved"] == {"cpuCores": 0.0, "memoryGiB": 0.0}
    assert "prices" not in body


def test_the_cli_csv_and_table_carry_the_same_rows(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("-f", STOREFRONT, "--now", AT, "--cpu-price", "0.04", "--memory-price", "0.005")
    rows = list(csv.reader(io.StringIO(run(capsys, *args, "-o", "csv"))))
    header, *body = rows
    assert header[:5] == ["SCOPE", "NAMESPACE", "WORKLOAD", "CONTAINER", "PODS"]
    assert [r[0] for r in body] == [
        "workload",
        "container",
        "workload",
        "container",
        "namespace",
        "cluster",
    ]
    cluster = dict(zip(header, body[-1], strict=True))
    assert cluster["CPU_NOW"] == "1.300" and cluster["RECLAIM_CPU"] == "0.500"
    assert cluster["CURRENCY"] == "USD"
    assert float(cluster["RECLAIM_MONTHLY"]) == pytest.approx(
        float(cluster["COST_NOW"]) - float(cluster["COST_RECOMMENDED"]), abs=0.011
    )
    table = run(capsys, *args).splitlines()
    assert table[0].split("  ")[0] == "NAMESPACE"
    # The table names a container only for a workload that has several.
    assert [line.split()[1] for line in table[1:]] == [
        "Deployment/api",
        "Deployment/web",
        "(namespace)",
        "(cluster)",
    ]


def one_line_exit_2(*argv: str) -> str:
    done = subprocess.run(
        [KERF, "report", *argv], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    assert "not a price" in one_line_exit_2("-f", STOREFRONT, "--cpu-price", "-1")[-60:]
    assert "no such file" in one_line_exit_2("-f", str(tmp_path / "nothing"))
    assert "no such file" in one_line_exit_2("--kubeconfig", str(tmp_path / "nothing"))
    unreachable = tmp_path / "kubeconfig"
    unreachable.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
    )
    assert "listing Namespace" in one_line_exit_2("--kubeconfig", str(unreachable))


async def running_pods(api: client.ApiClient, namespace: str) -> int:
    listed = await client.CoreV1Api(api).list_namespaced_pod(namespace)
    return sum(1 for p in listed.items if p.status.phase == "Running")


async def test_a_cluster_is_listed_once_and_reported_as_the_files_are(tmp_path: Path) -> None:
    async with running_sim(tmp_path) as sim, sim.api_client() as api:
        await install_shop(sim, api)
        await client.AppsV1Api(api).create_namespaced_deployment(
            "shop", cluster_deployment("web", "shop", replicas=2)
        )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while await running_pods(api, "shop") < 2:
            assert loop.time() < deadline, "timed out waiting for web's two pods to run"
            await asyncio.sleep(0.05)
        view = await snapshot_view(sim.kubeconfig_path)
    report = build_report(view, now=NOW)
    (web,) = report.workloads
    # Pods run the manifest's 100m/128Mi; the StaticPolicy asks 250m/256Mi: an upsize.
    assert web.totals.millicores == {
        "manifest": 200,
        "now": 200,
        "recommended": 500,
        "applied": 500,
    }
    assert web.totals.memory_bytes["now"] == GIB // 4
    assert web.totals.memory_bytes["recommended"] == GIB // 2
    assert report.cluster.reclaimable_cores() == pytest.approx(-0.3)
    # Shown as a cost with its reason, not as a negative saving.
    assert web.totals.added["recommended"] == {"cpu": 300, "memory": GIB // 4}
    assert web.totals.freed["recommended"] == {"cpu": 0, "memory": 0}
    assert web.containers[0].upsizes == {"cpu": "StaticPolicy web", "memory": "StaticPolicy web"}


def mixed_view():
    """shop/web (ProactivePolicy): app is throttled and its row asks more CPU and less
    memory; side was OOM-killed and its row asks more memory. blog/cms (StaticPolicy in
    audit mode) asks less: nothing is applied."""
    two = {
        "app": {"requests": {"cpu": "400m", "memory": "512Mi"}},
        "side": {"requests": {"cpu": "100m", "memory": "128Mi"}},
    }
    rows = configmap(
        row("app", requests={"cpu": "600m", "memory": "256Mi"}, throttling=0.5),
        row("side", requests={"cpu": "100m", "memory": "256Mi"}, throttling=None),
    )
    return view(
        *base_objects(replicas=1, containers=two),
        node(),
        proactive(),
        rows,
        pod(node="node-a", containers=two, statuses=[oom_status("side")]),
        namespace("blog"),
        strategy(namespace="blog"),
        deployment("cms", namespace="blog", replicas=1),
        static("cms-static", namespace="blog", mode="audit"),
        pod("cms-7d4b9-aaaaa", workload="cms", namespace="blog", node="node-a"),
    )


def test_an_upsize_is_a_cost_with_its_reason_apart_from_what_is_freed() -> None:
    report = build_report(mixed_view(), now=NOW)
    web = next(w for w in report.workloads if w.ref.name == "web")
    app, side = web.containers
    assert (app.name, side.name) == ("app", "side")
    assert app.upsizes == {"cpu": "throttled"}
    assert side.upsizes == {"memory": "OOM-killed"}
    # app frees 256Mi and adds 200m; side adds 128Mi: nothing nets out.
    assert web.totals.freed["recommended"] == {"cpu": 0, "memory": 256 * 1024**2}
    assert web.totals.added["recommended"] == {"cpu": 200, "memory": 128 * 1024**2}
    prices = Prices(0.04, 0.005, "EUR")
    assert prices.added_monthly(web.totals, "recommended") == pytest.approx(
        (0.2 * 0.04 + 0.125 * 0.005) * 730
    )
    assert prices.freed_monthly(web.totals, "recommended") == pytest.approx(0.25 * 0.005 * 730)


def test_the_reason_nothing_is_applied_is_the_decisions() -> None:
    report = build_report(mixed_view(), now=NOW)
    cms = next(w for w in report.workloads if w.ref.name == "cms")
    assert cms.reason == "Audit" and cms.message
    assert cms.totals.freed["recommended"]["cpu"] == 150
    assert cms.totals.freed["applied"] == {"cpu": 0, "memory": 0}
    web = next(w for w in report.workloads if w.ref.name == "web")
    assert web.reason is None


def test_a_workload_at_its_recommendation_has_no_reason_to_show() -> None:
    resized = {"app": {"requests": {"cpu": "250m", "memory": "256Mi"}}}
    v = view(*base_objects(replicas=1), node(), static(), pod(node="node-a", containers=resized))
    assert decide(v, pod(node="node-a", containers=resized)).reason == "NoSignificantChange"
    (web,) = build_report(v, now=NOW).workloads
    assert (web.reason, web.message) == (None, "")


def test_a_static_policys_upsize_names_the_policy() -> None:
    more = {"app": {"requests": {"cpu": "1", "memory": "512Mi"}}}
    v = view(*base_objects(replicas=1), node(), static(containers=more), pod(node="node-a"))
    (web,) = build_report(v, now=NOW).workloads
    assert web.containers[0].upsizes == {"cpu": "StaticPolicy web-static"}


@given(
    st.dictionaries(
        st.sampled_from(("manifest", "now", "recommended", "applied")),
        st.integers(min_value=0, max_value=10**12),
        min_size=4,
    ),
    st.sampled_from(RESOURCES),
)
def test_freed_and_added_are_never_negative_and_net_to_the_change(
    values: dict[str, int], resource: str
) -> None:
    totals = Totals()
    totals.record(resource, values)
    for comparison, (before, after) in COMPARISONS.items():
        freed = totals.freed[comparison][resource]
        added = totals.added[comparison][resource]
        assert freed >= 0 and added >= 0 and min(freed, added) == 0
        assert added - freed == values[after] - values[before]


def test_every_format_names_the_currency(tmp_path: Path) -> None:
    report = build_report(mixed_view(), now=NOW)
    prices = Prices(0.04, 0.005, "EUR")
    table = render_table(table_rows(report, prices), TABLE_WIDTH)
    assert "RECLAIM EUR/MO" in table and "UPSIZE EUR/MO" in table
    assert "EUR/MO" in render_table(table_rows(report, prices, wide=True))
    assert "(EUR/month)" in render_markdown(report, prices)
    assert "EUR per core-hour" in render_html(report, prices, now=NOW)
    assert report_json(report, prices)["prices"]["currency"] == "EUR"
    header, *body = csv_rows(report, prices)
    assert {dict(zip(header, r, strict=True))["CURRENCY"] for r in body} == {"EUR"}


def test_the_table_shows_an_upsize_with_its_reason_and_why_nothing_is_applied() -> None:
    report = build_report(mixed_view(), now=NOW)
    table = render_table(table_rows(report, None), TABLE_WIDTH).splitlines()
    web = next(line for line in table if "Deployment/web" in line)
    # Its two containers' rows follow, each with its reason.
    assert "500m→700m→700m" in web and "+200m +128Mi  " in web
    app = next(line for line in table if line.split()[1:2] == ["app"])
    assert "400m→600m→600m" in app and "+200m throttled" in app
    side = next(line for line in table if line.split()[1:2] == ["side"])
    assert "+128Mi OOM-killed" in side
    cms = next(line for line in table if "Deployment/cms" in line)
    assert cms.rstrip().endswith("Audit")
    assert not any(cell.startswith("-0") or " -" in cell for cell in table if "→ -" in cell)
    header, *body = csv_rows(report, None)
    numeric = [i for i, name in enumerate(header) if name.endswith(("_CPU", "_GIB"))]
    assert all(float(r[i]) >= 0 for r in body for i in numeric)


def test_the_default_table_fits_in_120_columns_and_wide_keeps_every_column() -> None:
    long_ns = "payments-" + "x" * 40
    long_name = "checkout-" + "y" * 54
    v = view(
        namespace(long_ns),
        strategy(namespace=long_ns),
        deployment(long_name, namespace=long_ns, replicas=1),
        static("s", namespace=long_ns, mode="audit"),
        pod(f"{long_name}-7d4b9-aaaaa", workload=long_name, namespace=long_ns, node="node-a"),
        node(),
    )
    report = build_report(v, now=NOW)
    prices = Prices(0.04, 0.005)
    table = render_table(table_rows(report, prices), TABLE_WIDTH).splitlines()
    assert max(len(line) for line in table) <= 120, table
    assert "…" in table[1] and "400m→250m→400m" in table[1]
    wide = render_table(table_rows(report, prices, wide=True)).splitlines()
    assert long_name in wide[1] and "COST NOW USD/MO" in wide[0]


def test_markdown_carries_the_tables_rows() -> None:
    report = build_report(mixed_view(), now=NOW)
    markdown = render_markdown(report, None)
    assert "| shop | Deployment/web |   | 1 | 500m → 700m → 700m |" in markdown
    assert "| shop | Deployment/web | side | 1 |" in markdown
    assert "| blog | Deployment/cms |   | 1 |" in markdown and "Audit: " in markdown
    assert "| **cluster** | 2 |" in markdown


def test_the_json_names_containers_upsize_reasons_and_why_nothing_is_applied() -> None:
    body = report_json(build_report(mixed_view(), now=NOW), Prices(0.04, 0.005, "EUR"))
    cms, web = body["workloads"]
    assert cms["notApplied"]["reason"] == "Audit" and web["notApplied"] is None
    assert [(c["name"], c["upsizeReasons"]) for c in web["containers"]] == [
        ("app", {"cpu": "throttled"}),
        ("side", {"memory": "OOM-killed"}),
    ]
    assert web["added"]["recommended"] == {"cpuCores": 0.2, "memoryGiB": 0.125}
    assert web["freed"]["recommended"] == {"cpuCores": 0.0, "memoryGiB": 0.25}
    assert web["monthlyAdded"]["recommended"] == pytest.approx(6.30, abs=0.01)
