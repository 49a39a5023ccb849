"""--stop_early_at (stop a run after a fraction of its steps, continue it later) and the
start-many-stop-early restarts (kerasbert/stop_early.py): a continued run is the run that
never stopped; only the best K continue; the compute figures are the steps counted by hand."""

import csv
import json

import h5py
import numpy as np
import pytest

from kerasbert import run_folder
from kerasbert import run as run_lib
from kerasbert.config import RunConfig
from kerasbert.errors import InputError

# 32 examples / batch 8 = 4 steps an epoch, 2 epochs: 8 steps a run.
RUN = {"task": "sst2", "init_checkpoint": "random", "model_size": "2/32/2",
       "max_seq_length": 32, "train_batch_size": 8, "eval_batch_size": 16,
       "max_train_examples": 32, "max_eval_examples": 16, "num_train_epochs": 2.0,
       "learning_rate": 1e-3, "seed": 3}


def _config(out, **overrides):
    return RunConfig(**{**RUN, "output_dir": str(out), **overrides})


def _weights(out):
    """Every array in model.weights.h5, by its path in the file."""
    arrays = {}
    with h5py.File(out / run_folder.MODEL_WEIGHTS, "r") as f:
        f.visititems(lambda name, item: arrays.__setitem__(name, item[()])
                     if isinstance(item, h5py.Dataset) else None)
    return arrays


def _history(out):
    with open(out / run_folder.HISTORY) as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out = tmp_path_factory.mktemp("straight") / "run"
    return run_lib.execute(_config(out)), out


@pytest.mark.parametrize("fraction, step", [(0.375, 3), (0.5, 4)])  # mid-epoch; an epoch's end
def test_a_stopped_run_continued_is_the_uninterrupted_run(tmp_path, uninterrupted, fraction,
                                                           step):
    metrics, straight = uninterrupted
    out = tmp_path / "run"
    at_stop = run_lib.execute(_config(out, stop_early_at=fraction))
    assert run_folder.status(str(out)) == "unfinished"
    assert not (out / run_folder.MODEL_WEIGHTS).exists()
    stop = json.loads((out / run_folder.STOP_POINT).read_text())
    assert (stop["step"], stop["total_steps"], stop["finished"]) == (step, 8, False)
    assert stop["metrics"] == at_stop and set(at_stop) == set(metrics)
    # The same command again stops at the same place, training nothing more.
    assert run_lib.execute(_config(out, stop_early_at=fraction)) == pytest.approx(at_stop)
    assert json.loads((out / run_folder.STOP_POINT).read_text()) == {
        **stop, "metrics": pytest.approx(at_stop)}  # the first stop's seconds too

    continued = run_lib.execute(_config(out))  # the same command without the flag
    assert continued == pytest.approx(metrics, abs=1e-6)
    want = _weights(straight)
    got = _weights(out)
    assert sorted(got) == sorted(want)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], atol=1e-6, err_msg=name)
    assert [(r["epoch"], r["step"], r["learning_rate"]) for r in _history(out)] == [
        (r["epoch"], r["step"], r["learning_rate"]) for r in _history(straight)]
    assert run_folder.read_stop_point(str(out))["step"] == step  # kept: what happened


def test_stop_early_at_is_checked_before_training(tmp_path):
    for bad in (0.0, 1.0, 1.5, -0.2):
        with pytest.raises(InputError, match=r"--stop_early_at=.*between 0 and 1"):
            _config(tmp_path, stop_early_at=bad)
    with pytest.raises(InputError, match="--stop_early_at=0.5: stops the training: needs "
                                         "--do_train"):
        _config(tmp_path, stop_early_at=0.5, do_train=False, do_eval=True)


def test_the_stop_step_is_the_nearest_whole_step_before_the_end():
    from kerasbert.training.phases import stop_step

    assert stop_step(None, 8) is None
    assert stop_step(0.5, 8) == 4
    assert stop_step(0.3, 8) == 2  # 2.4 → 2
    assert stop_step(0.01, 8) == 1  # at least one step
    assert stop_step(0.95, 8) is None  # 7.6 → 8: the end, no stop


# --- Start many, stop early ------------------------------------------------------------------

def _recording(calls):
    """run.execute, recording (run folder name, --stop_early_at) of each call."""
    def execute(config, registry=None):
        calls.append((config.output_dir.rsplit("/", 1)[-1], config.stop_early_at))
        return run_lib.execute(config, registry)
    return execute


