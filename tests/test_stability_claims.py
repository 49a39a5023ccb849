"""The stability plan's claims (docs/figures/stability/PLAN.md part 2) as the stability
experiment measures them and the findings report reads them: each interval against a
hand-computed or independent reference, each verdict against its rule."""

import json
import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from kerasbert.analysis import stability
from kerasbert.experiments import claim_verdicts, findings
from kerasbert.experiments import stability as experiment


def wilson(count, n, z):
    p = count / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


@pytest.mark.parametrize("a,na,b,nb", [(7, 20, 1, 20), (0, 20, 3, 20), (20, 20, 12, 20)])
def test_failure_rate_difference_is_newcombes_hybrid_score_interval(a, na, b, nb):
    # Newcombe (1998), method 10, from the two Wilson intervals by hand.
    z = scipy_stats.norm.ppf(0.975)
    (l1, u1), (l2, u2) = wilson(a, na, z), wilson(b, nb, z)
    p1, p2 = a / na, b / nb
    low = p1 - p2 - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    high = p1 - p2 + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    got = stability.failure_rate_difference(a, na, b, nb)
    assert got["difference"] == pytest.approx(p1 - p2)
    assert got["low"] == pytest.approx(low, abs=1e-9)
    assert got["high"] == pytest.approx(high, abs=1e-9)


def test_failure_rate_difference_refuses_impossible_counts():
    with pytest.raises(ValueError, match="0 ≤ failed ≤ n"):
        stability.failure_rate_difference(21, 20, 0, 20)


def test_decision_level_of_a_z_interval_is_the_z_tests_p():
    mean, se = 0.7, 0.3
    at = (lambda level: (mean - scipy_stats.norm.ppf(0.5 + level / 2) * se,
                         mean + scipy_stats.norm.ppf(0.5 + level / 2) * se))
    p = stability.decision_level(at, lambda low, high: low > 0 or high < 0)
    assert p == pytest.approx(2 * scipy_stats.norm.sf(mean / se), abs=1e-5)
    # a point estimate on the boundary decides at no level
    assert stability.decision_level(lambda level: (-1 + level, 1 - level),
                                    lambda low, high: low > 0) == 1.0


def row(label, values, failed=()):
    values = {str(s): v for s, v in enumerate(values, 1)}
    return {"label": label, "values": values,
            "failure_checks": {s: int(s) in failed for s in values}, "dirs": {}}


def test_failure_rate_claim_supported_only_when_the_interval_excludes_0():
    bert = row("bert", [0.5] * 10 + [0.6] * 10, failed=range(1, 11))  # 10 of 20 failed
    mosbach = row("mosbach", [0.6] * 20)
    m = experiment.failure_rate_claim(bert, mosbach)
    assert m["effect"] == pytest.approx(0.5)
    assert m["verdict"] == "supported" and m["low"] > 0 and m["p"] < 0.05
    near = experiment.failure_rate_claim(row("bert", [0.6] * 20, failed={1, 2}),
                                         row("mosbach", [0.6] * 20, failed={1}))
    assert near["verdict"] == "not distinguishable" and near["p"] >= 0.05
    assert near["low"] < 0 < near["high"]


def test_variance_claim_is_levenes_test_with_the_smaller_std_for_the_recipe():
    rng = np.random.default_rng(0)
    wide, narrow = list(0.6 + 0.05 * rng.standard_normal(20)), list(
        0.6 + 0.005 * rng.standard_normal(20))
    m = experiment.variance_claim(row("bert", wide), row("mosbach", narrow))
    expected = scipy_stats.levene(narrow, wide, center="median").pvalue
    assert m["p"] == pytest.approx(expected) and m["verdict"] == "supported"
    assert m["effect"] == pytest.approx(np.std(wide, ddof=1) / np.std(narrow, ddof=1))
    backwards = experiment.variance_claim(row("bert", narrow), row("zhang", wide))
    assert backwards["verdict"] == "contradicted"


def test_mean_claim_is_welchs_interval_and_test():
    a, b = [0.6, 0.62, 0.61, 0.63], [0.55, 0.58, 0.5, 0.52]
    m = experiment.mean_claim(row("bert", b), row("zhang", a))
    welch = scipy_stats.ttest_ind(a, b, equal_var=False)
    ci = welch.confidence_interval()
    assert (m["low"], m["high"]) == pytest.approx((ci.low, ci.high))
    assert m["p"] == pytest.approx(welch.pvalue) and m["verdict"] == "supported"


