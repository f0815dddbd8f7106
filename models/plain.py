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
