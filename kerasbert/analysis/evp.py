"""Expected validation performance (Dodge et al. 2019, "Show your work"; 2020, "Fine-tuning
pretrained language models"): the expected best dev score of n runs started, as a function
of n, from the N run scores observed. numpy only.

The n runs are drawn with replacement from the N observed scores (their empirical
distribution). With the scores sorted worst to best, v_(1), ..., v_(N), the best of n is
v_(i) with probability (i/N)^n − ((i−1)/N)^n (all n at most the i-th, not all at most the
(i−1)-th), so

    E[best of n] = Σ_i v_(i) · ((i/N)^n − ((i−1)/N)^n)

and its variance is Σ_i v_(i)² · (same weights) − E². "Best" is the metric's direction:
the maximum for accuracy, the minimum for a loss or an error rate. The percentile bootstrap
over the N scores says how well N runs pin the expectation down.
"""

import numpy as np

LEVEL = 0.95
RESAMPLES = 2000


def _best_last(values, greater):
    """The scores sorted so that the best is last (ascending for larger-is-better)."""
    values = np.sort(np.asarray(values, np.float64).ravel())
    if values.size == 0:
        raise ValueError("expected validation performance: no scores")
    if not np.all(np.isfinite(values)):
        raise ValueError("expected validation performance: a score is not finite")
    return values if greater else values[::-1]


def max_weights(num_values, n):
    """P(the best of n draws is the i-th worst of `num_values`), i = 1..N, as an array."""
    if n < 1:
        raise ValueError(f"expected validation performance: n={n} runs; need at least 1")
    i = np.arange(1, num_values + 1, dtype=np.float64)
    return (i / num_values) ** n - ((i - 1) / num_values) ** n


def expected_best(values, n, greater=True):
    """(E[best of n], std of the best of n) of runs drawn with replacement from `values`."""
    return _expected(_best_last(values, greater), n)


def _expected(ordered, n):
    w = max_weights(ordered.size, n)
    mean = float(w @ ordered)
    variance = float(w @ (ordered - mean) ** 2)  # = Σ w v² − mean², without the cancellation
    return mean, float(np.sqrt(max(variance, 0.0)))


def _curve_means(ordered, ns):
    """E[best of n] for each n in `ns` of scores already sorted best-last (rows: resamples
    when `ordered` is 2-D, each row sorted)."""
    return np.stack([ordered @ max_weights(ordered.shape[-1], n) for n in ns], axis=-1)


def curve(values, greater=True, max_n=None, resamples=RESAMPLES, level=LEVEL, seed=0,
          cost=None):
    """The expected best dev score for n = 1..max_n (default N) runs started: a list of
    {"n", "expected", "std" (of the best of n), "low", "high" (the percentile bootstrap
    interval of the expectation: N scores redrawn with replacement `resamples` times, numpy's
    Generator with a fixed `seed`), and, with `cost` ({unit: cost of one run}, e.g. {"steps":
    400, "seconds": 61.0}), that unit × n: the budget of n runs}. Fewer than two scores, or
    resamples=0: no interval (None)."""
    ordered = _best_last(values, greater)
    max_n = ordered.size if max_n is None else int(max_n)
    ns = list(range(1, max_n + 1))
    low = high = [None] * len(ns)
    if resamples and ordered.size > 1:
        rng = np.random.default_rng(seed)
        drawn = np.sort(rng.choice(ordered, size=(resamples, ordered.size), replace=True),
                        axis=1)
        if not greater:
            drawn = drawn[:, ::-1]
        means = _curve_means(drawn, ns)
        low, high = (np.percentile(means, [100 * (1 - level) / 2, 100 * (1 + level) / 2],
                                   axis=0).tolist())
    points = []
    for k, n in enumerate(ns):
        expected, std = _expected(ordered, n)
        point = {"n": n, "expected": expected, "std": std, "low": low[k], "high": high[k]}
        for unit, per_run in (cost or {}).items():
            point[unit] = None if per_run is None else n * per_run
        points.append(point)
    return points
