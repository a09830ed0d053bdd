"""Values and texts as a person reads them (`kerf/humanize.py`): kubectl's notation, before →
after, and long texts that wrap or end with `…`, never cut mid-word silently."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from app.model.quantities import format_bytes, format_cpu
from kerf.humanize import ELLIPSIS, change, changes, ordered, quantity, shorten, values, wrap

#: A recorded Event note (RollbackMonitoringStarted) that the demo once cut at 110
#: characters, mid-word: `(adoption thresh`.
NOTE = (
    "turn 1: recommendation 1c6027f520d1aa13 applied; watching 2 pod(s) until "
    "2026-12-03T13:15:09Z (adoption threshold 50%)"
)


def test_quantities_read_as_kubectl_shows_them() -> None:
    assert quantity("cpu", "0.25") == "250m"
    assert quantity("cpu", "1000m") == "1"
    assert quantity("cpu", 2) == "2"
    assert quantity("memory", "268435456") == "256Mi"
    assert quantity("memory", 1024**3) == "1Gi"
    assert quantity("memory", None) == "-"
    assert quantity("memory", "lots") == "lots"  # not a quantity: shown as it is
    assert quantity("nvidia.com/gpu", "1") == "1"


def test_a_change_reads_before_arrow_after_and_an_equal_amount_once() -> None:
    assert change("cpu", "400m", "250m") == "400m → 250m"
    assert change("cpu", "1000m", "1") == "1"
    assert change("memory", None, "256Mi") == "- → 256Mi"
    assert change("memory", "512Mi", None) == "512Mi → -"


def test_maps_read_cpu_and_memory_first() -> None:
    assert ordered(["nvidia.com/gpu", "memory", "cpu", "ephemeral-storage"]) == [
        "cpu",
        "memory",
        "ephemeral-storage",
        "nvidia.com/gpu",
    ]
    assert values({"memory": "256Mi", "cpu": "0.25"}) == "cpu 250m, memory 256Mi"
    assert values({}) == "-"
    before = {"cpu": "400m", "memory": "384Mi"}
    after = {"cpu": "250m", "memory": "402653184"}
    assert changes(before, after) == "cpu 400m → 250m, memory 384Mi"
    assert changes(None, {"cpu": "1"}) == "cpu - → 1"
    assert changes(None, None) == "-"


def test_no_python_repr_or_json_reaches_a_cell() -> None:
    cell = changes({"cpu": "400m", "memory": "384Mi"}, {"cpu": "250m", "memory": "256Mi"})
    assert not any(mark in cell for mark in ("{", "}", "[", "'", '"'))


def test_the_recorded_note_is_cut_after_a_whole_word_with_an_ellipsis() -> None:
    assert shorten(NOTE, 110) == (
        "turn 1: recommendation 1c6027f520d1aa13 applied; watching 2 pod(s) until "
        "2026-12-03T13:15:09Z (adoption…"
    )
    assert shorten(NOTE, len(NOTE)) == NOTE
    assert wrap(NOTE, 60) == [
        "turn 1: recommendation 1c6027f520d1aa13 applied; watching 2",
        "pod(s) until 2026-12-03T13:15:09Z (adoption threshold 50%)",
    ]
    assert wrap(NOTE, 40, max_lines=2) == [
        "turn 1: recommendation 1c6027f520d1aa13",
        "applied; watching 2 pod(s) until…",
    ]


words = st.lists(
    st.text(alphabet="abcdefghij0123456789:;,()%-", min_size=1, max_size=14), min_size=1
)


@given(words=words, width=st.integers(1, 80))
def test_shorten_fits_and_cuts_only_between_words(words: list[str], width: int) -> None:
    text = " ".join(words)
    short = shorten(text, width)
    assert len(short) <= width
    if short == text:
        return
    assert short.endswith(ELLIPSIS)
    kept = short[: -len(ELLIPSIS)]
    assert text.startswith(kept)
    # Kept whole words (the text goes on with a separator), or a first word too long for
    # the line, cut and marked.
    assert (
        kept == ""
        or text[len(kept)] in " ,;:"
        or (" " not in kept and len(words[0]) > width - len(ELLIPSIS))
    )


@given(words=words, width=st.integers(1, 80))
def test_wrap_loses_nothing_and_fits(words: list[str], width: int) -> None:
    text = " ".join(words)
    lines = wrap(text, width)
    assert all(len(line) <= width for line in lines)
    assert "".join(lines).replace(" ", "") == "".join(words)


@given(words=words, width=st.integers(1, 80), max_lines=st.integers(1, 4))
def test_wrap_past_its_lines_ends_with_an_ellipsis(
    words: list[str], width: int, max_lines: int
) -> None:
    whole = wrap(" ".join(words), width)
    lines = wrap(" ".join(words), width, max_lines)
    assert len(lines) <= max_lines and all(len(line) <= width for line in lines)
    if len(whole) > max_lines:
        assert lines[-1].endswith(ELLIPSIS)
    else:
        assert lines == whole


@given(st.integers(0, 2**50))
def test_a_quantity_of_any_amount_is_the_canonical_spelling(n: int) -> None:
    assert quantity("cpu", f"{n}m") == format_cpu(n)
    assert quantity("memory", str(n)) == format_bytes(n)
    assert change("memory", str(n), format_bytes(n)) == format_bytes(n)
