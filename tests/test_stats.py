"""kerasbert/analysis/stats.py against hand-computed values and scipy."""

import math

import numpy as np
import pytest
from scipy import stats as sp

from kerasbert.analysis import stats


def test_describe_is_mean_sample_std_and_range():
    assert stats.describe([1.0, 2.0, 3.0]) == {"n": 3, "mean": 2.0, "std": 1.0, "min": 1.0,
                                               "max": 3.0}
    assert stats.describe([5.0])["std"] is None
    with pytest.raises(ValueError):
        stats.describe([])


def test_t_interval_by_hand_and_against_scipy():
    # mean 2, std 1, n 3: half-width t_{0.975, 2} · 1/√3 = 4.302653 / 1.732051 = 2.484138
    t = stats.t_interval([1.0, 2.0, 3.0])
    assert t["mean"] == 2.0
    assert t["low"] == pytest.approx(2.0 - 2.484138, abs=1e-6)
    assert t["high"] == pytest.approx(2.0 + 2.484138, abs=1e-6)
    values = [0.81, 0.79, 0.84, 0.80]
    low, high = sp.t.interval(0.95, len(values) - 1, loc=np.mean(values), scale=sp.sem(values))
    got = stats.t_interval(values)
    assert (got["low"], got["high"]) == pytest.approx((low, high), abs=1e-12)
    assert stats.t_interval([0.5])["low"] is None


def test_welch_interval_against_scipy():
    a, b = [0.81, 0.79, 0.84, 0.80], [0.70, 0.76, 0.71]
    d = stats.welch_interval(a, b)
    ci = sp.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert d["difference"] == pytest.approx(np.mean(a) - np.mean(b))
    assert (d["low"], d["high"]) == pytest.approx((ci.low, ci.high), abs=1e-12)
    assert stats.welch_interval([0.5], [0.4, 0.6])["low"] is None
    assert stats.welch_interval([0.5, 0.5], [0.4, 0.4]) == pytest.approx(
        {"difference": 0.1, "low": 0.1, "high": 0.1})


def test_paired_difference_by_hand_and_against_scipy():
    # differences 0.1, 0.2, 0.3: mean 0.2, std 0.1, half-width 4.302653 · 0.1 / √3
    d = stats.paired_difference([0.6, 0.7, 0.8], [0.5, 0.5, 0.5])
    assert d["n"] == 3
    assert d["difference"] == pytest.approx(0.2)
    assert d["std"] == pytest.approx(0.1)
    assert d["high"] - d["difference"] == pytest.approx(0.2484138, abs=1e-6)
    a, b = [0.81, 0.79, 0.84, 0.80], [0.78, 0.79, 0.80, 0.74]
    ci = sp.ttest_rel(a, b).confidence_interval(0.95)
    got = stats.paired_difference(a, b)
    assert (got["low"], got["high"]) == pytest.approx((ci.low, ci.high), abs=1e-12)
    with pytest.raises(ValueError):
        stats.paired_difference([1, 2], [1, 2, 3])


def test_seeds_needed_is_the_first_n_whose_interval_excludes_zero():
    n = stats.seeds_needed(0.01, 0.02)
    half = lambda k: sp.t.ppf(0.975, k - 1) * 0.02 / math.sqrt(k)  # noqa: E731
    assert half(n) < 0.01 <= half(n - 1)
    assert stats.seeds_needed(0.0, 0.02) is None
    assert stats.seeds_needed(0.01, 0.0) == 2
    assert stats.seeds_needed(1e-9, 1.0, limit=50) is None


def test_f1_statistic_is_micro_f1_of_the_summed_counts():
    # tp 3, predicted 4, gold 6: 2·3 / 10
    assert stats.f1_statistic(np.array([3.0, 4.0, 6.0]), 2) == pytest.approx(0.6)
    assert stats.f1_statistic(np.array([0.0, 0.0, 0.0]), 2) == 0.0
    assert stats.mean_statistic(np.array([3.0]), 4) == 0.75


