"""A resumed mixed_float16 run goes on with the dynamic loss scale it had saved, not 2**15
(or whatever the start is) again: the scale is part of the run's checkpoints."""

import csv

import pytest
import tensorflow as tf

from kerasbert import run as run_lib
from kerasbert.config import RunConfig
from kerasbert.training import precision

# 32 examples / batch 8 = 4 steps an epoch, 2 epochs, a checkpoint after every step.
RUN = {"task": "sst2", "init_checkpoint": "random", "model_size": "2/32/2",
       "max_seq_length": 32, "train_batch_size": 8, "eval_batch_size": 16,
       "max_train_examples": 32, "max_eval_examples": 16, "num_train_epochs": 2.0,
       "learning_rate": 1e-3, "seed": 3, "save_checkpoints_steps": 1,
       "mixed_precision": "mixed_float16"}
# Starting at 2**22, this model's float16 gradients overflow for the first 3 steps (the
# scale halves each time, see precision.DynamicLossScale), then fit: a resume that started
# from 2**22 again would skip steps the uninterrupted run trains on.
START = 2.0**22


@pytest.fixture(autouse=True)
def high_start(monkeypatch):
    monkeypatch.setattr(precision.DynamicLossScale.__init__, "__defaults__", (START, 2000))
    yield
    precision.set_policy("none")  # a killed run leaves its policy behind


def _config(out):
    # keep_checkpoints: the test reads the finished run's last checkpoint for its scale
    return RunConfig(**RUN, output_dir=str(out), keep_checkpoints=True)


def _saved_scale(out):
    prefix = tf.train.latest_checkpoint(str(out / "checkpoints"))
    return float(tf.train.load_checkpoint(prefix).get_tensor(
        "loss_scale_finetune/scale/.ATTRIBUTES/VARIABLE_VALUE"))


def _losses(out):
    with open(out / "history.csv") as f:
        return [float(row["train_loss"]) for row in csv.DictReader(f)]


def test_a_resumed_float16_run_continues_with_the_saved_loss_scale(tmp_path, interrupt_at):
    straight = tmp_path / "straight"
    metrics = run_lib.execute(_config(straight))
    final_scale = _saved_scale(straight)
    assert final_scale < START / 4  # it did overflow and shrink

    out = tmp_path / "run"
    disarm = interrupt_at("train_step", 3)  # stands in for a kill at step 3
    with pytest.raises(KeyboardInterrupt):
        run_lib.execute(_config(out))
    disarm()
    assert _saved_scale(out) == START / 4  # the step-2 checkpoint: two overflows, two halvings

    resumed = run_lib.execute(_config(out))
    assert resumed == pytest.approx(metrics, abs=1e-6)
    assert _losses(out) == pytest.approx(_losses(straight), abs=1e-6)
    assert _saved_scale(out) == final_scale
