"""Small operations on numpy arrays that every layer uses."""
import numpy as np


def distinct(values):
    """The distinct values, sorted (np.unique's plain answer, NaNs as one), by a sort: numpy's
    own hashes them since 2.3, which takes many times longer where most values are distinct and
    imports numpy.ma on first use."""
    values = np.sort(np.asarray(values).ravel())
    if len(values) < 2:
        return values
    new = np.empty(len(values), bool)
    new[0] = True
    np.not_equal(values[1:], values[:-1], out=new[1:])
    if values.dtype.kind in "fc":
        new[1:] &= ~(np.isnan(values[1:]) & np.isnan(values[:-1]))
    return values[new]
