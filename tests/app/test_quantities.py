import tracemalloc
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.model.quantities import (
    MIB,
    QuantityError,
    format_bytes,
    format_cpu,
    format_resource,
    parse_quantity,
    parse_resource,
    round_up,
    same_quantity,
    to_bytes,
    to_count,
    to_millicores,
)


@pytest.mark.parametrize(
    ("text", "millicores"),
    [
        ("250m", 250),
        ("0.5", 500),
        ("1", 1000),
        ("1e3", 1_000_000),
        ("2", 2000),
        (".5", 500),
        ("1.", 1000),
        ("+1", 1000),
        ("0", 0),
        ("1.5", 1500),
        ("100u", 1),  # rounds up to a whole millicore
        ("0.1m", 1),
        ("1500000n", 2),
        ("1k", 1_000_000),
        (2, 2000),
        (0.5, 500),
        (0.1, 100),
    ],
)
def test_cpu_forms(text: str | int | float, millicores: int) -> None:
    assert to_millicores(text) == millicores


@pytest.mark.parametrize(
    ("text", "nbytes"),
    [
        ("128974848", 128974848),
        ("129e6", 129_000_000),
        ("129M", 129_000_000),
        ("123Mi", 123 * MIB),
        ("1Gi", 1024**3),
        ("1.5Gi", 1536 * MIB),
        ("1Ki", 1024),
        ("1Ti", 1024**4),
        ("1Pi", 1024**5),
        ("1Ei", 1024**6),
        ("1k", 1000),
        ("1G", 10**9),
        ("1T", 10**12),
        ("1P", 10**15),
        ("1E", 10**18),
        ("1E3", 1000),
        ("1e-3", 1),  # a thousandth of a byte rounds up
        ("100m", 1),
        ("0.5", 1),
        ("12E+2", 1200),
        (1073741824, 1024**3),
    ],
)
def test_byte_forms(text: str | int, nbytes: int) -> None:
    assert to_bytes(text) == nbytes


def test_parse_is_exact() -> None:
    assert parse_quantity("0.1") == Fraction(1, 10)
    assert parse_quantity("1.5Gi") == Fraction(3 * 1024**3, 2)
    assert parse_quantity("-250m") == Fraction(-1, 4)
    assert parse_quantity("1e-2") == Fraction(1, 100)


def test_negative_rounds_up_toward_positive() -> None:
    assert to_millicores("-0.0005") == 0
    assert to_millicores("-1") == -1000


@pytest.mark.parametrize(
    "text",
    [
        "",
        "abc",
        "12Mb",
        "1.2.3",
        "1 Gi",
        " 1",
        "1i",
        "Gi",
        "1e",
        "1ee3",
        "--1",
        "1KI",
        "1mi",
        "1e999",
        ".",
        "1e3.5",
        "\u0661",
    ],
)
def test_rejects_garbage(text: str) -> None:
    with pytest.raises(QuantityError, match="invalid quantity"):
        parse_quantity(text)


def test_error_names_the_text() -> None:
    with pytest.raises(QuantityError) as info:
        to_bytes("12Mb")
    assert "'12Mb'" in str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("value", [True, None, float("nan"), float("inf"), [1]])
