"""Statistics of results over seeds: mean, sample std, Student-t and Welch intervals, a
paired difference, a std's χ² interval and a ratio of stds' F interval, a bootstrap over
seeds and dev examples, how many seeds an effect would need, and a share's binomial
interval (failed runs). numpy, scipy and statsmodels
only (no TensorFlow): the table tools and findings use it.
"""

import math

import numpy as np

LEVEL = 0.95


def describe(values):
    """n, mean, sample standard deviation (n − 1; None for one value), min and max."""
    values = np.asarray(values, np.float64)
    if values.size == 0:
        raise ValueError("describe: no values")
    return {"n": int(values.size), "mean": float(values.mean()),
            "std": float(values.std(ddof=1)) if values.size > 1 else None,
            "min": float(values.min()), "max": float(values.max())}


def _t_quantile(df, level):
    from scipy import stats

    return float(stats.t.ppf(0.5 + level / 2, df))


def t_interval(values, level=LEVEL):
    """The mean and its Student-t interval (n − 1 degrees of freedom); low/high are None
    for fewer than two values."""
    values = np.asarray(values, np.float64)
    mean = float(values.mean())
    if values.size < 2:
        return {"mean": mean, "low": None, "high": None}
    half = _t_quantile(values.size - 1, level) * float(values.std(ddof=1)) / math.sqrt(values.size)
    return {"mean": mean, "low": mean - half, "high": mean + half}


def proportion_interval(count, n, level=LEVEL):
    """The share count/n with its exact binomial (Clopper–Pearson) interval: for how often
    runs fail, where a handful of seeds and shares near 0 or 1 make a normal
    approximation wrong. {"rate", "low", "high", "method"}; all None for n = 0."""
    if n == 0:
        return {"rate": None, "low": None, "high": None, "method": "clopper-pearson"}
    from statsmodels.stats.proportion import proportion_confint

    low, high = proportion_confint(count, n, alpha=1 - level, method="beta")
    return {"rate": count / n, "low": float(low), "high": float(high),
            "method": "clopper-pearson"}


def welch_interval(a, b, level=LEVEL):
    """mean(a) − mean(b) and its Welch t interval; the interval is None when a side has
    fewer than two values (no spread to judge by)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    difference = float(a.mean() - b.mean())
    if a.size < 2 or b.size < 2:
        return {"difference": difference, "low": None, "high": None}
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    se = math.sqrt(va + vb)
    if se == 0:
        return {"difference": difference, "low": difference, "high": difference}
    df = (va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1))
    half = _t_quantile(df, level) * se
    return {"difference": difference, "low": difference - half, "high": difference + half}


def std_interval(values, level=LEVEL):
    """The sample std and its χ² interval (normal data, n − 1 degrees of freedom);
    low/high are None for fewer than two values."""
    values = np.asarray(values, np.float64)
    if values.size < 2:
        return {"std": None, "low": None, "high": None}
    from scipy import stats

    df, var = values.size - 1, float(values.var(ddof=1))
    tail = (1 - level) / 2
    return {"std": math.sqrt(var),
            "low": math.sqrt(df * var / stats.chi2.ppf(1 - tail, df)),
            "high": math.sqrt(df * var / stats.chi2.ppf(tail, df))}


def std_ratio(a, b, level=LEVEL):
    """std(a) / std(b) and its interval from the F distribution of the variance ratio
    (normal data): the ratio is told from 1 when the interval leaves it out. Where b has
    no spread the ratio is inf (None if neither has) and the interval None; all None when
    a side has fewer than two values."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.size < 2 or b.size < 2:
        return {"ratio": None, "low": None, "high": None}
    from scipy import stats

    va, vb = float(a.var(ddof=1)), float(b.var(ddof=1))
    if vb == 0:
        return {"ratio": math.inf if va > 0 else None, "low": None, "high": None}
    tail, dfs = (1 - level) / 2, (a.size - 1, b.size - 1)
    f = va / vb
    return {"ratio": math.sqrt(f), "low": math.sqrt(f / stats.f.ppf(1 - tail, *dfs)),
            "high": math.sqrt(f / stats.f.ppf(tail, *dfs))}


