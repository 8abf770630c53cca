"""Fits the polynomials of quiver's softmax 2^x (engine/kernels/cpu/vec.h, vec_avx512.cc).

2^r on [-1/2, 1/2] as 1 + c1 r + ... + cd r^d, the coefficients minimising the largest relative
error (Lawson's iteratively reweighted least squares on Chebyshev points), then rounded to f32;
prints them, the fit's error, and the worst error in ulps of the whole f32 computation (n =
nearest integer to x, r = x - n, Horner's rule with one rounding per multiply-add, times 2^n)
over x in [-126, 0]. Needs numpy only.

  python3 tools/golden/fit_exp2.py 6   # the f32 softmax (vec::kExp2P)
  python3 tools/golden/fit_exp2.py 4   # the bf16 products' softmax (vec_avx512.cc)
"""
import sys

import numpy as np

from minimax import fma32, lawson


def fit(degree):
    r = np.cos(np.linspace(0, np.pi, 20001)) * 0.5
    target = np.exp2(r)
    a = np.stack([r**j for j in range(1, degree + 1)], 1) / target[:, None]
    b = 1 - 1 / target
    return lawson(a, b, 3000)


def worst_ulps(c32):
    x = np.float32(-np.concatenate([np.linspace(0, 126, 4000001), np.geomspace(1e-8, 1, 200001)]))
    n = np.rint(x).astype(np.float32)
    r = np.float32(x - n)
    p = np.full_like(r, c32[-1])
    for j in range(len(c32) - 2, -1, -1):
        p = fma32(p, r, c32[j])
    p = fma32(p, r, np.float32(1))
    y = np.float32(np.ldexp(np.float64(p), n.astype(int)))
    want = np.exp2(np.float64(x))
    normal = want >= 2.0**-126
    ulp = np.spacing(np.float32(want[normal])).astype(np.float64)
    rel = np.abs(np.float64(y) - want) / want
    return (np.abs(np.float64(y[normal]) - want[normal]) / ulp).max(), rel[normal].max()


def main():
    degree = int(sys.argv[1]) if len(sys.argv) > 1 else 6
    c, fit_err = fit(degree)
    c32 = np.float32(c)
    ulps, rel = worst_ulps(c32)
    print(f"degree {degree}: fit error {fit_err:.3g} (relative); in f32 {ulps:.3f} ulp, {rel:.3g} relative")
    print(", ".join(f"{float(v):.10e}f" for v in c32))


if __name__ == "__main__":
    main()
