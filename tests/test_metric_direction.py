"""A task whose main metric is lower-is-better, declared (`Task.greater_is_better`): the
sweep's best run and --frozen_patience early stopping rank it by its declaration, where the
guess from the metric's name ("mae" has no loss/error word) would rank it the wrong way."""

import csv
import json
import os
import types

import numpy as np
import pytest

from kerasbert import metrics, plugins, sweep
from kerasbert import run as run_lib
from kerasbert.config import RunConfig
from kerasbert.hookspecs import hookimpl
from kerasbert.tasks import glue

TINY = dict(task="stsb_mae", init_checkpoint="random", model_size="2/32/2", max_seq_length=32,
            train_batch_size=8, eval_batch_size=16, max_train_examples=32,
            max_eval_examples=16, seed=3)


class MaeTask(glue.GlueTask):
    """STS-B scored by the mean absolute error of the predicted similarity: lower is better."""

    greater_is_better = False

    def __init__(self):
        super().__init__("stsb_mae", "STS-B", text_a="sentence1", text_b="sentence2",
                         label_column="score", label_list=None, main_metric="mae")

    def sample_dir(self):
        return glue.TASKS["stsb"].sample_dir()

    def compute_metrics(self, predictions, labels):
        error = np.abs(np.asarray(predictions, np.float64).reshape(-1)
                       - np.asarray(labels, np.float64).reshape(-1))
        return {"mae": float(error.mean()), **super().compute_metrics(predictions, labels)}


@pytest.fixture(scope="module")
def registry():
    """The built-ins and a plugin registering MaeTask, in this process only."""
    manager, _, _ = plugins.make_manager(autoload=False)
    manager.register(types.SimpleNamespace(kerasbert_tasks=hookimpl(lambda: [MaeTask()])),
                     name="mae_plugin")
    return plugins.Registry(manager)


def test_the_declaration_decides_where_the_name_would_mislead(registry):
    task = registry.task("stsb_mae")
    assert metrics.higher_is_better("mae")  # the name-based guess, wrong here
    assert not metrics.greater_is_better("mae", task, registry.kind_of(task))
    assert not sweep.metric_direction(task, registry)
    # Other metrics, and tasks that declare nothing, keep the guess.
    assert metrics.greater_is_better("pearson", task)
    assert not metrics.greater_is_better("eval_loss", glue.TASKS["stsb"])
    assert metrics.improves("mae", 0.2, 0.3, greater=False)
    assert not metrics.improves("mae", 0.4, 0.3, greater=False)


DEV_MAE = {"lr0.001-r0": 0.9, "lr0.002-r0": 0.4, "lr0.003-r0": 0.6}


def _fake_execute(config, registry=None):
    name = os.path.basename(config.output_dir)
    config.save(os.path.join(config.output_dir, "run_config.json"))
    with open(os.path.join(config.output_dir, "model.weights.h5"), "w") as f:
        f.write("x" * 100)
    result = {"mae": DEV_MAE[name], "pearson": 1.0 - DEV_MAE[name]}
    with open(os.path.join(config.output_dir, "metrics.json"), "w") as f:
        json.dump(result, f)
    return result


def test_the_sweep_keeps_the_run_with_the_lowest_mae(tmp_path, registry):
    base = RunConfig(**{**TINY, "output_dir": str(tmp_path / "sweep")})
    summary = sweep.run_sweep(base, "1e-3,2e-3,3e-3", 1, registry=registry,
                              execute=_fake_execute, log=lambda _: None)
    assert summary["best"] == "lr0.002-r0"
    assert summary["higher_is_better"] is False
    assert summary["restarts"]["higher_is_better"] is False
    assert [row["best_run"] for row in summary["per_learning_rate"]] == [
        "lr0.001-r0", "lr0.002-r0", "lr0.003-r0"]
    runs = tmp_path / "sweep" / "runs"
    assert (runs / "lr0.002-r0" / "model.weights.h5").exists()
    assert not (runs / "lr0.001-r0" / "model.weights.h5").exists()
    report = (tmp_path / "sweep" / "report.md").read_text()
    assert "Selection: dev mae, lower is better." in report
    assert "**Best: [lr0.002-r0]" in report


def test_early_stopping_keeps_the_head_with_the_lowest_mae(tmp_path, monkeypatch, registry):
    # Dev MAE is scripted: lowest at epoch 2, so with patience 1 the phase stops after
    # epoch 3 and the head of epoch 2 comes back (ranked by the name, epoch 1's 0.5 would
    # be the best and the phase would stop after epoch 2).
    scripted = iter([0.5, 0.25, 0.375, 0.25])
    monkeypatch.setattr(MaeTask, "evaluate", lambda self, *a, **k: {"mae": next(scripted)})
    config = RunConfig(**{**TINY, "output_dir": str(tmp_path / "run"), "frozen_epochs": 5.0,
                          "num_train_epochs": 0.0, "frozen_patience": 1})
    result = run_lib.execute(config, registry)
    with open(tmp_path / "run" / "history.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["dev_mae"] for r in rows] == ["0.5", "0.25", "0.375"]
    assert result["mae"] == 0.25  # the re-evaluation after restoring the best head
