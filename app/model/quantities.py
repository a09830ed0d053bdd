"""Kubernetes resource quantities as exact integers.

CPU is held in millicores, memory, ephemeral storage and hugepages in bytes, every other
resource (``nvidia.com/gpu``, ``pods`` ...) as a plain count. Parsing goes through
:class:`fractions.Fraction` so that no value is ever rounded by binary floating point;
conversion to an integer unit rounds *up*, as Kubernetes does (``0.1m`` CPU is 1
millicore, ``0.5`` bytes is 1 byte).

Formatting is canonical: the shortest exact spelling a person would write (``"1"`` not
``"1000m"``, ``"256Mi"`` not ``"268435456"``), and ``parse(format(x)) == x`` for every
integer ``x``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

__all__ = [
    "GPU_FRACTION",
    "MIB",
    "QuantityError",
    "format_bytes",
    "format_cpu",
    "format_fraction",
    "format_resource",
    "parse_quantity",
    "parse_resource",
    "round_up",
    "to_bytes",
    "to_count",
    "to_millicores",
]

MIB = 1024**2

_BINARY_SUFFIXES: dict[str, int] = {
    "Ki": 1024,
    "Mi": 1024**2,
    "Gi": 1024**3,
    "Ti": 1024**4,
    "Pi": 1024**5,
    "Ei": 1024**6,
}
_DECIMAL_SUFFIXES: dict[str, Fraction] = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
# Every suffix as an exact ratio of integers (numerator, denominator): parsing works on
# plain integers, which costs a fraction of Fraction arithmetic.
_SUFFIX_RATIOS: dict[str, tuple[int, int]] = {
    **{s: (f, 1) for s, f in _BINARY_SUFFIXES.items()},
    **{s: (f.numerator, f.denominator) for s, f in _DECIMAL_SUFFIXES.items()},
}
# Largest first, so formatting picks the largest exact suffix.
_BINARY_FORMAT = tuple(reversed(_BINARY_SUFFIXES.items()))
_DECIMAL_FORMAT = tuple((s, int(f)) for s, f in reversed(_DECIMAL_SUFFIXES.items()) if f >= 1000)

# The Kubernetes grammar: <sign><digits>[.<digits>](<binarySI>|<decimalSI>|e<int>|E<int>).
# The suffix alternatives are tried before the exponent so that a lone "E" means exa and
# "1E3" still reads as 1000.
_QUANTITY_RE = re.compile(
    r"(?P<sign>[+-]?)(?:(?P<whole>\d+)(?:\.(?P<frac>\d*))?|\.(?P<only_frac>\d+))"
    r"(?:(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|[eE](?P<exponent>[+-]?\d+))?",
    re.ASCII,  # Kubernetes accepts ASCII digits only, not every Unicode digit
)
# An exponent this large is a typo or an attack, never a resource size; refusing it keeps
# a hostile manifest from making us build a number with millions of digits.
_MAX_EXPONENT = 64
# How much of a rejected text an error message shows: enough to find it, never a page.
_SHOWN_CHARS = 40

_BYTE_RESOURCES = frozenset({"memory", "ephemeral-storage"})
#: KAI's share of one GPU, a pod annotation kerf sizes like a resource of the pod's first
#: container (app/policy/kai.py); held in thousandths, as CPU in millicores.
GPU_FRACTION = "gpu-fraction"


class QuantityError(ValueError):
    """A text that is not a valid Kubernetes quantity."""


def _shown(text: object) -> str:
    """`repr(text)`, cut to a few dozen characters: messages name a value, never carry it."""
    if isinstance(text, str) and len(text) > _SHOWN_CHARS:
        return f"{text[:_SHOWN_CHARS]!r}… ({len(text)} characters)"
    shown = repr(text)
    return shown if len(shown) <= _SHOWN_CHARS else shown[:_SHOWN_CHARS] + "…"


def _ratio(text: str) -> tuple[int, int]:
    """`text` as an exact ratio (numerator, denominator > 0), not reduced.

    No cache: a cache keyed by the texts of admission requests would hold whatever a
    caller chose to send. The shapes Kubernetes serializes (``"2"``, ``"250m"``,
    ``"512Mi"``) take a fast path of string tests and one `int`, which costs about what a
    cache lookup did; everything else goes through the full grammar.
    """
    try:
        if text.isascii():
            if text.isdigit():
                return int(text), 1
            head, tail = text[:-2], text[-2:]
            if tail in _BINARY_SUFFIXES and head.isdigit():
                return int(head) * _BINARY_SUFFIXES[tail], 1
            head, tail = text[:-1], text[-1:]
            if tail in _SUFFIX_RATIOS and head.isdigit():
                multiplier, divisor = _SUFFIX_RATIOS[tail]
                return int(head) * multiplier, divisor
        return _full_ratio(text)
    except ValueError as exc:  # more digits than the interpreter converts (thousands)
        if isinstance(exc, QuantityError):
            raise
        raise QuantityError(f"invalid quantity {_shown(text)}: too many digits") from None


def _full_ratio(text: str) -> tuple[int, int]:
    match = _QUANTITY_RE.fullmatch(text)
    if match is None:
        raise QuantityError(
            f"invalid quantity {_shown(text)}: expected a number with an optional "
            "suffix such as 250m, 1.5Gi, 129M or 1e3"
        )
    whole, frac, only_frac, suffix, exponent = match.group(
        "whole", "frac", "only_frac", "suffix", "exponent"
    )
    numerator = int((whole or "") + (frac or only_frac or ""))
    denominator = 10 ** len(frac or only_frac or "")
    if suffix is not None:
        multiplier, divisor = _SUFFIX_RATIOS[suffix]
        numerator *= multiplier
        denominator *= divisor
    elif exponent is not None:
        power = int(exponent)
        if abs(power) > _MAX_EXPONENT:
            raise QuantityError(f"invalid quantity {_shown(text)}: exponent out of range")
        if power >= 0:
            numerator *= 10**power
        else:
            denominator *= 10**-power
    return (-numerator if match["sign"] == "-" else numerator), denominator


def parse_quantity(text: object) -> Fraction:
    """Parse a Kubernetes quantity (``"250m"``, ``"1.5Gi"``, ``"129e6"``, ``2``) exactly.

    Numbers are accepted because YAML turns ``cpu: 2`` or ``cpu: 0.5`` into one; a float
    is read through its shortest decimal spelling so ``0.1`` means one tenth. Raises
    :class:`QuantityError` naming the text for anything else. The parsers take ``object``
    because they are where a user's values arrive: they check the type themselves, and a
    compiled build (setup.py) would otherwise reject a wrong one with a bare TypeError.
    """
    if isinstance(text, str):
        return Fraction(*_ratio(text))
    # bool is an int subclass, but `cpu: true` is a mistake, not one core.
    if isinstance(text, bool) or not isinstance(text, int | float):
        raise QuantityError(f"invalid quantity {_shown(text)}: expected a string or a number")
    if isinstance(text, float):
        if not math.isfinite(text):
            raise QuantityError(f"invalid quantity {_shown(text)}: not a finite number")
        return Fraction(repr(text))
    return Fraction(text)


def _ceil(value: Fraction) -> int:
    return -(-value.numerator // value.denominator)


def to_millicores(text: object) -> int:
    """CPU quantity in whole millicores, rounded up (``"0.25"`` → 250, ``"1"`` → 1000)."""
    if isinstance(text, str):
        numerator, denominator = _ratio(text)
        return -(-numerator * 1000 // denominator)
    return _ceil(parse_quantity(text) * 1000)


def to_bytes(text: object) -> int:
    """Byte quantity (memory, storage) in whole bytes, rounded up (``"1Ki"`` → 1024)."""
    if isinstance(text, str):
        numerator, denominator = _ratio(text)
        return -(-numerator // denominator)
    return _ceil(parse_quantity(text))


def to_count(text: object) -> int:
    """Countable resource (GPUs, pods ...) as an integer, rounded up (``"1.5"`` → 2)."""
    # Bytes and counts share the rule "whole units, rounded up"; only the name differs.
    return to_bytes(text)


def _is_byte_resource(resource: str) -> bool:
    return resource in _BYTE_RESOURCES or resource.startswith("hugepages-")


def parse_resource(resource: str, text: object) -> int:
    """Parse ``text`` in the integer unit of ``resource``.

    ``cpu`` → millicores, ``gpu-fraction`` → thousandths of a GPU; ``memory``,
    ``ephemeral-storage``, ``hugepages-*`` → bytes; anything else → a count.
    """
    if resource == "cpu" or resource == GPU_FRACTION:
        return to_millicores(text)
    return to_bytes(text)


def _whole_spelling(text: str, resource: str) -> tuple[str, str] | None:
    """(digits, suffix) of a quantity spelled as a whole number without leading zeros and
    at most one suffix whose unit is a whole amount of `resource` (`250m` of CPU, `512Mi`,
    `2`: how Kubernetes and kerf write them); None for any other spelling, including those
    whose amount is rounded up (`5u` of CPU, `3m` of memory)."""
    if text[-2:] in _BINARY_SUFFIXES:
        end = len(text) - 2
    elif text[-1:] in _DECIMAL_SUFFIXES:
        end = len(text) - 1
    else:
        end = len(text)
    digits, suffix = text[:end], text[end:]
    if not (digits.isascii() and digits.isdigit() and (digits[0] != "0" or end == 1)):
        return None
    if suffix:
        numerator, denominator = _SUFFIX_RATIOS[suffix]
        if numerator * (1000 if resource == "cpu" or resource == GPU_FRACTION else 1) % denominator:
            return None
    return digits, suffix


def same_quantity(resource: str, a: object, b: object) -> bool:
    """Whether two spellings name one amount of `resource` (`1000m` and `1` do), as
    `parse_resource` reads them; a text that is not a quantity equals nothing. Two whole
    numbers with the same exact suffix are compared by their digits, without parsing:
    the admission patch asks this for every value it may set."""
    if isinstance(a, str) and isinstance(b, str):
        mine, theirs = _whole_spelling(a, resource), _whole_spelling(b, resource)
        if mine is not None and theirs is not None and mine[1] == theirs[1]:
            return mine[0] == theirs[0]
    try:
        return parse_resource(resource, a) == parse_resource(resource, b)
    except QuantityError:
        return False


def resource_amounts(values: Mapping[str, object] | None) -> dict[str, int | None]:
    """{resource: amount} of one requests or limits map, so maps compare by amount
    (`1000m` equals `1`); an unparsable quantity is None."""
    out: dict[str, int | None] = {}
    for resource, quantity in (values or {}).items():
        try:
            out[resource] = parse_resource(resource, str(quantity))
        except QuantityError:
            out[resource] = None
    return out


def same_values(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Two container -> {requests, limits} maps hold the same amounts (1000m == 1)."""
    if a == b:  # spelled alike: no quantity to parse
        return True
    if set(a) != set(b):
        return False
    return all(_field_amounts(a[c]) == _field_amounts(b[c]) for c in a)


