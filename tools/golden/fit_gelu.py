"""Fits the piecewise polynomial of quiver's exact GELU (engine/kernels/cpu/vec.h, vec_avx512.cc).

GELU(x) = x Phi(x), Phi(a) = (1 + erf(a / sqrt 2)) / 2 the normal distribution function. The
kernels take a = min(|x|, 5.625), s = a * (4/3 rounded to f32), i = trunc(s) (an interval of
width 0.75 in [0, 6), 0..7), t = s - i (exact), and Phi(a) as c0[i] + c1[i] t + ... + c6[i] t^6
by Horner's rule with one rounding per multiply-add, the coefficients picked per lane by one
permutation each; then x p, with p = Phi(a) for x >= 0 and 1 - Phi(a) for x < 0. Each interval's
polynomial minimises the largest absolute error of Phi (Lawson's iteratively reweighted least
squares on Chebyshev points); this prints the coefficients rounded to f32 as vec.h holds them,
the fit's error, and the worst error of the whole f32 computation against GELU in double over a
dense sweep, beside that of the rational erf it replaced (z P(z^2) / Q(z^2), one division).
Needs numpy only.

  python3 tools/golden/fit_gelu.py
"""
import math

import numpy as np

from minimax import fma32, lawson

INTERVALS, WIDTH, CLAMP, DEGREE = 8, 0.75, 5.625, 6
ERF = np.vectorize(math.erf)


def phi(a):
    return 0.5 * (1 + ERF(np.asarray(a, np.float64) / math.sqrt(2)))


def fit(interval):
    t = (1 - np.cos(np.linspace(0, np.pi, 4001))) / 2  # [0, 1], denser at the ends
    target = phi((interval + t) * WIDTH)
    a = np.stack([t**j for j in range(DEGREE + 1)], 1)
    return lawson(a, target, 1000)


def gelu_pieces(x, coef):
    x = np.float32(x)
    a = np.minimum(np.float32(CLAMP), np.abs(x))
    s = np.float32(a * np.float32(INTERVALS / (INTERVALS * WIDTH)))
    i = np.trunc(s).astype(np.int64)
    t = np.float32(s - np.float32(i))
    p = coef[DEGREE][i]
    for j in range(DEGREE - 1, -1, -1):
        p = fma32(p, t, coef[j][i])
    p = np.where(x < 0, np.float32(np.float32(1) - p), p)
    return np.float32(x * p)


ERF_P = [1.12837899, 0.192744076, 0.0530580543, 0.00386753166, 0.000287471892, 2.03502259e-06]
ERF_Q = [0.504146636, 0.115076549, 0.0151706925, 0.00118794176, 3.80732345e-05]


def gelu_rational(x):
    x = np.float32(x)
    z = np.float32(x * np.float32(0.70710678118654752))
    t = np.float32(z * z)
    p = np.float32(ERF_P[5])
    for j in range(4, -1, -1):
        p = fma32(p, t, np.float32(ERF_P[j]))
    q = np.float32(ERF_Q[4])
    for j in range(3, -1, -1):
        q = fma32(q, t, np.float32(ERF_Q[j]))
    q = fma32(q, t, np.float32(1))
    e = np.float32(np.float32(z * p) / q)
    e = np.where(np.abs(z) >= np.float32(3.92), np.sign(z).astype(np.float32), e)
    return np.float32(np.float32(np.float32(0.5) * x) * np.float32(np.float32(1) + e))


def report(name, y, x, want):
    err = np.abs(np.float64(y) - want)
    # tests/engine/gelu_test.cc's bound: |x| 1e-7 (Phi's error) plus an f32 rounding of GELU
    bound = np.abs(np.float64(x)) * 1e-7 + np.abs(want) * 1.2e-7 + 1e-38
    print(f"{name}: worst {err.max():.3g} (x = {x[err.argmax()]:.6g}), "
          f"{(err / bound).max():.3f} of gelu_test.cc's bound")


def main():
    coef = np.zeros((DEGREE + 1, INTERVALS), np.float32)
    for i in range(INTERVALS):
        c, err = fit(i)
        coef[:, i] = np.float32(c)
        print(f"interval {i} [{i * WIDTH}, {(i + 1) * WIDTH}): fit error {err:.3g}")
    x = np.float32(np.concatenate([np.linspace(-12, 12, 2000001), -np.geomspace(1e-8, 12, 200001),
                                   np.geomspace(1e-8, 12, 200001)]))
    want = np.float64(x) * phi(np.float64(x))
    report("piecewise", gelu_pieces(x, coef), x, want)
    report("rational erf", gelu_rational(x), x, want)
    ends = gelu_pieces(np.float32([CLAMP, 1e30, -CLAMP, -1e30]), coef)
    print(f"at +-{CLAMP} and +-1e30: {ends} (Phi exactly 1 and 0 there)")
    print("inline constexpr float kGeluPhi[7][8] = {")
    for j in range(DEGREE + 1):
        print("    {" + ", ".join(f"{float(v):.9e}f" for v in coef[j]) + "},")
    print("};")


if __name__ == "__main__":
    main()