def paired_difference(a, b, level=LEVEL):
    """a − b seed by seed (a[i] and b[i] share a seed): the mean difference, its sample
    std and Student-t interval over the n pairs."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise ValueError(f"paired_difference: need two equal-length lists (got {a.shape}, "
                         f"{b.shape})")
    d = a - b
    interval = t_interval(d, level)
    return {"n": int(d.size), "difference": interval["mean"],
            "std": float(d.std(ddof=1)) if d.size > 1 else None,
            "low": interval["low"], "high": interval["high"]}


def seeds_needed(difference, std, level=LEVEL, limit=10000):
    """The smallest n whose Student-t interval of a mean difference with this sample std
    would exclude 0 (t_{n−1} · std / √n < |difference|); None beyond `limit` or when the
    difference is 0; 2 when std is 0."""
    if difference == 0 or std is None or not math.isfinite(std):
        return None
    if std == 0:
        return 2
    for n in range(2, limit + 1):
        if _t_quantile(n - 1, level) * std / math.sqrt(n) < abs(difference):
            return n
    return None


# --- Bootstrap over seeds and dev examples ------------------------------------------------

def mean_statistic(sums, count):
    """One per-example score column (0/1 correctness: accuracy) → its mean."""
    return sums[0] / count


def f1_statistic(sums, count):
    """Per-example columns (true positives, predicted, gold) summed → micro F1
    (conlleval's entity F1: 2·tp / (predicted + gold); 0 when both are 0)."""
    tp, predicted, gold = sums[0], sums[1], sums[2]
    return 2 * tp / (predicted + gold) if predicted + gold > 0 else 0.0


STATISTICS = {"mean": mean_statistic, "f1": f1_statistic}


def _columns(per_seed):
    return [np.asarray(a, np.float64).reshape(len(a), -1) for a in per_seed]


def bootstrap_interval(per_seed, statistic=mean_statistic, per_seed_other=None,
                       resamples=2000, seed=0, level=LEVEL):
    """A percentile bootstrap interval of the mean over seeds of a per-seed metric.

    `per_seed`: one array per seed of per-example score columns, shape (examples, k); the
    seed's metric is `statistic(column sums, examples)` (accuracy: the mean of a 0/1
    column; F1: from summed tp/predicted/gold). Each replicate draws seeds with
    replacement, then, within each drawn seed, its examples with replacement, and averages
    the drawn seeds' metrics. With `per_seed_other` (the same seeds and dev examples, in
    the same order) it is the paired difference `per_seed − per_seed_other`: the same seeds
    and example indices are drawn for both. numpy's Generator with a fixed `seed`, so the
    interval repeats exactly. Returns {"estimate", "low", "high", "resamples"}.
    """
    arrays = _columns(per_seed)
    others = None if per_seed_other is None else _columns(per_seed_other)
    if not arrays or any(a.shape[0] == 0 for a in arrays):
        raise ValueError("bootstrap_interval: every seed needs at least one example")
    if others is not None and [a.shape[0] for a in others] != [a.shape[0] for a in arrays]:
        raise ValueError("bootstrap_interval: a paired difference needs the same seeds and "
                         "dev examples on both rows")

    def seed_value(s, index=None):
        value = statistic((arrays[s] if index is None else arrays[s][index]).sum(axis=0),
                          arrays[s].shape[0])
        if others is not None:
            value -= statistic((others[s] if index is None else others[s][index]).sum(axis=0),
                               others[s].shape[0])
        return float(value)

    estimate = float(np.mean([seed_value(s) for s in range(len(arrays))]))
    rng = np.random.default_rng(seed)
    replicates = np.empty(resamples)
    for r in range(resamples):
        drawn = rng.integers(0, len(arrays), size=len(arrays))
        replicates[r] = np.mean([
            seed_value(s, rng.integers(0, arrays[s].shape[0], size=arrays[s].shape[0]))
            for s in drawn])
    low, high = np.percentile(replicates, [100 * (1 - level) / 2, 100 * (1 + level) / 2])
    return {"estimate": estimate, "low": float(low), "high": float(high),
            "resamples": resamples}