def test_grid_claim_reads_the_band_and_its_p_agrees_with_the_95_interval():
    rng = np.random.default_rng(1)
    values = (0.6 + 0.01 * rng.standard_normal((5, 5))).tolist()
    split = {"seeds": [1, 2, 3, 4, 5], "values": values,
             **stability.seed_grid_components(values)}
    m = experiment.grid_claim(split)
    r = split["ratio"]
    assert (m["n"], m["seeds"]) == (25, [1, 2, 3, 4, 5])  # the grid's, not the recipes' seeds
    # F(4, 4)'s 97.5% point is 9.605 (table): the interval spans 9.605² ≈ 92 > 16, so a 5 × 5
    # grid can never support the claim; F(10, 10)'s is 3.717 (3.717² ≈ 13.8 ≤ 16)
    assert m["note"].endswith("a 5 × 5 grid's interval spans a factor of 92, wider than the "
                              "band's 16, so it can contradict the claim but not support it "
                              "(11 × 11 can)")
    assert experiment._grid_reach((11, 11)) == ""
    assert (m["effect"], m["low"], m["high"]) == (r["value"], r["low"], r["high"])
    inside = 0.25 <= r["low"] and r["high"] <= 4
    outside = r["high"] < 0.25 or r["low"] > 4
    assert m["verdict"] == ("supported" if inside else "contradicted" if outside
                            else "not distinguishable")
    assert (m["p"] < 0.05) == (m["verdict"] != "not distinguishable")
    # an order effect 30× the init effect's lies wholly outside the band
    strong = [[0.1 * d + 0.001 * ((i * 7 + d) % 3) for i in range(5)] for d in range(5)]
    split = {"seeds": [1, 2, 3, 4, 5], "values": strong,
             **stability.seed_grid_components(strong)}
    assert experiment.grid_claim(split)["verdict"] == "contradicted"


def test_grad_norm_claim_needs_two_failed_runs_and_reads_the_10x_line():
    grads = {"total": {"failed": [0.01], "successful": [1.0, 1.2]}}
    assert experiment.grad_norm_claim(grads) is None
    grads = {"total": {"failed": [0.01, 0.012, 0.009], "successful": [1.0, 1.2, 0.9, 1.1]}}
    m = experiment.grad_norm_claim(grads)
    assert m["effect"] == pytest.approx(
        scipy_stats.gmean([0.01, 0.012, 0.009]) / scipy_stats.gmean([1.0, 1.2, 0.9, 1.1]))
    assert m["verdict"] == "supported" and m["high"] < 0.1 and m["p"] < 0.05
    # Two failed runs far apart: the intervals the p-value search asks for near level 1 run
    # past float range on the log scale (an OverflowError ended a real stage once).
    wide = {"total": {"failed": [1e-3, 5.0], "successful": [1.0, 1.1, 0.9]}}
    m = experiment.grad_norm_claim(wide)
    assert m["verdict"] == "not distinguishable" and 0.05 < m["p"] < 1.0
    assert stability.norm_ratio(*wide["total"].values(), level=1 - 1e-12)["high"] == math.inf


def write_findings(folder, task, claims):
    folder.mkdir(parents=True)
    (folder / experiment.FINDINGS).write_text(json.dumps({
        "command": f"python -m kerasbert.experiments stability --task={task}",
        "experiment": {"task": task, "seeds": [1, 2]}, "claims": claims}))


def test_findings_combines_tasks_as_the_plan_says(tmp_path):
    bert = row("bert", [0.5] * 10 + [0.6] * 10, failed=range(1, 11))
    mosbach = row("mosbach", [0.6] * 20)
    good = experiment.claim_measurements([bert, mosbach], {"total": {"failed": [],
                                                                     "successful": []}}, None)
    weak = experiment.claim_measurements(
        [row("bert", [0.6] * 20, failed={1}), row("mosbach", [0.6] * 20)],
        {"total": {"failed": [], "successful": []}}, None)
    write_findings(tmp_path / "rte", "rte", good)
    write_findings(tmp_path / "mrpc", "mrpc", weak)
    text, measured = findings.report(findings.find_sources([str(tmp_path)]))
    results = measured["mosbach-failure-rate"]
    assert [r["task"] for r in results] == ["mrpc", "rte", "mrpc + rte"]
    assert results[1]["verdict"] == "supported"
    assert results[2]["verdict"] == "not distinguishable"  # supported on one task only
    assert results[2]["p"] == max(results[0]["p"], results[1]["p"])
    head = {r["claim"]["id"]: r for r in claim_verdicts.head(findings.CLAIMS, measured)}
    assert head["mosbach-failure-rate"]["result"] is results[2]  # the most runs counts
    assert head["mosbach-failure-rate"]["p"] == results[2]["p"]
    assert head["mosbach-failure-rate"]["tries"] == 2  # two tasks' runs; the combination is not a third
    assert "mrpc + rte" in text
    # both tasks supported: the combined verdict is too
    write_findings(tmp_path / "again", "mrpc", good)
    _, measured = findings.report(findings.find_sources([str(tmp_path / "rte"),
                                                         str(tmp_path / "again")]))
    assert measured["mosbach-failure-rate"][-1]["verdict"] == "supported"