def test_start_four_stop_at_half_continue_the_best_two(tmp_path):
    from kerasbert import stop_early

    base = _config(tmp_path / "many", stop_early_at=0.5)
    seeds = [11, 12, 13, 14]
    calls = []
    summary = stop_early.run_stop_early(base, 2, seeds=[str(s) for s in seeds],
                                        execute=_recording(calls), log=lambda line: None)
    names = [f"lr0.001-r{i}" for i in range(4)]
    # Every run to its stop, then only the chosen two on (from the stop to the end).
    assert calls[:4] == [(name, 0.5) for name in names]
    at_stop = {name: json.loads((tmp_path / "many" / "runs" / name / run_folder.STOP_POINT)
                                .read_text())["metrics"]["accuracy"] for name in names}
    ranked = sorted(names, key=lambda name: (-at_stop[name], names.index(name)))
    assert summary["chosen"] == sorted(ranked[:2], key=names.index)
    assert calls[4:] == [(name, None) for name in summary["chosen"]]
    runs = {r["name"]: r for r in summary["runs"]}
    for name in names:
        status = run_folder.status(str(tmp_path / "many" / "runs" / name))
        assert status == ("finished" if name in summary["chosen"] else "unfinished")
        assert runs[name]["stop_value"] == at_stop[name]
        assert runs[name]["steps"] == (8 if name in summary["chosen"] else 4)
    # Hand-counted: 4 runs × 4 steps to the stop + 2 × 4 more = 24 of 4 × 8 = 32; 8 saved.
    c = summary["compute"]
    assert (c["steps"], c["full_run_steps"], c["saved_steps"]) == (24, 32, 8)
    assert c["saved_fraction"] == pytest.approx(0.25)
    assert c["seconds"] == pytest.approx(sum(
        r["stop_seconds"] + (r["continue_seconds"] or 0) for r in summary["runs"]), abs=0.2)
    assert c["seconds_estimated_from"] == 2 and c["full_run_seconds_estimate"] > 0
    finals = {name: runs[name]["final_value"] for name in summary["chosen"]}
    assert summary["best_value"] == max(finals.values())
    assert summary["best"] == min((n for n in finals if finals[n] == summary["best_value"]),
                                  key=names.index)
    md = (tmp_path / "many" / stop_early.SUMMARY_MD).read_text()
    assert "24 optimizer steps against 32 for 4 full runs (saved 8, 25.0%)" in md
    assert json.loads((tmp_path / "many" / stop_early.SUMMARY_JSON).read_text())["chosen"] == \
        summary["chosen"]

    # A continued run is the full run that never stopped (same seed, same settings).
    for name in summary["chosen"]:
        seed = seeds[names.index(name)]
        full = run_lib.execute(_config(tmp_path / f"full-{seed}", seed=seed))
        assert finals[name] == pytest.approx(full["accuracy"], abs=1e-6)
        got, want = _weights(tmp_path / "many" / "runs" / name), _weights(
            tmp_path / f"full-{seed}")
        for key in want:
            np.testing.assert_allclose(got[key], want[key], atol=1e-6, err_msg=key)

    # The same command again trains nothing; a larger K continues one more run.
    calls.clear()
    again = stop_early.run_stop_early(base, 2, seeds=[str(s) for s in seeds],
                                      execute=_recording(calls), log=lambda line: None)
    assert calls == [] and again["chosen"] == summary["chosen"]
    third = stop_early.run_stop_early(base, 3, seeds=[str(s) for s in seeds],
                                      execute=_recording(calls), log=lambda line: None)
    assert calls == [(ranked[2], None)] and len(third["chosen"]) == 3
    assert third["compute"]["steps"] == 28


def test_stop_early_flags_that_cannot_work_are_refused(tmp_path):
    from kerasbert import stop_early

    base = _config(tmp_path / "x", stop_early_at=0.5)
    never = lambda config, registry=None: pytest.fail("nothing may run")  # noqa: E731
    for keep, message in ((5, r"--continue_best=5: must be between 0 and the number of runs "
                               r"started \(4\)"), (-1, "--continue_best=-1: must be between"),
                          (None, "--stop_early_at=0.5: with 4 runs, say how many of them "
                                 "continue to the end: --continue_best=K")):
        with pytest.raises(InputError, match=message):
            stop_early.run_stop_early(base, keep, num_restarts=4, execute=never)
    with pytest.raises(InputError, match="--continue_best=2: continues the runs that "
                                         "--stop_early_at stopped"):
        stop_early.run_stop_early(_config(tmp_path / "x"), 2, num_restarts=4, execute=never)
    with pytest.raises(InputError, match="--learning_rate=0.001: the runs take their"):
        stop_early.run_stop_early(base, 1, num_restarts=2, learning_rates="1e-3,2e-3",
                                  execute=never)
    assert not (tmp_path / "x").exists()  # refused before anything was written


def test_cli_refuses_a_stop_early_sweep_without_continue_best(tmp_path):
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "kerasbert.main", "--task=sst2", "--seeds=1,2",
         "--stop_early_at=0.5", f"--output_dir={tmp_path / 'o'}"],
        capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    assert result.stderr.strip().splitlines()[-1] == (
        "kerasbert: error: --stop_early_at=0.5: with 2 runs, say how many of them continue "
        "to the end: --continue_best=K")


def test_the_best_at_the_stop_continue_in_the_metrics_direction(tmp_path):
    from kerasbert import stop_early, sweep

    plan = sweep.plan_sweep(_config(tmp_path), [1e-3], 5, None)
    values = [0.30, 0.10, 0.20, 0.10, None]  # the last run failed before its stop
    for run, value in zip(plan, values):
        out = run.config.output_dir
        (tmp_path / "runs" / run.name).mkdir(parents=True)
        if value is None:
            run_folder.write_failure(out, "loss became NaN")
        else:
            run_folder.write_stop_point(out, {"fraction": 0.5, "step": 4, "total_steps": 8,
                                              "seconds": 1.0, "metrics": {"loss": value},
                                              "finished": False})
    names = [run.name for run in plan]
    # Lower is better: 0.10 twice (the earlier run first), then 0.20; the failed one never.
    assert stop_early.choose(plan, "loss", False, 2) == [names[1], names[3]]
    assert stop_early.choose(plan, "loss", False, 3) == [names[1], names[2], names[3]]
    assert stop_early.choose(plan, "loss", True, 1) == [names[0]]
    assert stop_early.choose(plan, "loss", False, 5) == names[:4]
    assert stop_early.choose(plan, "loss", False, 0) == []
