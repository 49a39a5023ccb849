"""The statistics of fine-tuning stability (issue #58): where the variance over seeds comes
from, whether two recipes' variances differ, and the gradient-norm signature of failed runs.
NumPy, SciPy and statsmodels only (no TensorFlow).

- `seed_grid_components`: Dodge et al. 2020 train every pair of a data-order seed and a
  head-initialisation seed. On that k_d × k_i grid (one run per cell) a two-way analysis
  of variance without replication splits the spread into a data-order part, an
  initialisation part and the rest (their interaction, plus whatever else varies: dropout
  when it follows neither seed). The variance components are the method-of-moments ones
  (σ²_d = (MS_d − MS_res)/k_i, clipped at 0), and the ratio of the two factors' expected
  mean squares gets its exact F interval.
- `levene`: Brown–Forsythe's version of Levene's test (deviations from the median), the
  one Mosbach et al. 2021 use to say a recipe's variance is lower.
- `norm_ratio`: the ratio of two groups' geometric-mean gradient norms with a Welch
  interval on the log scale (norms span orders of magnitude; the claim is "≈ 100×").
"""

import math

import numpy as np

LEVEL = 0.95


def seed_grid_components(grid, level=LEVEL):
    """Two-way ANOVA of a complete grid[d][i] of scores (rows: data-order seeds, columns:
    head-initialisation seeds; one run per cell, both sides ≥ 2).

    Returns the mean squares and degrees of freedom (`data_order`, `init`, `residual`), each
    factor's F test against the residual, the variance components (`variance`: data_order,
    init, residual; the factors' clipped at 0), the share of each in their sum, and
    `ratio`: MS_data_order / MS_init with the interval of
    (σ²_res + k_i·σ²_d) / (σ²_res + k_d·σ²_i) from F(k_d − 1, k_i − 1)."""
    from scipy import stats

    y = np.asarray(grid, np.float64)
    if y.ndim != 2 or min(y.shape) < 2 or not np.all(np.isfinite(y)):
        raise ValueError(f"seed_grid_components: need a complete grid of at least 2 × 2 "
                         f"finite scores (got shape {y.shape})")
    kd, ki = y.shape
    grand = y.mean()
    row = y.mean(axis=1)
    col = y.mean(axis=0)
    ss_d = ki * float(((row - grand) ** 2).sum())
    ss_i = kd * float(((col - grand) ** 2).sum())
    residual = y - row[:, None] - col[None, :] + grand
    ss_r = float((residual ** 2).sum())
    df_d, df_i, df_r = kd - 1, ki - 1, (kd - 1) * (ki - 1)
    ms_d, ms_i, ms_r = ss_d / df_d, ss_i / df_i, ss_r / df_r

    def f_test(ms, df):
        if ms_r == 0:
            return {"F": None, "p": None}
        f = ms / ms_r
        return {"F": f, "p": float(stats.f.sf(f, df, df_r))}

    variance = {"data_order": max((ms_d - ms_r) / ki, 0.0),
                "init": max((ms_i - ms_r) / kd, 0.0), "residual": ms_r}
    total = sum(variance.values())
    share = {k: (v / total if total > 0 else None) for k, v in variance.items()}
    ratio = {"value": None, "low": None, "high": None}
    if ms_i > 0:
        r = ms_d / ms_i
        alpha = 1 - level
        # MS_d/E[MS_d] ÷ MS_i/E[MS_i] ~ F(df_d, df_i): invert it for E[MS_d]/E[MS_i].
        ratio = {"value": r, "low": r / float(stats.f.ppf(1 - alpha / 2, df_d, df_i)),
                 "high": r / float(stats.f.ppf(alpha / 2, df_d, df_i))}
    return {"shape": [kd, ki], "mean": float(grand),
            "mean_square": {"data_order": ms_d, "init": ms_i, "residual": ms_r},
            "df": {"data_order": df_d, "init": df_i, "residual": df_r},
            "test": {"data_order": f_test(ms_d, df_d), "init": f_test(ms_i, df_i)},
            "variance": variance, "share": share, "ratio": ratio}


def levene(*groups):
    """Brown–Forsythe–Levene test (center = median) of equal variances: {"W", "p"}; every
    group needs ≥ 2 values."""
    from scipy import stats

    groups = [np.asarray(g, np.float64) for g in groups]
    if len(groups) < 2 or any(g.size < 2 for g in groups):
        raise ValueError("levene: need at least two groups of at least two values")
    if all(np.ptp(g) == 0 for g in groups):  # no spread anywhere: nothing to compare
        return {"W": None, "p": None}
    result = stats.levene(*groups, center="median")
    return {"W": float(result.statistic), "p": float(result.pvalue)}


def _exp(x):
    """e**x of a log-scale interval's end; inf past float range (a level near 1 with two
    runs a side gives t quantiles of ~1e6: decision_level asks for those)."""
    if x is None:
        return None
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def norm_ratio(numerator, denominator, level=LEVEL):
    """geomean(numerator) / geomean(denominator) of positive norms and its interval
    (Welch on log values, exponentiated); low/high None when a side has one value."""
    from kerasbert.analysis.stats import welch_interval

    a = np.asarray(numerator, np.float64)
    b = np.asarray(denominator, np.float64)
    if a.size == 0 or b.size == 0 or np.any(a <= 0) or np.any(b <= 0):
        raise ValueError("norm_ratio: need positive norms on both sides")
    w = welch_interval(np.log(a), np.log(b), level)
    return {"ratio": _exp(w["difference"]), "low": _exp(w["low"]), "high": _exp(w["high"]),
            "n": [int(a.size), int(b.size)]}


def failure_rate_difference(failed_a, n_a, failed_b, n_b, level=LEVEL):
    """failed_a/n_a − failed_b/n_b, two independent sets of runs, with Newcombe's hybrid
    score interval (statsmodels' `confint_proportions_2indep`, method "newcomb"): it stays
    inside [−1, 1] and keeps its coverage at 0 or 20 failures of 20, where a normal
    (Wald) interval collapses. {"difference", "low", "high"}."""
    from statsmodels.stats.proportion import confint_proportions_2indep

    if min(n_a, n_b) < 1 or not (0 <= failed_a <= n_a and 0 <= failed_b <= n_b):
        raise ValueError(f"failure_rate_difference: need 0 ≤ failed ≤ n, n ≥ 1 (got "
                         f"{failed_a}/{n_a}, {failed_b}/{n_b})")
    low, high = confint_proportions_2indep(failed_a, n_a, failed_b, n_b, method="newcomb",
                                           compare="diff", alpha=1 - level)
    return {"difference": failed_a / n_a - failed_b / n_b, "low": float(low),
            "high": float(high)}


def decision_level(interval_at, decides, smallest=1e-12, tolerance=1e-6):
    """The p-value of a verdict read from an interval: the smallest α at which the (1 − α)
    interval `interval_at(level)` → (low, high) gives a verdict (`decides(low, high)`),
    found by bisection (intervals shrink as α grows, so once one decides, every narrower
    one does). 1.0 when even the narrowest interval decides nothing. p < 0.05 exactly when
    the 95% interval gives the verdict, so Holm's correction can take it like a test's."""
    if decides(*interval_at(1 - smallest)):
        return smallest
    low, high = smallest, 1 - smallest  # decides nothing at `low`
    if not decides(*interval_at(1 - high)):
        return 1.0
    while high - low > tolerance:
        middle = (low + high) / 2
        if decides(*interval_at(1 - middle)):
            high = middle
        else:
            low = middle
    return high
