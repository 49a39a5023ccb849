"""Learning-rate × restart sweeps: the plan, best-on-dev selection, pruning, resume."""

import csv
import json
import math
import os
import subprocess
import sys

import pytest

from kerasbert import report as report_lib
from kerasbert import run as run_lib
from kerasbert import sweep
from kerasbert.config import RunConfig
from kerasbert.errors import InputError
from kerasbert.training.loop import NonFiniteLossError

TINY = {"task": "rte", "init_checkpoint": "random", "model_size": "2/32/2",
        "max_seq_length": 32, "train_batch_size": 8, "eval_batch_size": 16,
        "num_train_epochs": 1.0, "seed": 7, "max_train_examples": 16, "max_eval_examples": 16}


def _base(tmp_path, **overrides):
    return RunConfig(**{**TINY, "output_dir": str(tmp_path / "sweep"), **overrides})


# --- The plan and the selection (no training) --------------------------------------------

def test_plan_has_one_run_per_rate_and_restart_with_its_own_seed(tmp_path):
    base = _base(tmp_path, learning_rate=2e-5)
    plan = sweep.plan_sweep(base, sweep.parse_learning_rates("5e-5, 3e-5"), 3)
    assert [(r.name, r.learning_rate, r.seed) for r in plan] == [
        ("lr5e-05-r0", 5e-5, 7), ("lr5e-05-r1", 5e-5, 8), ("lr5e-05-r2", 5e-5, 9),
        ("lr3e-05-r0", 3e-5, 7), ("lr3e-05-r1", 3e-5, 8), ("lr3e-05-r2", 3e-5, 9)]
    for run in plan:
        assert run.config.learning_rate == run.learning_rate and run.config.seed == run.seed
        assert run.config.output_dir == str(tmp_path / "sweep" / "runs" / run.name)
        # Everything else (data, encoder checkpoint, epochs) is the base's.
        assert run.config.init_checkpoint == "random" and run.config.max_train_examples == 16


@pytest.mark.parametrize("text, message", [
    ("5e-5,abc", "'abc' is not a number"), ("5e-5,-1e-5", "-1e-5 must be a positive"),
    ("2e-5,2e-5", "2e-5 is given twice"), ("nan", "nan must be a positive")])
def test_bad_learning_rates_are_refused(text, message):
    with pytest.raises(InputError, match=f"--learning_rates: {message}"):
        sweep.parse_learning_rates(text)


def test_best_on_dev_is_the_highest_value_skipping_failed_and_nan_runs():
    results = [{"name": "a", "metrics": {"accuracy": 0.61, "f1": 0.90}},
               {"name": "b", "metrics": {"accuracy": 0.74, "f1": 0.10}},
               {"name": "c", "metrics": None},  # failed
               {"name": "d", "metrics": {"accuracy": float("nan")}},
               {"name": "e", "metrics": {"accuracy": 0.74}}]  # a tie: the earlier run wins
    assert sweep.select_best(results, "accuracy") == "b"
    assert sweep.select_best(results, "f1") == "a"  # the task's main metric decides
    assert sweep.select_best(results[2:4], "accuracy") is None


def test_best_on_dev_is_the_lowest_value_for_losses_and_perplexities():
    results = [{"name": "a", "metrics": {"eval_loss": 0.9, "perplexity": 12.0}},
               {"name": "b", "metrics": {"eval_loss": 0.4, "perplexity": 30.0}}]
    assert not sweep.higher_is_better("eval_loss")
    assert sweep.select_best(results, "eval_loss") == "b"
    assert sweep.select_best(results, "perplexity") == "a"
    assert sweep.higher_is_better("matthews_corrcoef") and sweep.higher_is_better("best_f1")


def test_summary_per_learning_rate_is_mean_std_and_best_over_restarts():
    results = [
        {"name": "x0", "learning_rate": 5e-5, "status": "finished", "metrics": {"f1": 0.5}},
        {"name": "x1", "learning_rate": 5e-5, "status": "finished", "metrics": {"f1": 0.7}},
        {"name": "x2", "learning_rate": 5e-5, "status": "finished", "metrics": {"f1": 0.9}},
        {"name": "y0", "learning_rate": 2e-5, "status": "failed", "metrics": None},
        {"name": "y1", "learning_rate": 2e-5, "status": "finished", "metrics": {"f1": 0.8}}]
    high, low = sweep.summarise(results, "f1")
    assert high["learning_rate"] == 5e-5 and high["finished"] == 3 and high["failed"] == 0
    assert high["mean"] == pytest.approx(0.7)
    assert high["std"] == pytest.approx(math.sqrt((0.04 + 0 + 0.04) / 2))  # sample std
    assert (high["best"], high["best_run"]) == (0.9, "x2")
    assert (low["finished"], low["failed"], low["mean"], low["std"]) == (1, 1, 0.8, 0.0)
    assert low["best_run"] == "y1"


