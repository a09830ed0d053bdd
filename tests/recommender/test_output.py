"""`kerf recommend`'s table: a reason shared by several workloads is said once."""

from __future__ import annotations

import io
from datetime import UTC, datetime

from app.model.owners import WorkloadRef
from app.recommend.rules import Refusal
from recommender.analyze import Analysis, Outcome, _failed
from recommender.output import write_table

NOW = datetime(2026, 12, 1, tzinfo=UTC)
API, WEB, CART = (WorkloadRef("Deployment", "shop", name) for name in ("api", "web", "cart"))
UNREACHABLE = "http://p:9090/api/v1/query_range: ClientConnectorError: Cannot connect"


def table(analysis: Analysis) -> str:
    out = io.StringIO()
    write_table(analysis, out)
    return out.getvalue()


def test_a_failed_run_names_the_workloads_and_leaves_its_message_to_stderr() -> None:
    text = table(_failed(NOW, [API, WEB], Refusal("PrometheusUnreachable", UNREACHABLE)))
    assert text.count("PrometheusUnreachable") == 1
    assert UNREACHABLE not in text
    assert "2 workloads: PrometheusUnreachable\n    shop Deployment/api\n" in text
    assert "    shop Deployment/web\n" in text


def test_workloads_refused_alike_are_one_entry_and_others_their_own() -> None:
    young = Refusal("TooLittleHistory", "12h of usage, 24h needed")
    analysis = Analysis(
        analyzed_at=NOW,
        outcomes=[
            Outcome(API, refusal=young),
            Outcome(WEB, refusal=young),
            Outcome(CART, refusal=Refusal("NoSeries", "no cpu series")),
        ],
    )
    text = table(analysis)
    assert text.count("12h of usage, 24h needed") == 1
    assert "  2 workloads: TooLittleHistory: 12h of usage, 24h needed\n" in text
    assert "  shop Deployment/cart: NoSeries: no cpu series\n" in text
