"""Extractive question answering (SQuAD): start and end logits over the window."""

import numpy as np
import tensorflow as tf

from kerasbert.kinds.base import TaskKind, task_serving


def _logits(task, logits):
    logits = tf.cast(logits, tf.float32)
    return {"start_logits": logits[:, :, 0], "end_logits": logits[:, :, 1]}


class SpanKind(TaskKind):
    """Outputs [B, S, 2] start/end logits; labels int32 [B, 2] (0, 0: no answer in the
    window); the paper's loss, the mean of the start and end log-likelihoods. A span task
    serves its own answer (windows, n-best spans: `Task.serving_answer`)."""

    name = "span"
    description = "an answer span in the passage (logits [B, S, 2], labels int32 [B, 2])"
    row_metrics = False  # a question's answer needs all its windows
    serving = task_serving(lambda task: {"question": [None], "context": [None]}, _logits)

    def decode(self, outputs):
        """(start, end) positions [rows, 2] of each row, in the labels' layout: the best
        start and the best end, each on its own (a task's decoding pairs them properly,
        over its windows, e.g. SQuAD's n-best spans)."""
        return np.asarray(outputs).argmax(axis=1)

    def per_example_loss(self, labels, outputs):
        logits = tf.cast(outputs, tf.float32)
        labels = tf.cast(labels, tf.int32)
        start = tf.nn.sparse_softmax_cross_entropy_with_logits(labels[:, 0], logits[:, :, 0])
        end = tf.nn.sparse_softmax_cross_entropy_with_logits(labels[:, 1], logits[:, :, 1])
        return (start + end) / 2.0
