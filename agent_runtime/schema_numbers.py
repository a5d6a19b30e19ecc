"""`multipleOf` for a JSON Schema from outside, without the crash jsonschema has on numbers beyond a float's range.

jsonschema 4.26 divides in floating point (`instance / multipleOf`, or `instance % multipleOf` for an integer
divisor) and only guards the conversion after it: an integer too large for a float (an MCP server's schema may hold
`"multipleOf": 10**400`, and a value may be as large in a check the app makes itself) raises `OverflowError` out of
the check instead of an answer (python-jsonschema/jsonschema#1515, open). Here the same arithmetic gives the same
result and message wherever jsonschema answers, and exact fractions where floats overflow, as jsonschema itself falls
back to when the quotient does.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from fractions import Fraction
from typing import Any

from jsonschema.exceptions import ValidationError


def multiple_of(validator: Any, divisor: Any, instance: Any, schema: Mapping[str, Any]) -> Iterator[ValidationError]:
    """jsonschema's `multipleOf` (same result and message), exact where floating point overflows."""
    if validator.is_type(instance, "number") and not _is_multiple(instance, divisor):
        yield ValidationError(f"{instance!r} is not a multiple of {divisor}")


def _is_multiple(instance: float, divisor: float) -> bool:
    if any(isinstance(n, float) and not math.isfinite(n) for n in (instance, divisor)):
        return False  # not JSON (`json_limits` and `check_schema` refuse them): never a multiple
    try:
        if isinstance(divisor, float):
            quotient = instance / divisor
            return int(quotient) == quotient
        return not instance % divisor
    except OverflowError:  # an integer beyond a float's range met a float: exact, both being finite
        return (Fraction(instance) / Fraction(divisor)).denominator == 1


__all__ = ["multiple_of"]
