"""ioassess/arrays.py: distinct gives np.unique's answer."""
import numpy as np
import pytest

from ioassess.arrays import distinct


@pytest.mark.parametrize("values", [
    np.random.default_rng(0).integers(0, 1 << 40, 100_000),           # nearly all distinct
    np.random.default_rng(1).integers(0, 5, 10_000).astype(np.uint8),  # few
    np.array([3.0, np.nan, 1.0, np.nan, 3.0, -0.0, 0.0, np.inf]),      # NaNs as one, -0 == 0
    np.array(["b", "a", "b", ""]),
    np.zeros(0, np.int64),
    np.array([[2, 1], [1, 7]]),                                         # flattened
    [5, 5, 2],
])
def test_distinct_is_numpys_unique(values):
    expected = np.unique(values)
    got = distinct(values)
    assert got.dtype == expected.dtype
    assert np.array_equal(got, expected, equal_nan=got.dtype.kind == "f")