def _field_amounts(values: Mapping[str, Any]) -> dict[str, dict[str, int | None]]:
    return {fld: resource_amounts(resources) for fld, resources in values.items() if resources}


def format_cpu(millicores: int) -> str:
    """Canonical CPU quantity: whole cores without a suffix (``"2"``), else ``"250m"``."""
    if millicores % 1000 == 0:
        return str(millicores // 1000)
    return f"{millicores}m"


def format_fraction(thousandths: int) -> str:
    """A KAI `gpu-fraction` as KAI reads it, a decimal: 460 → ``"0.46"``, 1000 → ``"1"``."""
    whole, part = divmod(thousandths, 1000)
    return f"{whole}.{part:03d}".rstrip("0").rstrip(".") if part else str(whole)


def format_bytes(n: int) -> str:
    """Canonical byte quantity: the largest exact binary suffix (``"256Mi"``), else the
    largest exact decimal suffix (``"129M"``), else the plain integer."""
    if n == 0:
        return "0"
    for suffix, size in _BINARY_FORMAT:
        if n % size == 0:
            return f"{n // size}{suffix}"
    for suffix, size in _DECIMAL_FORMAT:
        if n % size == 0:
            return f"{n // size}{suffix}"
    return str(n)


def format_resource(resource: str, value: int) -> str:
    """Format ``value`` (in the unit :func:`parse_resource` gives ``resource``) canonically."""
    if resource == "cpu":
        return format_cpu(value)
    if resource == GPU_FRACTION:
        return format_fraction(value)
    if _is_byte_resource(resource):
        return format_bytes(value)
    return str(value)


def round_up(value: int, unit: int) -> int:
    """Round ``value`` up to a whole multiple of ``unit`` (e.g. a whole MiB), ``unit`` > 0."""
    if unit <= 0:
        raise ValueError(f"unit must be positive, got {unit}")
    return -(-value // unit) * unit
