"""Kubex's doc examples against kerf's models, the source of its CRDs: the same verdicts
the real API server gives in test_examples.py, in `make test` without a cluster."""

from __future__ import annotations

import pytest

from app.model.crd import InvalidObject, parse_object
from tests.compat.examples import EXAMPLES, Example

SETTLED = [e for e in EXAMPLES if e.expect != "pending"]
PENDING = [e for e in EXAMPLES if e.expect == "pending"]


def test_every_code_block_of_kubexs_kinds_is_kept() -> None:
    # 36 objects from 31 code blocks of kubex-automation-engine 1.11.0's docs; a fixture
    # lost or added by hand shows here.
    assert len(EXAMPLES) == 36
    assert all(e.text.startswith("# source: densify-dev/helm-charts@") for e in EXAMPLES)


@pytest.mark.parametrize("example", SETTLED, ids=lambda e: e.name)
def test_kerfs_models_give_the_expected_verdict(example: Example) -> None:
    if example.expect == "accepted":
        parse_object(example.obj)
        return
    with pytest.raises(InvalidObject) as refused:
        parse_object(example.obj)
    for field in example.fields:
        assert f"{field}: unknown field" in str(refused.value)


@pytest.mark.parametrize("example", PENDING, ids=lambda e: e.name)
def test_pending_examples_are_still_refused(example: Example) -> None:
    """When the issue lands and kerf accepts one, this fails: mark it `accepted`."""
    with pytest.raises(InvalidObject):
        parse_object(example.obj)