# --- The driver with a stand-in for training (fast) ---------------------------------------

DEV = {"lr0.001-r0": 0.61, "lr0.001-r1": 0.83, "lr0.002-r0": 0.70}  # lr0.002-r1 diverges


def _fake_execute(calls):
    """Writes what a finished run leaves (config, metrics, history, weights, predictions),
    with hand-set dev accuracies; one run fails as a diverged run does."""

    def execute(config, registry=None):
        name = os.path.basename(config.output_dir)
        calls.append((name, config.learning_rate, config.seed))
        assert config.export_dir is None  # only the sweep's best run is exported
        os.makedirs(os.path.join(config.output_dir, "checkpoints"), exist_ok=True)
        config.save(os.path.join(config.output_dir, "run_config.json"))
        if name not in DEV:
            raise NonFiniteLossError("the training loss became nan at step 3")
        for big in ("model.weights.h5", "test_results.tsv", "checkpoints/ckpt-1.index"):
            with open(os.path.join(config.output_dir, big), "w") as f:
                f.write("x" * 100)
        with open(os.path.join(config.output_dir, "history.csv"), "w") as f:
            f.write("phase,epoch,step,train_loss,seconds,dev_accuracy\n"
                    f"finetune,1,2,0.69,1.5,{DEV[name] - 0.1}\nfinetune,2,4,0.5,3.0,{DEV[name]}\n")
        metrics = {"accuracy": DEV[name]}
        with open(os.path.join(config.output_dir, "metrics.json"), "w") as f:
            json.dump(metrics, f)
        return metrics

    return execute


def test_sweep_keeps_the_best_run_prunes_the_others_and_summarises(tmp_path):
    calls = []
    summary = sweep.run_sweep(_base(tmp_path), "1e-3,2e-3", 2, execute=_fake_execute(calls),
                              log=lambda _: None)
    assert calls == [("lr0.001-r0", 1e-3, 7), ("lr0.001-r1", 1e-3, 8),
                     ("lr0.002-r0", 2e-3, 7), ("lr0.002-r1", 2e-3, 8)]
    assert summary["best"] == "lr0.001-r1"
    runs = tmp_path / "sweep" / "runs"
    kept = sorted(os.listdir(runs / "lr0.001-r1"))
    assert {"model.weights.h5", "test_results.tsv", "checkpoints"} <= set(kept)
    for loser in ("lr0.001-r0", "lr0.002-r0", "lr0.002-r1"):
        left = set(os.listdir(runs / loser))
        assert not left & {"model.weights.h5", "test_results.tsv", "checkpoints"}, loser
        assert {"run_config.json", "report.md", "sweep_pruned.json"} <= left
    assert json.loads((runs / "lr0.002-r1" / "failed.json").read_text())["error"].endswith("step 3")

    with open(tmp_path / "sweep" / "sweep.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(r["run"], r["status"], r["accuracy"], r["best"]) for r in rows] == [
        ("lr0.001-r0", "finished", "0.61", "0"), ("lr0.001-r1", "finished", "0.83", "1"),
        ("lr0.002-r0", "finished", "0.7", "0"), ("lr0.002-r1", "failed", "", "0")]
    report = (tmp_path / "sweep" / "report.md").read_text()
    std = math.sqrt(((0.61 - 0.72) ** 2 + (0.83 - 0.72) ** 2) / 1)
    assert f"| 0.001 | 2/2 | 0.7200 ± {std:.4f} | 0.8300 | lr0.001-r1 ★ |" in report
    assert "| 0.002 | 1/2 | 0.7000 ± 0.0000 | 0.7000 | lr0.002-r0 |" in report
    assert "**Best: [lr0.001-r1](runs/lr0.001-r1/report.md), dev accuracy = 0.8300**" in report
    assert (tmp_path / "sweep" / "sweep.png").stat().st_size > 5000
    assert "removed (checkpoints/, model.weights.h5, test_results.tsv)" in (
        runs / "lr0.001-r0" / "report.md").read_text()

    # `python -m kerasbert.report <sweep_dir>` rewrites the same report.
    (tmp_path / "sweep" / "report.md").unlink()
    assert report_lib.main([str(tmp_path / "sweep")]) == 0
    assert (tmp_path / "sweep" / "report.md").read_text() == report

    # Started again: nothing is re-run, failed runs included; the summary is the same but
    # for when it was written.
    again = []
    summary2 = sweep.run_sweep(_base(tmp_path), "1e-3,2e-3", 2, execute=_fake_execute(again),
                               log=lambda _: None)
    assert summary2["measured_on"]["utc"] >= summary["measured_on"]["utc"]
    assert again == [] and {**summary2, "measured_on": None} == {**summary, "measured_on": None}
    # the grid, not --learning_rate, is what the runs used
    assert summary["experiment"]["learning_rates"] == [1e-3, 2e-3]
    assert "learning_rate" not in summary["experiment"]


