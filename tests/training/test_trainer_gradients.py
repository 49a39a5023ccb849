"""The Trainer's gradients: an embedding's gradient is summed before it is clipped."""

import keras
import keras_hub
import numpy as np
import pytest
import tensorflow as tf

from kerasbert.heads.classifier import ClsClassifier
from kerasbert.model.task_model import TaskModel
from kerasbert.training.loop import Trainer, dense_gradients


def test_dense_gradients_sums_the_rows_of_repeated_ids():
    table = tf.Variable(np.arange(12, dtype=np.float32).reshape(4, 3))
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.gather(table, [1, 1, 3, 1]) * [[1.0], [2.0], [3.0], [4.0]])
    (sparse,) = tape.gradient(loss, [table])
    assert isinstance(sparse, tf.IndexedSlices)
    (dense,) = dense_gradients([sparse])
    # Row 1 is read three times, with weights 1 + 2 + 4; row 3 once, with 3.
    expected = np.zeros([4, 3], np.float32)
    expected[1], expected[3] = 7.0, 3.0
    np.testing.assert_array_equal(dense.numpy(), expected)
    true_norm = np.sqrt(3 * 49 + 3 * 9)
    assert float(tf.linalg.global_norm([dense])) == pytest.approx(true_norm, rel=1e-6)
    # What global_norm makes of the unsummed rows: √(3·(1 + 4 + 9 + 16)), not the norm.
    assert float(tf.linalg.global_norm([sparse])) == pytest.approx(np.sqrt(90), rel=1e-6)


def test_a_training_step_clips_the_summed_embedding_gradient():
    """One step of plain SGD (lr 1, so the step is minus the clipped gradient) with a clip
    norm small enough to clip: every weight moves by −g·c/‖g‖, ‖g‖ over the dense
    gradients, token and segment embeddings (every row of segment 0 is one id) included."""
    keras.utils.set_random_seed(3)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=20, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
        max_sequence_length=8, dropout=0.0)
    model = TaskModel(backbone, ClsClassifier(2, dropout=0.0))
    inputs = {"token_ids": tf.constant([[2, 5, 5, 3, 0], [2, 7, 5, 3, 3]]),
              "segment_ids": tf.zeros([2, 5], tf.int32),
              "padding_mask": tf.constant([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]])}
    labels = tf.constant([0, 1])
    model(inputs)
    variables = model.trainable_variables
    with tf.GradientTape() as tape:
        per_example = keras.losses.sparse_categorical_crossentropy(
            labels, model(inputs, training=False), from_logits=True)
        loss = tf.reduce_mean(per_example)
    grads = [tf.convert_to_tensor(g) for g in tape.gradient(loss, variables)]
    norm = np.sqrt(sum(float(tf.reduce_sum(g * g)) for g in grads))
    clip = norm / 10
    before = [v.numpy().copy() for v in variables]
    trainer = Trainer(model, "classification", tf.distribute.get_strategy(),
                      keras.optimizers.SGD(learning_rate=1.0), clip_norm=clip)
    trainer._train_step(inputs, labels)
    for v, w0, g in zip(variables, before, grads):
        np.testing.assert_allclose(v.numpy() - w0, -g.numpy() * clip / norm,
                                   rtol=1e-4, atol=1e-7, err_msg=v.path)


def test_a_subclass_loss_gets_summed_gradients_too():
    """Pre-training's Trainer brings its own _loss_and_gradients: what it returns is summed
    by the shared step all the same."""
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=20, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
        max_sequence_length=8)
    model = TaskModel(backbone, ClsClassifier(2))
    inputs = {"token_ids": tf.constant([[2, 5, 5, 3]]), "segment_ids": tf.zeros([1, 4], tf.int32),
              "padding_mask": tf.ones([1, 4], tf.int32)}
    model(inputs)

    class OwnLoss(Trainer):
        def _loss_and_gradients(self, inputs, labels, variables, scale, global_batch_size):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(self.model(inputs)) * 0.0 + tf.reduce_sum(
                    tf.gather(backbone.token_embedding.embeddings, [5, 5, 3]))
            return loss, tape.gradient(loss, variables), tf.constant(0.0)

    trainer = OwnLoss(model, "classification", tf.distribute.get_strategy(), None)
    _, _, _, grads = trainer._replica_gradients(inputs, tf.constant([0]))
    table = dict(zip([v.path for v in model.trainable_variables], grads))
    grad = table["token_embedding/embeddings"]
    assert not isinstance(grad, tf.IndexedSlices)
    np.testing.assert_array_equal(grad.numpy()[[5, 3]], [[2.0] * 8, [1.0] * 8])