def test_rejects_non_quantities(value: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(value)  # type: ignore[arg-type]


def test_to_count_rounds_up() -> None:
    assert to_count("1") == 1
    assert to_count("1.5") == 2
    assert to_count("2k") == 2000
    assert to_count(4) == 4


@pytest.mark.parametrize(
    ("resource", "text", "value"),
    [
        ("cpu", "250m", 250),
        ("memory", "1Gi", 1024**3),
        ("ephemeral-storage", "2G", 2 * 10**9),
        ("hugepages-2Mi", "4Mi", 4 * MIB),
        ("nvidia.com/gpu", "2", 2),
        ("pods", "110", 110),
    ],
)
def test_parse_resource_dispatch(resource: str, text: str, value: int) -> None:
    assert parse_resource(resource, text) == value


@pytest.mark.parametrize(
    ("millicores", "text"),
    [(1000, "1"), (250, "250m"), (0, "0"), (1500, "1500m"), (4000, "4"), (1, "1m")],
)
def test_format_cpu(millicores: int, text: str) -> None:
    assert format_cpu(millicores) == text


@pytest.mark.parametrize(
    ("nbytes", "text"),
    [
        (268435456, "256Mi"),
        (0, "0"),
        (1024, "1Ki"),
        (1536 * MIB, "1536Mi"),
        (1024**3, "1Gi"),
        (129_000_000, "129M"),
        (128974848, "123Mi"),
        (1000, "1k"),
        (2000 * 1024, "2000Ki"),
        (10**9, "1G"),  # 2**9 * 5**9: no binary suffix divides it
        (10**18, "976562500000000Ki"),  # binary wins whenever it is exact
        (1024**6 * 3, "3Ei"),
        (1023, "1023"),
        (1, "1"),
    ],
)
def test_format_bytes(nbytes: int, text: str) -> None:
    assert format_bytes(nbytes) == text


def test_format_resource_dispatch() -> None:
    assert format_resource("cpu", 2000) == "2"
    assert format_resource("memory", 256 * MIB) == "256Mi"
    assert format_resource("hugepages-1Gi", 1024**3) == "1Gi"
    assert format_resource("ephemeral-storage", 10**9) == "1G"
    assert format_resource("nvidia.com/gpu", 1024) == "1024"


def test_round_up() -> None:
    assert round_up(0, MIB) == 0
    assert round_up(1, MIB) == MIB
    assert round_up(MIB, MIB) == MIB
    assert round_up(501, 1) == 501
    assert round_up(-1, 10) == 0
    with pytest.raises(ValueError):
        round_up(5, 0)


_INTS = st.integers(min_value=-(2**70), max_value=2**70)


@given(_INTS)
def test_cpu_round_trip(millicores: int) -> None:
    assert to_millicores(format_cpu(millicores)) == millicores


@given(_INTS)
def test_bytes_round_trip(nbytes: int) -> None:
    assert to_bytes(format_bytes(nbytes)) == nbytes


@given(st.integers(min_value=0, max_value=2**40).map(lambda n: n * MIB))
def test_mib_multiples_format_binary(nbytes: int) -> None:
    assert format_bytes(nbytes).endswith(("Mi", "Gi", "Ti", "Pi", "Ei")) or nbytes == 0


@given(_INTS)
def test_count_round_trip(count: int) -> None:
    assert to_count(format_resource("nvidia.com/gpu", count)) == count


@given(st.sampled_from(["cpu", "memory", "pods", "hugepages-2Mi"]), st.integers(0, 2**50))
def test_resource_round_trip(resource: str, value: int) -> None:
    assert parse_resource(resource, format_resource(resource, value)) == value


@given(st.integers(0, 10**6), st.integers(1, 10**4))
def test_round_up_properties(value: int, unit: int) -> None:
    rounded = round_up(value, unit)
    assert rounded % unit == 0
    assert value <= rounded < value + unit


@given(
    sign=st.sampled_from(["", "+", "-"]),
    whole=st.text("0123456789", max_size=25),
    frac=st.none() | st.text("0123456789", max_size=12),
    suffix=st.sampled_from(
        ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
        + ["e3", "E-2", "e+5", "e0"]
    ),
)
def test_fast_and_full_grammar_agree(sign: str, whole: str, frac: str | None, suffix: str) -> None:
    """The fast path for plain forms gives what the full grammar gives, exactly."""
    text = sign + whole + ("" if frac is None else "." + frac) + suffix
    if not (whole or frac):
        with pytest.raises(QuantityError):
            parse_quantity(text)
        return
    scale = 10 ** len(frac or "")
    number = Fraction(int((whole + (frac or "")) or "0"), scale)
    ratios = {
        "n": Fraction(1, 10**9),
        "u": Fraction(1, 10**6),
        "m": Fraction(1, 1000),
        "k": 10**3,
        "M": 10**6,
        "G": 10**9,
        "T": 10**12,
        "P": 10**15,
        "E": 10**18,
        "Ki": 2**10,
        "Mi": 2**20,
        "Gi": 2**30,
        "Ti": 2**40,
        "Pi": 2**50,
        "Ei": 2**60,
        "e3": 10**3,
        "E-2": Fraction(1, 100),
        "e+5": 10**5,
        "e0": 1,
        "": 1,
    }
    expected = number * ratios[suffix] * (-1 if sign == "-" else 1)
    assert parse_quantity(text) == expected
    assert to_millicores(text) == -(-expected * 1000 // 1)
    assert to_bytes(text) == -(-expected // 1)


def test_huge_texts_are_quantity_errors_with_short_messages() -> None:
    """Thousands of digits: a QuantityError (not the interpreter's ValueError) whose
    message shows the head of the text, not all of it."""
    for text in ["9" * 5000, "1." + "0" * 5000 + "1Mi", "x" * 100_000]:
        with pytest.raises(QuantityError) as caught:
            to_millicores(text)
        assert len(str(caught.value)) < 200


def test_parsing_keeps_nothing_of_the_texts() -> None:
    """No cache keyed by the text: parsing 10,000 distinct long quantities (as admission
    requests could send) leaves no memory behind."""
    texts = [f"{n:060d}m" for n in range(10_000)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for text in texts:
            to_millicores(text)
            to_bytes(text)
        retained = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert retained < 64 * 1024


def test_resource_amounts_compare_by_amount() -> None:
    from app.model.quantities import resource_amounts

    assert resource_amounts({"cpu": "1000m", "memory": "1Gi"}) == resource_amounts(
        {"cpu": "1", "memory": "1073741824"}
    )
    assert resource_amounts({"cpu": "lots"}) == {"cpu": None}
    assert resource_amounts(None) == {}


_SUFFIXES = ["", "m", "k", "M", "Ki", "Mi", "Gi", "n", "u"]


def _spelling(zeros: int, digits: int, suffix: str) -> str:
    return "0" * zeros + str(digits) + suffix


_SPELLING = st.builds(
    _spelling, st.integers(0, 2), st.integers(0, 5000), st.sampled_from(_SUFFIXES)
)


@given(resource=st.sampled_from(["cpu", "memory"]), a=_SPELLING, b=_SPELLING)
def test_same_quantity_is_equality_of_the_parsed_amounts(resource: str, a: str, b: str) -> None:
    # The shortcut for whole numbers with one suffix must answer what parsing answers.
    assert same_quantity(resource, a, b) == (
        parse_resource(resource, a) == parse_resource(resource, b)
    )


@given(
    resource=st.sampled_from(["cpu", "memory"]),
    suffix=st.sampled_from(_SUFFIXES),
    a=st.integers(0, 5000),
    b=st.integers(0, 5000),
)
def test_same_quantity_with_one_suffix_is_equality_of_the_parsed_amounts(
    resource: str, suffix: str, a: int, b: int
) -> None:
    # Sub-unit suffixes round up (5u and 3u of CPU are both 1 millicore): the digits alone
    # do not decide those.
    first, second = _spelling(0, a, suffix), _spelling(0, b, suffix)
    assert same_quantity(resource, first, second) == (
        parse_resource(resource, first) == parse_resource(resource, second)
    )


def test_rounded_spellings_are_compared_by_their_amounts() -> None:
    assert same_quantity("cpu", "5u", "3u")
    assert same_quantity("memory", "5m", "3m")
    assert not same_quantity("cpu", "5m", "3m")


@pytest.mark.parametrize(("a", "b"), [("bogus", "1"), ("1", "bogus"), ("١٠m", "10m")])
def test_a_text_that_is_not_a_quantity_is_the_same_as_nothing(a: str, b: str) -> None:
    assert not same_quantity("cpu", a, b)
