"""app.store.yamlload gives exactly what PyYAML's safe loader (libyaml's when present) gives,
errors included, faster."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.store.yamlload import LOADER, load_all


def safe(text: str) -> list[Any]:
    return list(yaml.load_all(text, Loader=LOADER))


CASES = [
    "a: 1\nb: -2\nc: 0x1f\nd: 1_000\ne: 3.5\nf: .inf\ng: -.Inf\nh: 1e3\n",
    "yes: [yes, no, true, False, on, Off, y, n]\n",
    "n: [~, null, Null, '', \"\", ]\nempty:\n",
    "t: 2026-11-29T12:00:00Z\nd: 2026-11-29\nq: '2026-11-29'\n",
    's: "quoted: 1"\nplain: hello world\nmulti: |\n  line 1\n  line 2\nfolded: >\n  a\n  b\n',
    "---\na: 1\n---\n---\n- x\n- {y: [1, {z: 2}]}\n...\n",
    "{apiVersion: v1, kind: Namespace, metadata: {name: shop, labels: {a: 'b'}}}\n",
    "base: &b {cpu: 1}\nderived:\n  <<: *b\n  memory: 2\nalias: *b\n",
    "str: !!str 123\nint: !!int '7'\nbin: !!binary aGVsbG8=\nset: !!set {a, b}\n",
    "? [complex, key]\n: value\n",
    "=: value key\n'<<': quoted merge\nüñí: ✓\n",
    "- - - deep\n    - [1, 2]\n- last\n",
    "0: zero\n1.5: float key\ntrue: bool key\n~: null key\n",
    "",
    "# only a comment\n",
    "plain\n",
]


@pytest.mark.parametrize("text", CASES)
def test_same_objects_as_the_safe_loader(text: str) -> None:
    try:
        expected: Any = safe(text)
    except yaml.YAMLError as exc:
        with pytest.raises(type(exc)):
            load_all(text)
        return
    assert load_all(text) == expected


@pytest.mark.parametrize(
    "text", ["a: [unclosed\n", "a: 1\n b: 2\n", "- a\nb: c\n", "x: !!int nope\n", "k: *nope\n"]
)
def test_errors_are_the_safe_loaders(text: str) -> None:
    # A bad explicit tag (`!!int nope`) is a ValueError in PyYAML, not a YAMLError.
    with pytest.raises((yaml.YAMLError, ValueError)) as expected:
        safe(text)
    with pytest.raises((yaml.YAMLError, ValueError)) as got:
        load_all(text)
    assert type(got.value) is type(expected.value)
    assert str(got.value) == str(expected.value)


SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=12)
    | st.sampled_from(["yes", "No", "~", "0o17", "1:30", "2026-11-29", "<<", "=", "-", ".5"])
)
TREES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=6) | st.integers(), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(TREES, min_size=1, max_size=3), st.sampled_from([None, True, False]))
def test_any_dumped_document_loads_the_same(docs: list[Any], flow: bool | None) -> None:
    text = yaml.safe_dump_all(docs, default_flow_style=flow, allow_unicode=True)
    assert load_all(text) == safe(text)
