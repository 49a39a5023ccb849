"""Resuming after a crash: mid-epoch checkpoints, torn checkpoints, SIGKILLed subprocesses,
NaN losses, and what --output_dir may hold."""

import csv
import glob
import json
import os
import pathlib
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasbert import faults, run_folder
from kerasbert import run as run_lib
from kerasbert.config import RunConfig
from kerasbert.errors import InputError, TrainingError
from kerasbert.training import run_state

# 32 examples / batch 8 = 4 steps an epoch, 2 epochs, a checkpoint after every step.
RUN = {"task": "sst2", "init_checkpoint": "random", "model_size": "2/32/2",
       "max_seq_length": 32, "train_batch_size": 8, "eval_batch_size": 16,
       "max_train_examples": 32, "max_eval_examples": 16, "num_train_epochs": 2.0,
       "learning_rate": 1e-3, "seed": 3, "save_checkpoints_steps": 1, "grad_norm_every": 2}


ROOT = pathlib.Path(__file__).resolve().parents[2]  # this checkout, for the subprocesses


def _config(out, **overrides):
    return RunConfig(**{**RUN, "output_dir": str(out), **overrides})


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """An uninterrupted run: (its metrics, its output folder)."""
    out = tmp_path_factory.mktemp("reference") / "run"
    return run_lib.execute(_config(out)), out


def _rows(out):
    with open(out / "history.csv") as f:
        return list(csv.DictReader(f))


def _loss_steps(out):
    steps = []
    for path in glob.glob(str(out / "tensorboard" / "*tfevents*")):
        for record in tf.data.TFRecordDataset(path):
            event = tf.compat.v1.Event.FromString(record.numpy())
            steps += [event.step for v in event.summary.value if v.tag == "train/loss"]
    return sorted(steps)


def _crash_at(monkeypatch, event, nth):
    """In-process stand-in for KERASBERT_TEST_KILL_AT: raise where the process would die."""
    reached = []

    def crash_point(name, before_kill=None):
        if name == event:
            reached.append(name)
            if len(reached) == nth:
                if before_kill is not None:
                    before_kill()
                raise KeyboardInterrupt

    monkeypatch.setattr(faults, "crash_point", crash_point)


def test_mid_epoch_kill_and_torn_checkpoint_resume_to_the_same_end(
        tmp_path, monkeypatch, reference, capsys):
    metrics, straight = reference
    out = tmp_path / "run"
    _crash_at(monkeypatch, "train_step", 7)  # step 7 trained and logged, not yet checkpointed
    with pytest.raises(KeyboardInterrupt):
        run_lib.execute(_config(out))
    monkeypatch.undo()
    state_dir = out / "checkpoints"
    assert len(glob.glob(str(state_dir / "ckpt-*.index"))) == run_state.MAX_TO_KEEP
    newest = tf.train.latest_checkpoint(str(state_dir))
    run_state.tear(newest)  # the step-6 checkpoint, as a crash while writing leaves it
    capsys.readouterr()

    resumed = run_lib.execute(_config(out))
    log = capsys.readouterr().out
    assert f"checkpoint {newest} is damaged" in log
    assert "after epoch 1, step 1 into the next" in log  # fell back to the step-5 checkpoint
    assert resumed == pytest.approx(metrics, abs=1e-6)
    rows, reference_rows = _rows(out), _rows(straight)
    assert [(r["epoch"], r["step"], r["learning_rate"]) for r in rows] == [
        (r["epoch"], r["step"], r["learning_rate"]) for r in reference_rows]
    for got, want in zip(rows, reference_rows):  # the epoch's loss sums over both processes
        assert float(got["train_loss"]) == pytest.approx(float(want["train_loss"]), abs=1e-5)
        assert float(got["train_accuracy"]) == pytest.approx(float(want["train_accuracy"]))
    # Steps 6 and 7 were logged by the killed run, then again after the resume: kept once.
    assert _loss_steps(out) == list(range(1, 9)) == _loss_steps(straight)
    # The gradient norms: the epoch means sum over both processes, and the per-step file
    # holds each recorded step once (step 6 was written by the killed run, then dropped).
    norms = [k for k in reference_rows[0] if k.startswith("grad_norm")]
    assert len(norms) == 12  # 5 groups and total, mean and last step
    for got, want in zip(rows, reference_rows):
        for k in norms:
            assert float(got[k]) == pytest.approx(float(want[k]), rel=1e-5), k
    with open(out / "grad_norms.csv") as f, open(straight / "grad_norms.csv") as g:
        resumed_steps, straight_steps = list(csv.DictReader(f)), list(csv.DictReader(g))
    assert [r["step"] for r in resumed_steps] == ["2", "4", "6", "8"]
    for got, want in zip(resumed_steps, straight_steps):
        assert got.keys() == want.keys()
        for k in got:
            if k.startswith("grad_norm"):
                assert float(got[k]) == pytest.approx(float(want[k]), rel=1e-5), k


