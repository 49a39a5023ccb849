"""Expected validation performance (kerasbert/analysis/evp.py) against brute force over every
n-tuple of runs and against values worked by hand; the evp.json/.md/.png of a table."""

import itertools
import json

import numpy as np
import pytest

from kerasbert.analysis import evp


def _brute_force(values, n, greater):
    """Mean and std of the best of every one of the N^n equally likely n-tuples."""
    best = max if greater else min
    bests = np.array([best(t) for t in itertools.product(values, repeat=n)])
    return bests.mean(), bests.std()


@pytest.mark.parametrize("greater", [True, False])
@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_expected_best_equals_the_average_over_every_tuple(n, greater):
    values = [0.61, 0.70, 0.55, 0.70, 0.82]  # a tie too
    mean, std = evp.expected_best(values, n, greater)
    want_mean, want_std = _brute_force(values, n, greater)
    assert mean == pytest.approx(want_mean, abs=1e-12)
    assert std == pytest.approx(want_std, abs=1e-12)


def test_hand_values():
    # Scores 1, 2, 3. Best of 2: P(3) = 1 − (2/3)² = 5/9, P(2) = 4/9 − 1/9 = 3/9, P(1) = 1/9,
    # so E = (3·5 + 2·3 + 1)/9 = 22/9; E[best²] = (9·5 + 4·3 + 1)/9 = 58/9.
    mean, std = evp.expected_best([3, 1, 2], 2)
    assert mean == pytest.approx(22 / 9)
    assert std == pytest.approx(np.sqrt(58 / 9 - (22 / 9) ** 2))
    # Lower is better: the best of 2 is the minimum, E = (1·5 + 2·3 + 3·1)/9 = 14/9.
    assert evp.expected_best([3, 1, 2], 2, greater=False)[0] == pytest.approx(14 / 9)
    # One run: the mean; many runs: the best score.
    assert evp.expected_best([3, 1, 2], 1) == pytest.approx((2.0, np.sqrt(2 / 3)))
    assert evp.expected_best([3, 1, 2], 200)[0] == pytest.approx(3.0)
    assert evp.max_weights(3, 2) == pytest.approx([1 / 9, 3 / 9, 5 / 9])


def test_curve_rises_with_n_and_carries_the_budget():
    values = [0.5, 0.9, 0.7, 0.6]
    points = evp.curve(values, cost={"steps": 100, "seconds": 2.5}, resamples=500)
    assert [p["n"] for p in points] == [1, 2, 3, 4]
    expected = [p["expected"] for p in points]
    assert expected[0] == pytest.approx(np.mean(values))
    assert expected == sorted(expected)  # more runs never lower the expected best
    assert [p["steps"] for p in points] == [100, 200, 300, 400]
    assert [p["seconds"] for p in points] == [2.5, 5.0, 7.5, 10.0]
    for p in points:
        assert p["low"] <= p["expected"] <= p["high"]
        assert min(values) <= p["low"] and p["high"] <= max(values)
    # The same seed, the same interval; lower-is-better curves fall.
    assert evp.curve(values, resamples=500) == evp.curve(values, resamples=500)
    falling = [p["expected"] for p in evp.curve(values, greater=False, resamples=0)]
    assert falling == sorted(falling, reverse=True)
    assert falling[-1] == pytest.approx(evp.expected_best(values, 4, False)[0])


def test_one_score_has_no_interval_and_bad_input_is_refused():
    assert evp.curve([0.8]) == [{"n": 1, "expected": 0.8, "std": 0.0, "low": None,
                                 "high": None}]
    with pytest.raises(ValueError, match="no scores"):
        evp.expected_best([], 1)
    with pytest.raises(ValueError, match="not finite"):
        evp.expected_best([0.5, float("nan")], 1)
    with pytest.raises(ValueError, match="n=0"):
        evp.expected_best([0.5], 0)


