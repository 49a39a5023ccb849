"""TF ops the tasks' serving graphs share (kerasbert/tasks/*/serving.py)."""

import tensorflow as tf


def first_max_index(values, axis=0):
    """Index of the first maximum along `axis` (tf.argmax does not promise which on ties;
    the Python decoders take the first)."""
    top = tf.reduce_max(values, axis=axis, keepdims=True)
    index = tf.range(tf.shape(values, out_type=tf.int64)[axis], dtype=tf.int64)
    shape = [1] * values.shape.rank
    shape[axis] = -1
    index = tf.reshape(index, shape) + tf.zeros_like(values, tf.int64)
    big = tf.shape(values, out_type=tf.int64)[axis]
    return tf.reduce_min(tf.where(values == top, index, big), axis=axis)