def test_a_grouped_by_length_run_resumes_to_the_same_end(tmp_path, monkeypatch, reference):
    """--group_by_length reorders each epoch's rows by a seeded rule, so a kill mid-epoch
    resumes on the same batches (and the flag does change training)."""
    grouped = {"group_by_length": True, "length_group_batches": 2}
    run_lib.execute(_config(tmp_path / "straight", **grouped))
    _crash_at(monkeypatch, "train_step", 6)  # epoch 2, step 2 trained, not checkpointed
    with pytest.raises(KeyboardInterrupt):
        run_lib.execute(_config(tmp_path / "run", **grouped))
    monkeypatch.undo()
    run_lib.execute(_config(tmp_path / "run", **grouped))

    def losses(out):
        return [float(r["train_loss"]) for r in _rows(out)]
    assert losses(tmp_path / "run") == pytest.approx(losses(tmp_path / "straight"), abs=1e-5)
    assert losses(tmp_path / "straight") != pytest.approx(losses(reference[1]), abs=1e-4)


def _dense_state(tmp_path, units=1):
    """The run state of a one-layer model (2 → units) with a built Adam, in tmp_path."""
    model = keras.Sequential([keras.Input([2]), keras.layers.Dense(units)])
    optimizer = keras.optimizers.Adam()
    optimizer.build(model.trainable_variables)
    return run_state.RunState(str(tmp_path), model, {"finetune": optimizer})


def test_restore_with_no_whole_checkpoint_starts_from_the_beginning(tmp_path):
    state = _dense_state(tmp_path)
    state.save(0, 1)
    state.save(0, 2)
    for prefix in state.candidates():
        run_state.tear(prefix)
    messages = []
    fresh = run_state.RunState(str(tmp_path), state.model,
                                   {"finetune": state.optimizers[0]})
    assert fresh.restore(messages.append) == run_state.Position()
    assert len(messages) == 2 and all("is damaged" in m for m in messages)
    assert fresh.restored_from is None


def test_nan_weights_are_never_saved(tmp_path):
    state = _dense_state(tmp_path)
    state.save(0, 1)
    good = state.manager.latest_checkpoint
    state.model.layers[0].kernel.assign([[np.nan], [1.0]])
    with pytest.raises(run_state.NonFiniteWeightsError, match="by step 0 .*kernel"):
        state.save(0, 2)
    assert state.candidates() == [good]


def test_nan_loss_names_the_step_and_keeps_the_last_good_checkpoint(tmp_path):
    out = tmp_path / "run"
    # A learning rate of 1e30 sends the weights to ~1e30 after step 1; step 2's LayerNorm
    # overflows and its loss is NaN.
    with pytest.raises(TrainingError, match=r"became nan at step 2 .*checkpoint .*ckpt-1 is kept"):
        run_lib.execute(_config(out, learning_rate=1e30, warmup_proportion=0.0))
    assert not (out / "metrics.json").exists() and not (out / "model.weights.h5").exists()
    kept = str(out / "checkpoints" / "ckpt-1")
    reader = tf.train.load_checkpoint(kept)
    tensors = [reader.get_tensor(name) for name, _ in tf.train.list_variables(kept)
               if name.split("/")[0] not in ("_CHECKPOINTABLE_OBJECT_GRAPH", "best")]
    floats = [t for t in tensors if t.dtype.kind == "f"]
    assert len(floats) > 40 and all(np.isfinite(t).all() for t in floats)


# --- A real process, killed with SIGKILL ------------------------------------------------

def _cli_args(out, **extra):
    flags = {**RUN, **extra, "output_dir": out}
    return [sys.executable, "-m", "kerasbert.main"] + [
        f"--{k}={v}" for k, v in flags.items() if k != "task"] + [f"--task={RUN['task']}"]


def _cli(args, kill_at=None):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop(faults.ENV, None)
    if kill_at:
        env[faults.ENV] = kill_at
    return subprocess.run(args, check=False, capture_output=True, text=True, timeout=600, env=env)


def _kill_and_resume(tmp_path, reference, kill_at, **extra):
    metrics, straight = reference
    out = tmp_path / "run"
    args = _cli_args(out, **extra)
    killed = _cli(args, kill_at)
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert not (out / "metrics.json").exists()
    resumed = _cli(args)  # the same command, started again
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "kerasbert: resuming at phase 1" in resumed.stdout
    assert json.loads((out / "metrics.json").read_text()) == pytest.approx(metrics, abs=1e-6)
    rows, reference_rows = _rows(out), _rows(straight)
    assert [r["step"] for r in rows] == [r["step"] for r in reference_rows]
    # The epochs' training losses depend on weights, optimizer state, data order and dropout
    # masks step by step: a much finer check than the dev accuracy of a tiny model.
    assert [float(r["train_loss"]) for r in rows] == pytest.approx(
        [float(r["train_loss"]) for r in reference_rows], abs=1e-5)
    assert _loss_steps(out) == list(range(1, 9))
    return out, resumed


