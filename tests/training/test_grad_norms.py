"""Per-group gradient norms (--grad_norm_every): the Trainer's against a GradientTape of the
same model and batch grouped by hand, the groups' names, and a model without a keras-hub
encoder."""

import keras
import keras_hub
import numpy as np
import pytest
import tensorflow as tf

from kerasbert import plugins
from kerasbert.heads.classifier import ClsClassifier
from kerasbert.model import builder, encoders
from kerasbert.model.task_model import TaskModel
from kerasbert.training.loop import Trainer, gradient_groups
from tests.helpers.tiny_training import BATCH, synthetic_data


def _tiny_model():
    registry = plugins.registry()
    task, head = registry.task("sst2"), registry.head("cls_linear")
    encoder = encoders.random_encoder("2/32/2", max_position=64, dropout=0.0, seed=3)
    return builder.build_task_model(task, head, encoder.backbone, seed=3)


def _by_hand(path):
    """The group of a weight, written out for this 2-layer BertBackbone + cls_linear."""
    if "/cls_linear/" in path:
        return "head"
    for i in range(2):
        if path.startswith(f"transformer_layer_{i}/"):
            return f"layer_{i}"
    if path.startswith("pooled_dense/"):
        return "pooler"
    assert "embedding" in path, path
    return "embeddings"


def test_groups_are_named_from_the_weights_paths():
    names, group_of = gradient_groups(_tiny_model())
    assert names == ["embeddings", "layer_0", "layer_1", "pooler", "head"]
    assert all(group == _by_hand(path) for path, group in group_of.items())


def test_an_encoder_of_unknown_layout_falls_in_other():
    """Weights outside the known names (here a plain Keras encoder) go to "other", never
    an error."""
    class Plain(keras.layers.Layer):
        def __init__(self):
            super().__init__()
            self.dense = keras.layers.Dense(4, name="mixer")

        def call(self, x):
            return self.dense(x)

    model = keras.Sequential([keras.Input([3]), Plain(), keras.layers.Dense(2)])
    model.backbone = model.layers[0]
    names, group_of = gradient_groups(model)
    assert names == ["head", "other"]
    assert sorted(group_of.values()) == ["head", "head", "other", "other"]


@pytest.mark.parametrize("clip_norm", [0.01, 0.0])
def test_norms_equal_a_gradient_tape_grouped_by_hand(clip_norm):
    """One step's recorded norms are those of the mean loss's gradient over the batch
    (before clipping, before the update), per group and in total, to 1e-5."""
    keras.utils.set_random_seed(0)
    model = _tiny_model()
    inputs, labels = synthetic_data()
    inputs = {k: tf.constant(v[:BATCH]) for k, v in inputs.items()}
    labels = tf.constant(labels[:BATCH])
    with tf.GradientTape() as tape:
        logits = model(inputs, training=True)  # dropout 0: training is deterministic
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
    variables = model.trainable_variables
    grads = tape.gradient(loss, variables)
    squares = {}
    for v, g in zip(variables, grads):
        if g is not None:
            g = tf.convert_to_tensor(g)  # an embedding's IndexedSlices, summed
            group = _by_hand(v.path)
            squares[group] = squares.get(group, 0.0) + float(tf.reduce_sum(tf.square(
                tf.cast(g, tf.float64))))
    expected = {group: np.sqrt(total) for group, total in squares.items()}
    expected["total"] = np.sqrt(sum(squares.values()))

    trainer = Trainer(model, "classification", tf.distribute.get_strategy(),
                      keras.optimizers.SGD(learning_rate=0.1), clip_norm=clip_norm,
                      grad_norms=True)
    *_, norms = trainer._train_step(inputs, labels)
    names = trainer.grad_norm_groups[0] + ["total"]
    got = dict(zip(names, norms.numpy().tolist()))
    assert set(got) == set(expected)
    for group in names:
        assert got[group] == pytest.approx(expected[group], rel=1e-5, abs=1e-7), group
    assert expected["total"] > clip_norm  # so the clipped case clips


def test_frozen_encoder_groups_are_zero_and_the_norms_do_not_change_training():
    """With the encoder frozen only the head gets a gradient (the encoder's groups read 0);
    recording the norms leaves the step's result bit for bit as without them."""
    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=20, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
        max_sequence_length=8, dropout=0.0)
    inputs = {"token_ids": tf.constant([[2, 5, 5, 3], [2, 7, 5, 3]]),
              "segment_ids": tf.zeros([2, 4], tf.int32), "padding_mask": tf.ones([2, 4], tf.int32)}
    labels = tf.constant([0, 1])
    weights = []
    for record in (False, True):
        keras.utils.set_random_seed(0)
        model = TaskModel(keras_hub.models.BertBackbone.from_config(backbone.get_config()),
                          ClsClassifier(2, dropout=0.0))
        model(inputs)
        model.set_backbone_trainable(False)
        trainer = Trainer(model, "classification", tf.distribute.get_strategy(),
                          keras.optimizers.SGD(learning_rate=0.5), clip_norm=0.01,
                          grad_norms=record)
        out = trainer._train_step(inputs, labels)
        weights.append([w.numpy() for w in model.weights])
        if record:
            got = dict(zip(trainer.grad_norm_groups[0] + ["total"], out[-1].numpy()))
            assert got["head"] > 0 and got["total"] == pytest.approx(got["head"], rel=1e-6)
            assert got["embeddings"] == got["layer_0"] == got["pooler"] == 0.0
    for a, b in zip(*weights):
        np.testing.assert_array_equal(a, b)
