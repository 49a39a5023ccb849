"""Per-example losses for each task kind (see kerasbert/tasks/base.py for the shapes)."""

import tensorflow as tf

from kerasbert.tasks import base


def per_example_loss(kind, labels, outputs):
    """−log softmax of the gold class (classification, choices) or squared error."""
    if kind in (base.CLASSIFICATION, base.MULTIPLE_CHOICE):
        return tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.cast(labels, tf.int32), logits=tf.cast(outputs, tf.float32))
    if kind == base.REGRESSION:
        return tf.square(tf.cast(outputs[:, 0], tf.float32) - tf.cast(labels, tf.float32))
    if kind == base.SPAN:
        # The paper's loss: the mean of the start and end log-likelihoods.
        logits = tf.cast(outputs, tf.float32)
        labels = tf.cast(labels, tf.int32)
        start = tf.nn.sparse_softmax_cross_entropy_with_logits(labels[:, 0], logits[:, :, 0])
        end = tf.nn.sparse_softmax_cross_entropy_with_logits(labels[:, 1], logits[:, :, 1])
        return (start + end) / 2.0
    if kind == base.TAGGING:
        # Only labelled positions (each word's first sub-token) count; the mean is over
        # them, so a sentence of many sub-tokens does not outweigh a short one per label.
        labels = tf.cast(labels, tf.int32)
        keep = tf.cast(labels >= 0, tf.float32)
        token_loss = tf.nn.sparse_softmax_cross_entropy_with_logits(
            tf.maximum(labels, 0), tf.cast(outputs, tf.float32)) * keep
        return tf.reduce_sum(token_loss, -1) / tf.maximum(tf.reduce_sum(keep, -1), 1.0)
    raise ValueError(f"no loss for task kind {kind!r}")



def has_accuracy(kind):
    return kind in (base.CLASSIFICATION, base.MULTIPLE_CHOICE)


def correct_count(kind, labels, outputs):
    """How many examples of the batch the outputs classify right (0 for other kinds)."""
    if not has_accuracy(kind):
        return tf.constant(0.0)
    predicted = tf.argmax(outputs, axis=-1, output_type=tf.int32)
    return tf.reduce_sum(tf.cast(tf.equal(predicted, tf.cast(labels, tf.int32)), tf.float32))
