"""Kubernetes resource quantities (`250m`, `1.5Gi`, `2e3`) as exact fractions."""

from __future__ import annotations

import re
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
