"""Plain, JSON-ready values for the results of the statistics modules: a non-finite number
(NaN, infinity) becomes None, never a number JSON cannot carry."""
import math


def finite_or_none(value):
    """value as a float, or None when it is None or not finite."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def finite_list(values):
    """A list of finite_or_none of each value."""
    return [finite_or_none(value) for value in values]


def ratio_or_none(numerator, denominator):
    """numerator / denominator as a float, or None when the denominator is not a positive finite
    number."""
    return float(numerator / denominator) if denominator and math.isfinite(denominator) and denominator > 0 else None