def test_sigkill_mid_epoch_after_a_checkpoint(tmp_path, reference):
    _kill_and_resume(tmp_path, reference, "checkpoint:6")  # step 6: 2 steps into epoch 2


@pytest.mark.large
@pytest.mark.parametrize("kill_at", ["train_step:7", "checkpoint_torn:6", "evaluation:2",
                                     "checkpoint:8"])  # 8: the last epoch's, phase not closed
def test_sigkill_at_other_points(tmp_path, reference, kill_at):
    _kill_and_resume(tmp_path, reference, kill_at)


@pytest.mark.large
def test_sigkill_during_prediction_and_export_resumes_without_retraining(tmp_path, reference):
    exports = tmp_path / "exports"
    out, resumed = _kill_and_resume(tmp_path, reference, "export", do_predict=True,
                                    export_dir=exports)
    assert "training complete; finishing evaluation and outputs" in resumed.stdout
    assert "finetune epoch" not in resumed.stdout  # nothing trained again
    assert (out / "test_results.tsv").exists()
    assert sorted(os.listdir(exports)) == ["1"]
    out2 = tmp_path / "second"
    _cli(_cli_args(out2, do_predict=True), "prediction")
    resumed = _cli(_cli_args(out2, do_predict=True))
    assert resumed.returncode == 0 and "finetune epoch" not in resumed.stdout
    assert (out2 / "test_results.tsv").read_text() == (out / "test_results.tsv").read_text()
    # Killed after the export was renamed into place, before export.json: no second version.
    out3, exports3 = tmp_path / "third", tmp_path / "exports3"
    _cli(_cli_args(out3, export_dir=exports3), "exported")
    assert sorted(os.listdir(exports3)) == ["1"] and not (out3 / "export.json").exists()
    resumed = _cli(_cli_args(out3, export_dir=exports3))
    assert resumed.returncode == 0 and "SavedModel already exported" in resumed.stdout
    assert sorted(os.listdir(exports3)) == ["1"]


# --- What --output_dir may hold ------------------------------------------------------------

def test_output_dir_rules(tmp_path):
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="not empty and not a kerasbert run"):
        run_folder.prepare(_config(foreign))
    run_folder.prepare(_config(foreign, overwrite_output_dir=True))
    assert (foreign / "notes.txt").read_text() == "mine"  # never removes others' files

    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    _config(unfinished).save(str(unfinished / "run_config.json"))
    (unfinished / "checkpoints").mkdir()
    run_folder.prepare(_config(unfinished, do_predict=True))  # resumes
    assert (unfinished / "checkpoints").exists()
    with pytest.raises(InputError, match=r"unfinished run started with --learning_rate=0\.001 "
                                         r"\(now 0\.002\)"):
        run_folder.prepare(_config(unfinished, learning_rate=2e-3))
    run_folder.prepare(_config(unfinished, learning_rate=2e-3,
                                        overwrite_output_dir=True))
    assert os.listdir(unfinished) == []  # started over


def test_a_whole_checkpoint_of_another_model_is_an_error(tmp_path):
    _dense_state(tmp_path, units=1).save(0, 1)
    with pytest.raises(InputError, match=r"ckpt-1: does not match this run's model"):
        _dense_state(tmp_path, units=3).restore()


def test_a_checkpoint_that_cannot_be_written_keeps_the_last_good_one(tmp_path, monkeypatch):
    state = _dense_state(tmp_path)
    state.save(0, 1)

    def full_disk(*args, **kwargs):
        raise tf.errors.ResourceExhaustedError(None, None, "No space left on device")

    monkeypatch.setattr(state.manager, "save", full_disk)
    with pytest.raises(InputError, match=r"checkpoints: cannot write a checkpoint \(No space "
                                         r"left on device\); the last good one \(.*ckpt-1\)"):
        state.save(0, 2)
    assert [os.path.basename(p) for p in state.candidates()] == ["ckpt-1"]


def test_a_checkpoint_without_gradient_norm_sums_resumes_with_them(tmp_path):
    """A run checkpointed before gradient norms were recorded (run_config.json without
    --grad_norm_every: its default, on) resumes: the partial epoch's sums start at zero;
    one with them restores them."""
    state = _dense_state(tmp_path)
    state.save(0, 1, run_state.Position(step=3, loss_sum=1.5))
    with_norms = run_state.RunState(str(tmp_path), state.model,
                                    {"finetune": state.optimizers[0]}, grad_norm_size=3)
    position = with_norms.restore()
    assert (position.epoch, position.step, position.loss_sum) == (1, 3, 1.5)
    assert position.grad_norm_sum == (0.0, 0.0, 0.0)
    with_norms.save(0, 1, run_state.Position(step=4, grad_norm_sum=(1.0, 2.0, 4.0)))
    again = run_state.RunState(str(tmp_path), state.model,
                               {"finetune": state.optimizers[0]}, grad_norm_size=3)
    assert again.restore().grad_norm_sum == (1.0, 2.0, 4.0)
