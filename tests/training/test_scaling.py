"""Mixed precision, XLA and gradient accumulation in the Trainer, on a tiny random model.

Each test trains the same 2-layer, hidden-32 model (dropout 0, so runs are deterministic)
on the same synthetic batches (tests/helpers/tiny_training.py) and compares losses or final
weights.
"""

import numpy as np
import pytest
import tensorflow as tf

from kerasbert import distribute
from kerasbert.config import RunConfig
from kerasbert.errors import InputError
from kerasbert.training import precision
from kerasbert.training.loop import pad_to_multiple
from tests.helpers.tiny_training import BATCH, STEPS, synthetic_data, train


@pytest.fixture(scope="module")
def reference():
    return train()


def _assert_weights_close(a, b, atol):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, atol=atol, rtol=0)


def test_accumulating_micro_batches_makes_the_same_steps_as_whole_batches(reference):
    losses, weights = train(accumulation_steps=4)  # 4 micro-batches of 2
    np.testing.assert_allclose(losses, reference[0], rtol=1e-5)
    _assert_weights_close(weights, reference[1], atol=1e-5)
    # A batch that does not split evenly (8 = 3 + 3 + 2) still gives the whole-batch mean.
    losses, weights = train(accumulation_steps=3)
    np.testing.assert_allclose(losses, reference[0], rtol=1e-5)
    _assert_weights_close(weights, reference[1], atol=1e-5)


def test_xla_batches_are_padded_to_multiples_of_32_with_masked_positions():
    inputs = {"token_ids": tf.ones([2, 33], tf.int32), "padding_mask": tf.ones([2, 33], tf.int32)}
    padded, labels = pad_to_multiple(inputs, tf.zeros([2, 33], tf.int32), 32,
                                     labels_per_token=True)
    assert padded["token_ids"].shape == (2, 64) and labels.shape == (2, 64)
    assert int(tf.reduce_sum(padded["padding_mask"])) == 66  # the new columns are masked
    assert int(tf.reduce_min(labels[:, 33:])) == -1 == int(tf.reduce_max(labels[:, 33:]))
    same, _ = pad_to_multiple({"token_ids": tf.ones([2, 3, 64], tf.int32)}, tf.zeros([2]), 32)
    assert same["token_ids"].shape == (2, 3, 64)
    # Never past the encoder's positions: 33 → 40 when the table has 40 rows.
    capped, _ = pad_to_multiple(inputs, tf.zeros([2]), 32, max_length=40)
    assert capped["token_ids"].shape == (2, 40)
    # Only the named sequence inputs are padded (pre-training's masked positions are not),
    # to the first one's length.
    pretraining = {"input_ids": tf.ones([2, 33], tf.int32), "input_mask": tf.ones([2, 33]),
                   "masked_lm_positions": tf.ones([2, 5], tf.int32)}
    padded, _ = pad_to_multiple(pretraining, tf.zeros([2]), 32, keys=("input_ids", "input_mask"))
    assert padded["input_mask"].shape == (2, 64) and padded["masked_lm_positions"].shape == (2, 5)


@pytest.mark.large  # XLA compiles for ~20 s on CPU
def test_xla_step_matches_the_plain_step(reference):
    losses, weights = train(jit_compile=True)
    np.testing.assert_allclose(losses, reference[0], rtol=1e-4)
    _assert_weights_close(weights, reference[1], atol=1e-4)


@pytest.mark.large
@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_trains_with_finite_falling_loss(policy, reference):
    losses, weights = train(policy=policy, steps=12, learning_rate=3e-3)
    assert np.all(np.isfinite(losses))
    assert losses[-3:].mean() < losses[:3].mean()
    # Variables stay float32; 16-bit compute only perturbs the first step's loss slightly.
    assert all(np.all(np.isfinite(w)) for w in weights)
    assert losses[0] == pytest.approx(reference[0][0], rel=0.05)


