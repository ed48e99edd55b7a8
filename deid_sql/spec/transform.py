"""A declared value transformation of an integer QI: ``transform = "floor" | "round"``, ``scale``.

Real extracts hold ages an integer domain cannot take as they are: infants' ages in fractions
of a year (0.2, 0.7) and ages stored in decades (0.19 for 19 years).  Editing the extract by hand
is a step no one can replay; the spec instead declares how the column becomes the QI's whole
number, and every path (the cells, the gate, the release, views, compiled SQL, dbt models, a
policy file's batches) reads the QI through that one definition (``loading.transform``), so the
released label is always the generalization of the transformed value and a raw value is never
released.

The definition (``loading.transform.transformed`` in Python, the reference its SQL equals on
every engine): ``x`` is the value read from its text, ``v = x * scale``; ``floor`` is ``⌊v + tol⌋``
and ``round`` is ``⌊v + 0.5 + tol⌋`` (half up, as the decimal reads: 14.5 → 15, −2.5 → −2), with
``tol = TOLERANCE · max(1, |v|)``.  The tolerance
undoes binary floating point's error in the product: 0.29 × 100 is 28.999999999999996 in a double,
which is 29 as the extract wrote it.  Values whose |v| exceeds ``LIMIT`` (2^53, past which a double
has no fractions left to floor), text that is no plain numeral, NaN and infinities have no whole
number.  Stdlib only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..errors import Problems

#: the transformations a ``[[qi]]`` may declare, and what each adds before the floor
TRANSFORMS = {"floor": 0.0, "round": 0.5}
TOLERANCE = 1e-9  # relative: a product's rounding error is ~1e-16 of it; a real value this close is the same
LIMIT = 2.0 ** 53  # |x * scale| beyond this has no fraction left; it is no whole number of the QI
TRANSFORM_KEYS = ("transform", "scale")


def parse_transform(q: Mapping[str, Any], kind: str, derived: str | None, where: str,
                    problems: Problems) -> tuple[str | None, float]:
    """A ``[[qi]]``'s ``transform`` and ``scale`` (None and 1 when not given), checked without data:
    only an integer QI read from a column may declare one, and ``scale`` is a positive finite number."""
    how, scale = q.get("transform"), q.get("scale")
    if how is None and scale is None:
        return None, 1.0
    if how is None:
        problems.add(where, f"scale = {scale!r} needs transform = \"floor\" or \"round\" (how the scaled value "
                            f"becomes a whole number)")
        return None, 1.0
    if how not in TRANSFORMS:
        problems.add(where, f"transform = {how!r} must be \"floor\" (whole years: 0.7 → 0) or \"round\" (half up: "
                            f"0.19 with scale = 100 → 19)")
        return None, 1.0
    if kind != "integer":
        problems.add(where, f"transform = {how!r} is for integer QIs (kind = \"integer\"), not kind = {kind!r}; "
                            f"remove transform and scale")
        return None, 1.0
    if derived is not None:
        problems.add(where, f"derived = {derived!r} is counted from the rows, not read from a column: remove "
                            f"transform and scale")
        return None, 1.0
    if scale is None:
        return str(how), 1.0
    if (isinstance(scale, bool) or not isinstance(scale, int | float) or not math.isfinite(scale) or scale <= 0
            or abs(scale) > LIMIT):
        problems.add(where, f"scale = {scale!r} must be a positive number (the factor the column is multiplied by "
                            f"before the {how}, e.g. scale = 100 for ages stored in decades: 0.19 → 19)")
        return None, 1.0
    return str(how), float(scale)


def describe(how: str, scale: float) -> str:
    """The transformation as the spec writes it, for messages: ``transform = "round", scale = 100``."""
    shown = int(scale) if scale == int(scale) else scale
    return f"transform = \"{how}\"" + (f", scale = {shown}" if scale != 1 else "")


__all__ = ["LIMIT", "TOLERANCE", "TRANSFORMS", "TRANSFORM_KEYS", "describe", "parse_transform"]
