"""The stability experiment: its recipes, its readings of the runs and, end to end on a
tiny encoder, its table, grid, gradient norms and stop-early campaign."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

from kerasbert.config import RunConfig
from kerasbert.errors import InputError
from kerasbert.experiments import stability
from kerasbert.run_folder import write_run_history
from tests.helpers.saved_encoder import saved_random_encoder

COMMAND = [sys.executable, "-m", "kerasbert.experiments", "stability"]


def test_recipes_set_what_the_papers_change():
    base = RunConfig(task="rte", output_dir="out", num_train_epochs=3.0)
    assert stability.recipe_changes("bert", base) == {"adam_bias_correction": False}
    assert stability.recipe_changes("mosbach", base) == {"adam_bias_correction": True,
                                                         "num_train_epochs": 6.0}
    assert stability.recipe_changes("mosbach", base, long_epochs=10)["num_train_epochs"] == 10
    assert stability.recipe_changes("zhang", base, reinit_layers=3) == {
        "adam_bias_correction": True, "reinit_top_layers": 3}
    with pytest.raises(InputError, match="--recipes: 'adam' is not a recipe"):
        stability.recipe_changes("adam", base)


def test_plans_refuse_a_recipe_twice_and_a_grid_of_one(tmp_path):
    from kerasbert import plugins

    task = plugins.registry().task("rte")
    base = RunConfig(task="rte", output_dir=str(tmp_path))
    with pytest.raises(InputError, match="names a recipe twice"):
        stability.plan_rows(base, task, [1], ["bert", "bert"])
    with pytest.raises(InputError, match="--long_epochs=0"):
        stability.plan_rows(base, task, [1], ["mosbach"], long_epochs=0)
    with pytest.raises(InputError, match="--grid_seeds: give at least two"):
        stability.plan_grid(base, task, [1])
    rows = stability.plan_rows(base, task, [1, 2], ["bert", "zhang"])
    assert [label for label, _ in rows] == ["bert", "zhang"]
    assert rows[0][1][2].adam_bias_correction is False and rows[0][1][2].seed == 2
    assert rows[1][1][1].reinit_top_layers == 2
    grid = stability.plan_grid(base, task, [1, 2])
    cell = grid[(2, 1)]
    assert (cell.data_order_seed, cell.head_init_seed, cell.seed_of("dropout")) == (2, 1, 42)
    assert cell.output_dir.endswith("grid/order-2-init-1")


def _row(tmp_path, label, runs):
    """A collected row of hand-made runs: {seed: (value, failed, total grad norm)}."""
    dirs = {}
    for seed, (_, _, norm) in runs.items():
        folder = tmp_path / f"{label}-{seed}"
        folder.mkdir()
        if norm is not None:
            write_run_history(str(folder), [
                {"epoch": 1, "grad_norm/total": 5.0, "grad_norm/head": 1.0},
                {"epoch": 2, "grad_norm/total": norm, "grad_norm/head": norm / 10}])
        dirs[seed] = str(folder)
    return {"label": label, "dirs": dirs, "values": {s: v for s, (v, _, _) in runs.items()},
            "failure_checks": {s: f for s, (_, f, _) in runs.items()}}


def test_gradient_signature_compares_failed_and_successful_runs_last_epochs(tmp_path):
    row = _row(tmp_path, "bert", {1: (0.52, True, 0.01), 2: (0.60, False, 1.0),
                                  3: (0.52, True, 0.001), 4: (0.62, False, 0.1)})
    got = stability.grad_signature([row])
    assert (got["failed_runs"], got["successful_runs"]) == (2, 2)
    # geomeans: √(0.01·0.001) / √(1·0.1) = 1e-2
    assert got["groups"]["total"]["ratio"] == pytest.approx(0.01)
    assert got["groups"]["head"]["ratio"] == pytest.approx(0.01)
    no_norms = _row(tmp_path, "old", {1: (0.5, True, None), 2: (0.6, False, None)})
    assert stability.grad_signature([no_norms])["groups"] == {}


def test_plane_pair_is_the_worst_failed_and_the_median_successful_run(tmp_path):
    row = _row(tmp_path, "bert", {1: (0.53, True, None), 2: (0.51, True, None),
                                  3: (0.60, False, None), 4: (0.58, False, None),
                                  5: (0.65, False, None)})
    assert stability.plane_pair(row, greater=True) == (row["dirs"][2], row["dirs"][3])
    only_kept = _row(tmp_path, "b", {1: (0.6, False, None)})
    assert stability.plane_pair(only_kept, greater=True) is None


def test_wall_time_is_each_groups_runs_last_recorded_seconds(tmp_path):
    dirs = []
    for n, seconds in enumerate((100.0, 130.0, 400.0)):
        folder = tmp_path / f"run-{n}"
        folder.mkdir()
        write_run_history(str(folder), [{"epoch": 1, "step": 10, "seconds": seconds / 2},
                                        {"epoch": 2, "step": 20, "seconds": seconds}])
        dirs.append(str(folder))
    (tmp_path / "unfinished").mkdir()
    times = stability.wall_times({"bert": dirs + [str(tmp_path / "unfinished")], "none": []})
    assert times == {"bert": {"runs": 3, "median": 130.0, "min": 100.0, "max": 400.0,
                              "total": 630.0}}
    text = stability.wall_time_markdown(times)
    assert "| bert | 3 | 130 | 100–400 | 0.17 |" in text
    assert "| all | 3 | | | 0.17 |" in text
    assert stability.wall_time_markdown({}) == ""
    # work recorded as one sum (the stop-early campaign's, the landscape's) joins the total
    text = stability.wall_time_markdown(times, [("start many, stop early", 60, 5400.0)])
    assert "| start many, stop early | 60 | | | 1.50 |" in text
    assert "| all | 63 | | | 1.68 |" in text  # (630 + 5400) s


def test_campaign_cost_reads_the_stop_early_summary(tmp_path):
    assert stability._campaign_cost(stability.campaign_summary(str(tmp_path))) == (0, None)
    (tmp_path / "stop_early").mkdir()
    (tmp_path / "stop_early" / "stop_early.json").write_text(
        json.dumps({"compute": {"runs": 60, "seconds": 5613.7, "steps": 1800}}))
    assert stability._campaign_cost(stability.campaign_summary(str(tmp_path))) == (60, 5613.7)


def test_plane_text_names_the_failed_and_the_successful_minimum():
    """The landscape labels the runs by folder; the report says which one failed and gives
    λ_max and ε-sharpness at each (the numbers of MRPC's plane)."""
    record = {"barriers": {"train_loss": {"barrier": 0.1215, "alpha": 0.5,
                                          "above_endpoints": 0.0882}},
              "curvature": {"pre-trained (seed-4)": {"lambda_max": 56.61, "sharpness": [
                  {"epsilon": 0.001, "keskar": 13.92}]},
                  "pre-trained (seed-10)": {"lambda_max": 192.0, "sharpness": []}},
              "replays": [{"run": "/x/bert/seed-4", "replay": "/x/plane/runs/seed-4",
                           "value": 0.7934, "replay_value": 0.7934, "failed": True,
                           "replay_failed": True},
                          {"run": "/x/bert/seed-10", "replay": "/x/plane/runs/seed-10",
                           "value": 0.823, "replay_value": 0.823, "failed": False,
                           "replay_failed": False}]}
    text = stability.plane_text(record)
    assert "train loss: barrier 0.1215 at α = 0.5 (highest point +0.0882 above" in text
    assert "the failed run (seed-4): λ_max 56.61, ε-sharpness 13.9% at ε = 0.001" in text
    assert "; the successful run (seed-10): λ_max 192." in text
    assert "(the same dev values)" in text


def test_stop_early_needs_its_flags(tmp_path):
    out = tmp_path / "s"
    result = subprocess.run(
        [*COMMAND, "--task=rte", "--stop_early_seeds=1,2", f"--output_dir={out}"],
        check=False, capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    assert result.stderr.strip().splitlines()[-1].endswith(
        "--stop_early_seeds: give --stop_early_at=F and --continue_best=K too")
    assert not out.exists()


@pytest.mark.large
def test_recipes_grid_and_stop_early_end_to_end(tmp_path):
    given = saved_random_encoder(tmp_path / "pretrained")
    out = tmp_path / "stability"
    args = [*COMMAND, "--task=rte", f"--init_checkpoint={given}", "--max_seq_length=32",
            "--max_train_examples=16", "--max_eval_examples=16", "--train_batch_size=8",
            "--num_train_epochs=1", "--learning_rate=1e-4", "--seeds=1,2",
            "--recipes=bert,zhang", "--reinit_layers=1", "--grid_seeds=1,2",
            "--stop_early_seeds=3,4,5", "--stop_early_at=0.5", "--continue_best=1",
            f"--output_dir={out}"]
    result = subprocess.run(args, check=False, capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, result.stderr[-3000:]
    text = (out / "stability.md").read_text()
    assert text in result.stdout
    # A 2-layer random encoder on 16 examples learns nothing: every run ends at the
    # constant prediction (50%), and the table says so.
    assert "| bert | 2/2 (100%, [16, 100]%) |" in text
    assert "| zhang | 2 | 2/2 | 100.0 [15.8, 100.0] |" in text
    assert "bert: 1 epochs, bias correction off" in text
    assert "zhang: 1 epochs, bias correction on, re-init top 1" in text
    assert "Data order vs initialisation (2 × 2 grid" in text
    assert "Start many, stop early" in text
    assert "for 4 optimizer steps = 2.0 full runs" in text  # 3 halves + 1 continued half
    assert "#### Wall time" in text and "| grid | 4 |" in text
    # the campaign's 3 runs counted once, from its own summary (its runs hold no history.csv
    # until continued): 2 + 2 recipe runs, 4 grid cells, 3 campaign runs
    assert "| start many, stop early (stop_early/stop_early.json) | 3 | | |" in text
    assert "| all | 11 |" in text
    analysis = json.loads((out / "stability_analysis.json").read_text())
    assert analysis["grid"]["shape"] == [2, 2]
    assert [r["label"] for r in analysis["per_recipe"]] == ["bert", "zhang"]
    assert set(analysis["wall_seconds"]) == {"bert", "zhang", "grid"}
    assert all(r["failures"]["n"] == 2 for r in analysis["per_recipe"])
    assert (out / "grid" / "order-2-init-1" / "metrics.json").is_file()
    assert (out / "stop_early" / "stop_early.json").is_file()
    assert (out / "evp.json").is_file()
    # The plan's claims these recipes measure, in the shape the findings report reads:
    # every run at 50% has no spread, so neither zhang claim is decided.
    claims = json.loads((out / "stability_findings.json").read_text())
    assert claims["experiment"]["task"] == "rte"
    # no mosbach, grid flat; the campaign is measured (claim 8), without a verdict
    assert set(claims["claims"]) == {"zhang-variance", "zhang-mean", "dodge-stop-early"}
    # every run at 50%: the campaign's best equals bert's expected best of 2 full runs
    assert claims["claims"]["dodge-stop-early"]["effect"] == pytest.approx(0.0)
    assert claims["claims"]["dodge-stop-early"]["seeds"] == [3, 4, 5]
    from kerasbert.experiments import claim_verdicts, findings

    _, measured = findings.report(findings.find_sources([str(out)]))
    assert [r["verdict"] for r in measured["zhang-mean"]] == ["not distinguishable"]
    assert [r["verdict"] for r in measured["dodge-stop-early"]] == [claim_verdicts.NO_VERDICT]
    config = json.loads((out / "bert" / "seed-2" / "run_config.json").read_text())
    assert config["adam_bias_correction"] is False
    # Again: every run is reused, the report is the same.
    again = subprocess.run(args, check=False, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    assert (out / "stability.md").read_text() == text


@pytest.mark.large
def test_the_plane_replays_its_two_runs_with_their_trajectory_and_checks_them(tmp_path):
    from kerasbert import run as run_lib

    given = saved_random_encoder(tmp_path / "pretrained")
    out = tmp_path / "stability"
    configs = {seed: RunConfig(task="sst2", init_checkpoint=given, max_seq_length=32,
                               max_train_examples=16, max_eval_examples=16,
                               train_batch_size=8, num_train_epochs=1.0, learning_rate=1e-3,
                               adam_bias_correction=False, seed=seed,
                               output_dir=str(out / "bert" / f"seed-{seed}"))
               for seed in (1, 2)}
    for config in configs.values():
        run_lib.execute(config)  # as the recipes' runs: no trajectory
    assert not (out / "bert" / "seed-1" / "trajectory").exists()
    # seed 1 "failed", seed 2 did not (the row's verdicts as collect reads them)
    row = {"label": "bert", "dirs": {s: c.output_dir for s, c in configs.items()},
           "values": {1: 0.4, 2: 0.6}, "failure_checks": {1: True, 2: False}}
    logs = []
    record = stability.draw_plane(str(out), [("bert", configs)], row, "accuracy", True,
                                  execute=run_lib.execute, log=logs.append)
    assert record is not None, logs
    replays = record["replays"]
    assert [os.path.basename(r["run"]) for r in replays] == ["seed-1", "seed-2"]
    for r in replays:  # CPU runs are deterministic: the replay ends where its run ended
        assert r["replay_value"] == r["value"] and r["replay_failed"] == r["failed"]
        assert (pathlib.Path(r["replay"]) / "trajectory").is_dir()
    saved = json.loads((out / "plane" / "three_point.json").read_text())
    assert set(saved["barriers"]) == {"train_loss", "dev_loss"}
    assert "| theta_b |" in (out / "plane" / "three_point.md").read_text()
    assert "(the same dev values)" in stability.plane_text(record)
    # A replay that does not reproduce its run's verdict draws no plane, and says why.
    check = out / "bert" / "seed-1" / "failure_check.json"
    flipped = json.loads(check.read_text())
    flipped["failed"] = not flipped["failed"]
    check.write_text(json.dumps(flipped))
    (out / "plane" / "three_point.json").unlink()
    logs.clear()
    assert stability.draw_plane(str(out), [("bert", configs)], row, "accuracy", True,
                                execute=run_lib.execute, log=logs.append) is None
    assert logs and logs[0].startswith("stability: the plane is not drawn: ")