def test_barrier_claim_is_the_training_loss_rise_above_the_failed_end_without_a_verdict():
    # The plane's path starts at the failed run (θ_a) and ends at the successful one.
    record = {"barriers": {
        "train_loss": {"start": 0.46, "end": 0.39, "max": 0.55, "alpha_of_max": 0.45,
                       "barrier": 0.12, "above_endpoints": 0.09, "alpha": 0.4},
        "dev_loss": {"start": 0.585, "end": 0.562, "max": 0.587, "alpha_of_max": 0.05,
                     "barrier": 0.01, "above_endpoints": 0.002, "alpha": 0.2}}}
    got = experiment.barrier_claim(record)
    assert got["effect"] == pytest.approx(0.09)  # 0.55 − 0.46, by hand
    assert got["low"] is None and got["high"] is None and got["p"] is None
    assert got["verdict"] == claim_verdicts.NO_VERDICT
    assert "0.002 above its higher end" in got["note"]
    assert "seeds" not in got  # no replays recorded
    replays = [{"replay": "out/plane/runs/seed-16"}, {"replay": "out/plane/runs/seed-5/"}]
    assert experiment.barrier_claim({**record, "replays": replays})["seeds"] == [16, 5]
    assert experiment.barrier_claim(None) is None
    assert experiment.barrier_claim({"barriers": {}}) is None


@pytest.mark.parametrize("greater", [True, False])
def test_stop_early_claim_is_the_campaign_best_against_the_expected_best_of_as_many_runs(
        greater):
    # 60 stopped runs + 5 continued = 1,800 steps of 96-step runs: 18.75 full runs, so n = 18.
    values = [0.50, 0.52, 0.55, 0.56, 0.58]
    summary = {"best_value": 0.57, "compute": {"steps": 1800, "runs": 60,
                                               "full_run_steps": 60 * 96}}
    got = experiment.stop_early_claim(summary, values, greater)
    # E[best of 18 draws with replacement] by hand: Σ v_k [(k/5)^18 − ((k−1)/5)^18].
    ordered = sorted(values, reverse=not greater)
    expected = sum(v * ((k / 5) ** 18 - ((k - 1) / 5) ** 18)
                   for k, v in enumerate(ordered, start=1))
    sign = 1 if greater else -1
    assert got["effect"] == pytest.approx(sign * (0.57 - expected))
    assert got["low"] <= got["effect"] <= got["high"]
    assert got["verdict"] == claim_verdicts.NO_VERDICT and got["p"] is None
    assert "expected best of 18 full runs" in got["measure"]
    runs = [{"seed": 201 + i} for i in range(60)]
    assert experiment.stop_early_claim({**summary, "runs": runs}, values,
                                       greater)["seeds"] == list(range(201, 261))
    assert experiment.stop_early_claim(None, values, greater) is None
    assert experiment.stop_early_claim(summary, [], greater) is None


def test_claims_measured_once_stay_undecided_over_tasks_and_outside_holm(tmp_path):
    record = {"barriers": {"train_loss": {"start": 0.6, "end": 0.57, "max": 0.65,
                                          "alpha_of_max": 0.45, "barrier": 0.06}}}
    summary = {"best_value": 0.58, "compute": {"steps": 1800, "runs": 60,
                                               "full_run_steps": 60 * 96}}
    bert = row("bert", [0.5] * 10 + [0.6] * 10, failed=range(1, 11))
    no_grads = {"total": {"failed": [], "successful": []}}
    for task in ("rte", "mrpc"):
        write_findings(tmp_path / task, task, experiment.claim_measurements(
            [bert], no_grads, None, record, summary, True))
    text, measured = findings.report(findings.find_sources([str(tmp_path)]))
    for claim in ("mosbach-barrier", "dodge-stop-early"):
        results = measured[claim]
        assert [r["task"] for r in results] == ["mrpc", "rte", "mrpc + rte"]
        assert {r["verdict"] for r in results} == {claim_verdicts.NO_VERDICT}
    head = {r["claim"]["id"]: r for r in claim_verdicts.head(findings.CLAIMS, measured)}
    assert head["mosbach-barrier"]["p"] is None and head["mosbach-barrier"]["p_holm"] is None
    assert head["dodge-stop-early"]["after_holm"] == claim_verdicts.NO_VERDICT
    assert "+0.05 training loss" in text
    assert "2 claims are measured once, no verdict" in text
