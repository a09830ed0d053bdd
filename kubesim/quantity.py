"""Kubernetes resource quantities (`250m`, `1.5Gi`, `2e3`) as exact fractions."""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

_SUFFIX: dict[str, Fraction] = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+)(?:(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|[eE]([+-]?[0-9]+))?$")


class QuantityError(ValueError):
    """A string that is not a valid quantity."""


def parse(value: str | int | float) -> Fraction:
    """Parse a quantity to an exact number of base units (cores, bytes, ...)."""
    if isinstance(value, bool):
        raise QuantityError(f"quantities must match the regular expression: {value!r}")
    if isinstance(value, int | float):
        return Fraction(str(value))
    match = _QUANTITY.match(value.strip())
    if not match or match.group(1) in {"", ".", "+", "-"}:
        raise QuantityError(
            "quantities must match the regular expression "
            "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        )
    number, suffix, exponent = match.groups()
    try:
        base = Fraction(number)
    except ValueError as exc:
        raise QuantityError(f"invalid number {number!r}") from exc
    if exponent is not None:
        return base * Fraction(10) ** int(exponent)
    return base * _SUFFIX[suffix or ""]


DECIMAL_SI = "DecimalSI"
BINARY_SI = "BinarySI"
DECIMAL_EXPONENT = "DecimalExponent"
_DECIMAL_SUFFIX = {
    -9: "n",
    -6: "u",
    -3: "m",
    0: "",
    3: "k",
    6: "M",
    9: "G",
    12: "T",
    15: "P",
    18: "E",
}
_BINARY_SUFFIX = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_NANO = 10**9


def form_of(value: str | int | float) -> str:
    """The format a written quantity keeps when the real server prints it again: binary
    for `Ki`…`Ei`, exponent for `e3`, decimal otherwise."""
    if isinstance(value, str):
        match = _QUANTITY.match(value.strip())
        if match and match.group(2) in _BINARY_SUFFIX[1:]:
            return BINARY_SI
        if match and match.group(3) is not None:
            return DECIMAL_EXPONENT
    return DECIMAL_SI


def canonical(value: Fraction, form: str = DECIMAL_SI) -> str:
    """`value` as resource.Quantity's String() prints it in `form`: `1500m`, `1536Mi`,
    `100M`. The real server answers with this form, and words its errors with it."""
    nanos = abs(value) * _NANO
    # Quantities keep nine decimals, rounding away from zero, as ParseQuantity does.
    mantissa = -(-nanos.numerator // nanos.denominator)
    if mantissa == 0:
        return "0"
    sign = "-" if value < 0 else ""
    if form == BINARY_SI and mantissa % _NANO == 0 and mantissa >= 1024 * _NANO:
        units, power = mantissa // _NANO, 0
        while units % 1024 == 0 and power < len(_BINARY_SUFFIX) - 1:
            units, power = units // 1024, power + 1
        return f"{sign}{units}{_BINARY_SUFFIX[power]}"
    exponent = -9
    while mantissa % 10 == 0:
        mantissa, exponent = mantissa // 10, exponent + 1
    shift = exponent % 3
    mantissa, exponent = mantissa * 10**shift, exponent - shift
    if form == DECIMAL_EXPONENT:
        suffix = f"e{exponent}" if exponent else ""
    else:
        suffix = _DECIMAL_SUFFIX.get(exponent, f"e{exponent}")
    return f"{sign}{mantissa}{suffix}"


@dataclass(frozen=True, slots=True)
class Amount:
    """A quantity as resource.Quantity holds it: an exact value and the format it prints
    in. Sums take the format of their first non-zero term, as Quantity.Add does, so a
    quota's `used` reads as the real one's does."""

    value: Fraction
    form: str = DECIMAL_SI

    @classmethod
    def of(cls, raw: str | int | float) -> Amount:
        """A written quantity (`250m`, `1Gi`)."""
        return cls(parse(raw), form_of(raw))

    def __add__(self, other: Amount) -> Amount:
        return Amount(self.value + other.value, self.form if self.value else other.form)

    def __sub__(self, other: Amount) -> Amount:
        return Amount(self.value - other.value, self.form if self.value else other.form)

    def __str__(self) -> str:
        return canonical(self.value, self.form)
