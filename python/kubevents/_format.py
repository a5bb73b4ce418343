"""How option values and metrics are written for people: in the sweep command's table and on the plots."""

from __future__ import annotations

import math
from numbers import Integral, Real


def _plain(v: object) -> str | float:
    """The label of anything but a finite fraction (non-numbers as ``str()``, whole numbers as ints); the
    fraction itself as a float, for the caller to write."""
    if isinstance(v, bool) or not isinstance(v, Real):
        return str(v)
    if isinstance(v, Integral):
        return str(int(v))
    x = float(v)
    if not math.isfinite(x):
        return str(x)
    return str(int(x)) if x.is_integer() else x


def option_label(v: object) -> str:
    """An option's value as a person would write it: ints as they are, short decimals as written (``0.01``,
    ``0.0033``), and a rate that is the inverse of an integer as a fraction (``1/300``, not ``0.00333333``)."""
    x = _plain(v)
    if isinstance(x, str):
        return x
    short = f"{x:.4g}"
    if float(short) == x:
        return short
    if 0 < x < 1:
        n = round(1 / x)
        if n > 1 and math.isclose(1 / n, x, rel_tol=1e-9):
            return f"1/{n}"
    return short


def value_label(v: object) -> str:
    """A metric's value in a few characters: counts as integers (``1500``, not ``1.5e+03``), shares and rates
    to three significant digits, large fractional values rounded to an integer."""
    x = _plain(v)
    if isinstance(x, str):
        return x
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.3g}"
