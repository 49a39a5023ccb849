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
    assert json.loads((out / run_folder.STOP_POINT).read_text())["step"] == step

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