def test_bootstrap_repeats_exactly_and_matches_a_brute_force_resampler():
    rng = np.random.default_rng(7)
    per_seed = [rng.random(50) < p for p in (0.6, 0.7, 0.65)]
    got = stats.bootstrap_interval(per_seed, resamples=500, seed=3)
    assert got == stats.bootstrap_interval(per_seed, resamples=500, seed=3)
    assert got["estimate"] == pytest.approx(np.mean([a.mean() for a in per_seed]))
    # the same draws made by hand: seeds first, then each drawn seed's examples
    draws = np.random.default_rng(3)
    replicates = []
    for _ in range(500):
        chosen = draws.integers(0, 3, size=3)
        replicates.append(np.mean([per_seed[s][draws.integers(0, 50, size=50)].mean()
                                   for s in chosen]))
    assert (got["low"], got["high"]) == pytest.approx(
        tuple(np.percentile(replicates, [2.5, 97.5])))
    assert got["low"] < got["estimate"] < got["high"]


def test_bootstrap_of_a_constant_and_of_a_paired_difference():
    ones = [np.ones(20), np.ones(20)]
    assert stats.bootstrap_interval(ones, resamples=50) == {
        "estimate": 1.0, "low": 1.0, "high": 1.0, "resamples": 50}
    # b is a with 5 of 20 examples turned wrong in every seed: the paired difference is
    # exactly a − b on the same draws, so it lies in [0, 1] and its estimate is 0.25
    a = [np.ones(20), np.ones(20), np.ones(20)]
    b = [np.r_[np.zeros(5), np.ones(15)] for _ in range(3)]
    d = stats.bootstrap_interval(a, stats.mean_statistic, b, resamples=300)
    assert d["estimate"] == pytest.approx(0.25)
    assert 0.0 < d["low"] < 0.25 < d["high"] < 0.6
    with pytest.raises(ValueError):
        stats.bootstrap_interval(a, stats.mean_statistic, [np.ones(19)] * 3)


def test_bootstrap_f1_over_sentence_counts():
    # two seeds, three sentences each of (tp, predicted, gold)
    per_seed = [np.array([[1, 1, 2], [0, 1, 1], [2, 2, 2]]),
                np.array([[1, 2, 2], [1, 1, 1], [0, 0, 1]])]
    got = stats.bootstrap_interval(per_seed, stats.f1_statistic, resamples=200)
    # seed 1: 2·3 / (4 + 5); seed 2: 2·2 / (3 + 4)
    assert got["estimate"] == pytest.approx((6 / 9 + 4 / 7) / 2)


def test_std_interval_by_chi_square_table_values():
    # 1..5: variance 2.5 on 4 degrees of freedom; the χ² table's 2.5% and 97.5% points for
    # 4 df are 0.4844 and 11.143.
    got = stats.std_interval([1, 2, 3, 4, 5])
    assert got["std"] == pytest.approx(math.sqrt(2.5))
    assert got["low"] == pytest.approx(math.sqrt(10 / 11.143), rel=1e-4)
    assert got["high"] == pytest.approx(math.sqrt(10 / 0.4844), rel=1e-4)
    assert stats.std_interval([3.0]) == {"std": None, "low": None, "high": None}


def test_std_ratio_by_f_table_values_and_edge_cases():
    a, b = [1, 2, 3, 4, 5], [2, 2.5, 3, 3.5, 4]  # variances 2.5 and 0.625: ratio of stds 2
    got = stats.std_ratio(a, b)
    # The F table's 97.5% point for (4, 4) df is 9.605; the 2.5% point is its reciprocal.
    assert got["ratio"] == pytest.approx(2.0)
    assert got["low"] == pytest.approx(math.sqrt(4 / 9.605), rel=1e-3)
    assert got["high"] == pytest.approx(math.sqrt(4 * 9.605), rel=1e-3)
    assert stats.std_ratio(a, [3, 3, 3])["ratio"] == math.inf
    assert stats.std_ratio(a, [3])["ratio"] is None


def test_std_intervals_cover_the_true_value_about_95_percent_of_the_time():
    # Brute force: normal samples of 5 with known stds; the intervals should hold the
    # truth in ~95% of 4,000 draws (binomial sd ~0.35 points).
    rng = np.random.default_rng(0)
    draws = 4000
    a = rng.normal(0, 3.0, (draws, 5))
    b = rng.normal(0, 1.5, (draws, 5))
    held_std = held_ratio = 0
    for x, y in zip(a, b):
        s = stats.std_interval(x)
        held_std += s["low"] <= 3.0 <= s["high"]
        r = stats.std_ratio(x, y)
        held_ratio += r["low"] <= 2.0 <= r["high"]
    assert 0.935 < held_std / draws < 0.965
    assert 0.935 < held_ratio / draws < 0.965
