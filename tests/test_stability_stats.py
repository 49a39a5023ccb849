"""kerasbert/analysis/stability.py against statsmodels' ANOVA, scipy and hand values."""

import math

import numpy as np
import pytest
from scipy import stats as sp

from kerasbert.analysis import stability


def test_grid_components_match_statsmodels_two_way_anova():
    import pandas as pd
    import statsmodels.api as sm
    import statsmodels.formula.api as smf

    rng = np.random.default_rng(0)
    grid = (rng.normal(0, 2.0, (5, 1)) + rng.normal(0, 1.0, (1, 4))
            + rng.normal(0, 0.5, (5, 4)) + 70.0)
    got = stability.seed_grid_components(grid)
    frame = pd.DataFrame([{"y": grid[d, i], "d": d, "i": i}
                          for d in range(5) for i in range(4)])
    table = sm.stats.anova_lm(smf.ols("y ~ C(d) + C(i)", frame).fit())
    ms = table["sum_sq"] / table["df"]
    assert got["mean_square"]["data_order"] == pytest.approx(ms["C(d)"], rel=1e-10)
    assert got["mean_square"]["init"] == pytest.approx(ms["C(i)"], rel=1e-10)
    assert got["mean_square"]["residual"] == pytest.approx(ms["Residual"], rel=1e-10)
    assert got["test"]["data_order"]["p"] == pytest.approx(table["PR(>F)"]["C(d)"], rel=1e-8)
    assert got["test"]["init"]["p"] == pytest.approx(table["PR(>F)"]["C(i)"], rel=1e-8)
    assert got["df"] == {"data_order": 4, "init": 3, "residual": 12}


def test_grid_components_by_hand():
    # y = row effect (0, 2) + column effect (0, 1): additive, no residual.
    grid = [[0.0, 1.0], [2.0, 3.0]]
    got = stability.seed_grid_components(grid)
    # MS_d = k_i·Σ(row mean − grand)² / 1 = 2·(1 + 1) = 4; MS_i = 2·(0.25 + 0.25) = 1.
    assert got["mean_square"] == {"data_order": 4.0, "init": 1.0, "residual": 0.0}
    assert got["variance"] == {"data_order": 2.0, "init": 0.5, "residual": 0.0}
    assert got["share"]["data_order"] == pytest.approx(0.8)
    assert got["test"]["data_order"] == {"F": None, "p": None}
    # ratio 4 with F(1, 1) quantiles: 4/F.975 .. 4/F.025
    assert got["ratio"]["value"] == 4.0
    assert got["ratio"]["low"] == pytest.approx(4 / sp.f.ppf(0.975, 1, 1))
    assert got["ratio"]["high"] == pytest.approx(4 / sp.f.ppf(0.025, 1, 1))


def test_grid_components_clip_a_negative_component_at_zero():
    # Columns identical up to noise smaller than the residual: init's component is 0.
    grid = [[0.0, 1.0, 0.0], [1.0, 0.0, 1.0], [0.0, 1.0, 0.0]]
    got = stability.seed_grid_components(grid)
    assert got["variance"]["init"] == 0.0
    assert got["variance"]["residual"] > 0


def test_grid_components_refuse_an_incomplete_grid():
    with pytest.raises(ValueError, match="complete grid"):
        stability.seed_grid_components([[1.0, 2.0]])
    with pytest.raises(ValueError, match="complete grid"):
        stability.seed_grid_components([[1.0, float("nan")], [1.0, 2.0]])


def test_levene_is_brown_forsythe():
    a, b = [1.0, 2.0, 3.0, 4.0], [1.0, 5.0, 9.0, 13.0]
    got = stability.levene(a, b)
    # Deviations from the medians: a → 1.5, .5, .5, 1.5 (mean 1); b → 6, 2, 2, 6 (mean 4);
    # their one-way ANOVA: between 4·1.5² + 4·1.5² = 18 (1 df), within 1 + 16 = 17 (6 df),
    # W = 18 / (17/6) = 108/17.
    assert got["W"] == pytest.approx(108 / 17)
    assert got["p"] == pytest.approx(sp.f.sf(108 / 17, 1, 6))
    with pytest.raises(ValueError):
        stability.levene([1.0], [1.0, 2.0])
    assert stability.levene([0.5, 0.5], [0.5, 0.5]) == {"W": None, "p": None}


def test_norm_ratio_is_a_geometric_mean_ratio():
    got = stability.norm_ratio([0.01, 0.001], [1.0, 0.1])
    # geomeans: √1e-5 and √0.1 → ratio 1e-2
    assert got["ratio"] == pytest.approx(0.01)
    assert got["low"] < 0.01 < got["high"]
    assert math.log(got["high"] / 0.01) == pytest.approx(math.log(0.01 / got["low"]))
    with pytest.raises(ValueError):
        stability.norm_ratio([0.0], [1.0])