def test_float16_loss_scale_skips_overflowing_steps_and_shrinks():
    with distribute.make_strategy("one_device").scope():
        scale = precision.DynamicLossScale(initial_scale=8.0, growth_steps=2)
    scale.update(tf.constant(False))
    assert float(scale.scale.numpy()) == 4.0
    scale.update(tf.constant(True))
    assert float(scale.scale.numpy()) == 4.0
    scale.update(tf.constant(True))  # two finite steps in a row: grow
    assert float(scale.scale.numpy()) == 8.0 and int(scale.finite_steps.numpy()) == 0
    inf = tf.constant([1.0, np.inf])
    assert float(precision.all_finite([tf.ones(2), None, inf])) == 0.0
    assert float(precision.all_finite([tf.ones(2), None])) == 1.0


def test_bad_scaling_flags_are_input_errors(tmp_path):
    base = {"task": "sst2", "output_dir": str(tmp_path)}
    with pytest.raises(InputError, match="--gradient_accumulation_steps=0"):
        RunConfig(**base, gradient_accumulation_steps=0)
    with pytest.raises(InputError, match="--gradient_accumulation_steps=16: more micro-batches"):
        RunConfig(**base, train_batch_size=8, gradient_accumulation_steps=16)
    with pytest.raises(InputError, match="--mixed_precision=float8"):
        RunConfig(**base, mixed_precision="float8")
    with pytest.raises(InputError, match="needs --tpu"):
        RunConfig(**base, distribution_strategy="tpu")


def test_a_run_with_bfloat16_and_accumulation_end_to_end(tmp_path, capsys):
    import json

    import keras

    from kerasbert import run as run_lib

    metrics = run_lib.execute(RunConfig(
        task="sst2", init_checkpoint="random", model_size="2/32/2", max_seq_length=32,
        train_batch_size=8, max_train_examples=16, max_eval_examples=8, num_train_epochs=1.0,
        mixed_precision="mixed_bfloat16", gradient_accumulation_steps=2,
        output_dir=str(tmp_path / "run")))
    assert 0.0 <= metrics["accuracy"] <= 1.0
    saved = json.loads((tmp_path / "run" / "run_config.json").read_text())
    assert saved["mixed_precision"] == "mixed_bfloat16"
    assert saved["gradient_accumulation_steps"] == 2
    assert ("global batch 8 = 1 replica(s) × 8, each as 2 micro-batches of 4; precision "
            "mixed_bfloat16, XLA off") in capsys.readouterr().out
    assert keras.mixed_precision.global_policy().name == "float32"  # nothing leaks


def test_batches_of_different_lengths_share_one_traced_step(monkeypatch):
    from kerasbert.training import loop

    traces = []
    step = loop.Trainer._distributed_step

    def counted(self, *args):
        traces.append(1)  # runs only while tracing
        return step(self, *args)

    monkeypatch.setattr(loop.Trainer, "_distributed_step", counted)
    inputs, labels = synthetic_data()
    for i in range(STEPS):  # batch i is 8 + 2i tokens long
        rows = slice(i * BATCH, (i + 1) * BATCH)
        inputs["padding_mask"][rows, 8 + 2 * i:] = 0
        inputs["token_ids"][rows, 8 + 2 * i:] = 0
    losses, _ = train(data=(inputs, labels))
    assert len(losses) == STEPS and len(traces) == 1


def test_one_replica_trains_from_the_dataset_itself(monkeypatch, reference):
    """OneDeviceStrategy's distributed dataset (a MultiDeviceIterator) waited at each epoch's
    end for tf.data's sleeping autotuning thread (28–98 s per SST-2 epoch, 2026-12-02); one
    replica iterates the dataset itself and makes the same steps."""
    strategy = distribute.make_strategy("one_device")

    def refuse(*_, **__):
        raise AssertionError("the dataset of one replica was distributed")

    monkeypatch.setattr(strategy, "experimental_distribute_dataset", refuse)
    losses, weights = train(strategy=strategy)
    np.testing.assert_array_equal(losses, reference[0])
    _assert_weights_close(weights, reference[1], atol=0)


def test_a_trainer_on_the_cpu_turns_tensorflows_graph_optimizer_off(reference):
    """Grappler spent 0.6–0.8 s of MiniLM's first step on a CPU and made no step faster
    (loop.without_graph_optimizer); the losses stay those of the reference run."""
    assert tf.config.optimizer.get_experimental_options().get("disable_meta_optimizer")
    losses, _ = train()
    np.testing.assert_allclose(losses, reference[0], rtol=1e-6)