def _fake_run(folder, accuracy, steps, seconds):
    from kerasbert import run_folder

    folder.mkdir(parents=True)
    run_folder.write_run_history(str(folder), [
        {"phase": "finetune", "epoch": 1, "step": steps // 2, "seconds": seconds / 2},
        {"phase": "finetune", "epoch": 2, "step": steps, "seconds": seconds}])
    run_folder.write_metrics(str(folder), {"accuracy": accuracy})


def test_a_resumed_runs_seconds_add_up_every_process_that_trained_it():
    from kerasbert.evp_report import run_seconds

    # epochs of 60 s; the run killed in epoch 4 and resumed: its clock starts again
    history = [{"seconds": s} for s in ("60.0", "120.0", "180.0", "4200.5", "49.5", "92.0")]
    assert run_seconds(history) == 4200.5 + 92.0
    assert run_seconds([{"seconds": "30"}, {"seconds": "61.5"}]) == 61.5
    assert run_seconds([]) is None and run_seconds([{"seconds": ""}]) is None


def test_a_tables_rows_get_evp_json_md_and_png(tmp_path):
    from kerasbert import evp_report, restarts

    scores = {"a": [0.5, 0.7, 0.6], "b": [0.8, 0.6]}
    rows = []
    for label, values in scores.items():
        runs = {}
        for seed, value in enumerate(values, start=1):
            folder = tmp_path / label / f"seed-{seed}"
            _fake_run(folder, value, steps=10 * seed, seconds=4.0 * seed)
            runs[seed] = str(folder)
        rows.append({"label": label, "runs": runs})
    rows.append({"label": "c", "runs": {1: str(tmp_path / "c" / "seed-1")}})  # never ran
    table = restarts.summarize(restarts.collect(rows, "accuracy"), "accuracy")
    before = json.dumps(table, sort_keys=True)
    written = evp_report.write(str(tmp_path), {"sst2": table})
    assert json.dumps(table, sort_keys=True) == before  # the table itself is untouched

    saved = json.loads((tmp_path / "evp.json").read_text())
    assert saved == json.loads(json.dumps(written))
    a, b, c = saved["sst2"]["rows"]
    assert (a["label"], a["n"], a["cost"]) == ("a", 3, {"steps": 20, "seconds": 8.0})
    # Row a, best of 2 of {0.5, 0.6, 0.7}: (0.5·1 + 0.6·3 + 0.7·5)/9.
    assert a["curve"][1]["expected"] == pytest.approx((0.5 + 1.8 + 3.5) / 9)
    assert [p["steps"] for p in a["curve"]] == [20, 40, 60]
    assert [p["seconds"] for p in a["curve"]] == [8.0, 16.0, 24.0]
    # Row b: best of 2 of {0.6, 0.8}: 0.6·1/4 + 0.8·3/4.
    assert b["curve"][1]["expected"] == pytest.approx(0.75)
    assert b["cost"] == {"steps": 15, "seconds": 6.0}
    assert (c["n"], c["curve"]) == (0, [])
    md = (tmp_path / "evp.md").read_text()
    assert "| a | 2 | 0.6444 ± " in md and "| c | 0 | – (no finished run) |" in md
    assert (tmp_path / "evp.png").stat().st_size > 5000


def test_lower_is_better_tables_expect_the_lowest(tmp_path):
    from kerasbert import evp_report

    table = {"metric": "loss", "higher_is_better": False,
             "rows": [{"label": "x", "values": [3.0, 1.0, 2.0], "seeds": [1, 2, 3],
                       "dirs": {}}]}
    result = evp_report.table_evp(table, resamples=0)
    assert [p["expected"] for p in result["rows"][0]["curve"]] == pytest.approx(
        [2.0, 14 / 9, evp.expected_best([3, 1, 2], 3, greater=False)[0]])
    assert result["rows"][0]["cost"] == {"steps": None, "seconds": None}
