"""What the polynomial fits of tools/golden (fit_exp2.py, fit_gelu.py) share. Needs numpy only."""
import numpy as np


def lawson(a, b, iterations):
    """The coefficients c minimising max |a c - b| over the rows (sample points) of a, by Lawson's
    iteratively reweighted least squares; returns c and that largest error."""
    w = np.full(len(b), 1 / len(b))
    for _ in range(iterations):
        sw = np.sqrt(w)
        c, *_ = np.linalg.lstsq(a * sw[:, None], b * sw, rcond=None)
        err = np.abs(a @ c - b)
        w = w * err
        w /= w.sum()
    return c, err.max()


def fma32(a, b, c):
    """A fused multiply-add in f32: a product of two floats is exact in a double, the sum rounded
    to f32 once."""
    return np.float32(np.float64(a) * np.float64(b) + np.float64(c))
