"""Dropout under XLA on the CPU draws its masks with ThreeFry (kerasbert/training/xla_dropout.py)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasbert.training import xla_dropout
from kerasbert.training.loop import Trainer


def _keras_dropout(x, rate, seed):
    return keras.random.dropout(x, rate, seed=seed)  # what keras.layers.Dropout calls


def test_inside_the_context_masks_are_threefry_draws_of_the_same_seed():
    x = tf.ones([64, 512])

    @tf.function(jit_compile=True)
    def threefry(x):
        with xla_dropout.threefry_dropout():
            return _keras_dropout(x, 0.25, seed=7)

    @tf.function(jit_compile=True)
    def reference(x):  # the same seed as Keras draws it from the int 7, ThreeFry by hand
        from keras.src.backend.tensorflow.random import _cast_seed
        from keras.src.random.seed_generator import draw_seed

        return tf.nn.experimental.stateless_dropout(x, 0.25, seed=_cast_seed(draw_seed(7)),
                                                    rng_alg="threefry")

    out = threefry(x).numpy()
    np.testing.assert_array_equal(out, reference(x).numpy())
    kept = out != 0
    assert abs(1 - kept.mean() - 0.25) < 0.01  # the rate holds
    np.testing.assert_allclose(out[kept], 1 / 0.75, rtol=1e-6)  # inverted-dropout scaling


def test_outside_the_context_keras_runs_unchanged():
    x = tf.ones([16, 64])
    ours = _keras_dropout(x, 0.5, seed=3).numpy()  # eager, default algorithm
    theirs = xla_dropout._keras_dropout(x, 0.5, seed=3).numpy()
    np.testing.assert_array_equal(ours, theirs)
    with xla_dropout.threefry_dropout(enabled=False):
        np.testing.assert_array_equal(_keras_dropout(x, 0.5, seed=3).numpy(), theirs)
    assert not getattr(xla_dropout._state, "threefry", False)  # the context restores


@pytest.mark.large  # one XLA compile of a tiny model
def test_the_xla_trainer_traces_dropout_with_threefry_on_cpu(monkeypatch):
    from kerasbert import distribute, plugins
    from kerasbert.data import pipeline
    from kerasbert.model import builder, encoders
    from kerasbert.training import optimization

    algorithms = []
    original = tf.nn.experimental.stateless_dropout

    def spy(*args, **kwargs):
        algorithms.append(kwargs.get("rng_alg"))
        return original(*args, **kwargs)

    monkeypatch.setattr(tf.nn.experimental, "stateless_dropout", spy)
    strategy = distribute.make_strategy("one_device")
    registry = plugins.registry()
    task, head = registry.task("sst2"), registry.head("cls_linear")
    with strategy.scope():
        encoder = encoders.random_encoder("2/32/2", max_position=64, dropout=0.1, seed=0)
        model = builder.build_task_model(task, head, encoder.backbone, seed=0)
        optimizer = optimization.create_optimizer(model.trainable_variables, 1e-3, 4,
                                                  warmup_steps=0)
    trainer = Trainer(model, task.kind, strategy, optimizer, jit_compile=True)
    tokens = np.random.default_rng(0).integers(1000, 2000, [8, 16])
    inputs = {"token_ids": tokens, "segment_ids": np.zeros_like(tokens),
              "padding_mask": np.ones_like(tokens)}
    losses = []
    trainer.train_epoch(pipeline.make_dataset(inputs, np.zeros(8, np.int32), 4), 2,
                        on_step=lambda step, loss: losses.append(loss), show_progress=False)
    assert np.all(np.isfinite(losses)) and len(losses) == 2
    # embeddings + per layer (attention probabilities, attention output, feed-forward) + head
    assert len(algorithms) >= 7 and set(algorithms) == {"threefry"}