def test_a_sweep_recording_trajectories_prunes_nothing(tmp_path):
    """Pre-trained vs random init over seeds (Hao et al.): each run's trajectory and weights
    are what the landscape reads, so the runs that are not best keep them too."""
    base = _base(tmp_path, save_trajectory_every=8)
    summary = sweep.run_sweep(base, "1e-3", 2, execute=_fake_execute([]), log=lambda _: None)
    assert summary["best"] == "lr0.001-r1"
    left = set(os.listdir(tmp_path / "sweep" / "runs" / "lr0.001-r0"))
    assert {"model.weights.h5", "checkpoints"} <= left and "sweep_pruned.json" not in left


def test_resume_runs_only_what_is_missing_and_refuses_other_settings(tmp_path):
    calls = []
    sweep.run_sweep(_base(tmp_path), ["2e-3"], 1, execute=_fake_execute(calls),
                    log=lambda _: None)
    assert calls == [("lr0.002-r0", 2e-3, 7)]
    # An unfinished run (config written, no metrics.json) is handed back to execute,
    # which resumes it from its checkpoints.
    from kerasbert import plugins

    planned = sweep.plan_sweep(_base(tmp_path).resolved(plugins.registry().task("rte")),
                               (1e-3,), 2)[1]
    unfinished = tmp_path / "sweep" / "runs" / "lr0.001-r1"
    unfinished.mkdir()
    planned.config.save(str(unfinished / "run_config.json"))
    calls.clear()
    summary = sweep.run_sweep(_base(tmp_path), ["1e-3", "2e-3"], 2,
                              execute=_fake_execute(calls), log=lambda _: None)
    assert calls == [("lr0.001-r0", 1e-3, 7), ("lr0.001-r1", 1e-3, 8), ("lr0.002-r1", 2e-3, 8)]
    assert [r["status"] for r in summary["runs"]] == ["finished"] * 3 + ["failed"]

    calls.clear()
    with pytest.raises(InputError, match=r"lr0\.001-r0/run_config\.json: this run was made "
                                         r"with max_train_examples=16, the sweep now asks for 32"):
        sweep.run_sweep(_base(tmp_path, max_train_examples=32), ["1e-3"], 1,
                        execute=_fake_execute(calls), log=lambda _: None)
    assert calls == []
    # --overwrite_output_dir starts the sweep over.
    sweep.run_sweep(_base(tmp_path, max_train_examples=32, overwrite_output_dir=True), ["1e-3"],
                    1, execute=_fake_execute(calls), log=lambda _: None)
    assert calls == [("lr0.001-r0", 1e-3, 7)]
    assert os.listdir(tmp_path / "sweep" / "runs") == ["lr0.001-r0"]


def test_an_export_dir_that_cannot_be_made_is_refused_before_the_first_run(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    calls = []
    with pytest.raises(InputError, match=rf"^--export_dir={blocker}: cannot create it "
                                         r"\(File exists\)$"):
        sweep.run_sweep(_base(tmp_path, export_dir=str(blocker)), "1e-3", 1,
                        execute=_fake_execute(calls), log=lambda _: None)
    assert calls == [] and not (tmp_path / "sweep").exists()


def test_sweep_flags_that_contradict_are_refused(tmp_path):
    with pytest.raises(InputError, match="--learning_rate=0.001: a sweep takes"):
        sweep.run_sweep(_base(tmp_path, learning_rate=1e-3), "1e-3,2e-3", 1, execute=None)
    with pytest.raises(InputError, match="--num_restarts=0: must be a positive integer"):
        sweep.run_sweep(_base(tmp_path), "1e-3", 0, execute=None)
    with pytest.raises(InputError, match="--do_eval: a sweep picks its best run on dev"):
        sweep.run_sweep(_base(tmp_path, do_eval=False), "1e-3", 2, execute=None)


# --- Real tiny runs ------------------------------------------------------------------------

def test_tiny_sweep_trains_every_restart_with_its_own_seed(tmp_path):
    calls = []

    def counting_execute(config, registry=None):
        calls.append(os.path.basename(config.output_dir))
        return run_lib.execute(config, registry)

    summary = sweep.run_sweep(_base(tmp_path), "1e-3", 2, execute=counting_execute,
                              log=lambda _: None)
    names = ["lr0.001-r0", "lr0.001-r1"]
    assert calls == names
    runs = tmp_path / "sweep" / "runs"
    for name, seed in zip(names, (7, 8)):
        config = json.loads((runs / name / "run_config.json").read_text())
        assert (config["learning_rate"], config["seed"]) == (1e-3, seed)
        assert (runs / name / "curves.png").exists()
    metrics = {n: json.loads((runs / n / "metrics.json").read_text()) for n in names}
    for name in names:  # execute wrote each run's report
        headline = f"**dev accuracy = {metrics[name]['accuracy']:.4f}** (end of training)"
        assert headline in (runs / name / "report.md").read_text()
    expected = sweep.select_best([{"name": n, "metrics": metrics[n]} for n in names], "accuracy")
    assert summary["best"] == expected
    assert (runs / expected / "model.weights.h5").exists()
    assert (runs / expected / "encoder").is_dir()
    assert not (runs / expected / "checkpoints").exists()  # a finished run keeps no resume state
    assert sum((runs / n / "model.weights.h5").exists() for n in names) == 1
    # Different seeds give different training (data order, head initialisation).
    losses = [(runs / n / "history.csv").read_text().splitlines()[1].split(",")[3] for n in names]
    assert losses[0] != losses[1]


def test_cli_refuses_bad_sweep_flags_in_one_line(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "kerasbert.main", "--task=rte", "--learning_rates=2e-5,fast",
         f"--output_dir={tmp_path / 's'}"], check=False, capture_output=True, text=True, timeout=300,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "kerasbert: error: --learning_rates: 'fast' is not a number")
    assert not (tmp_path / "s").exists()


@pytest.mark.large
def test_cli_runs_a_sweep(tmp_path):
    out = tmp_path / "cli"
    result = subprocess.run(
        [sys.executable, "-m", "kerasbert.main", "--task=rte", "--init_checkpoint=random",
         "--model_size=2/32/2", "--max_seq_length=32", "--num_train_epochs=1",
         "--max_train_examples=16", "--learning_rates=1e-3", "--num_restarts=2",
         f"--output_dir={out}"], check=False, capture_output=True, text=True, timeout=600,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 0, result.stderr[-2000:]
    assert "| 0.001 | 2/2 |" in result.stdout
    assert sorted(os.listdir(out / "runs")) == ["lr0.001-r0", "lr0.001-r1"]
    assert json.loads((out / "sweep.json").read_text())["best"] in ("lr0.001-r0", "lr0.001-r1")


def test_export_dir_exports_only_the_best_run(tmp_path, monkeypatch):
    from kerasbert.export import saved_model

    exported = []
    monkeypatch.setattr(saved_model, "export_run",  # the sweep calls it through its module
                        lambda run_dir, export_dir, registry=None: exported.append(
                            (run_dir, export_dir)) or os.path.join(export_dir, "1"))
    calls = []
    sweep.run_sweep(_base(tmp_path, export_dir=str(tmp_path / "serving")), "1e-3", 2,
                    execute=_fake_execute(calls), log=lambda _: None)
    # No run exports on its own; the winner (lr0.001-r1, dev 0.83) is exported once.
    assert [c[0] for c in calls] == ["lr0.001-r0", "lr0.001-r1"]
    assert exported == [(str(tmp_path / "sweep" / "runs" / "lr0.001-r1"),
                         str(tmp_path / "serving"))]
