"""Sequence labelling (CoNLL-2003 NER): one tag per word, on its first word piece."""

import numpy as np
import tensorflow as tf

from kerasbert.kinds.base import TaskKind, task_serving


def _token_tags(task, logits):
    logits = tf.cast(logits, tf.float32)
    best = tf.argmax(logits, axis=-1, output_type=tf.int32)
    return {"probabilities": tf.nn.softmax(logits, axis=-1),
            "tag": tf.gather(tf.constant(list(task.label_list), tf.string), best)}


class TaggingKind(TaskKind):
    """Outputs [B, S, K]; labels int32 [B, S], −1 where no tag is predicted (every word
    piece but a word's first, [CLS], [SEP], padding). A tagging task serves its own
    answer (word alignment, windows: `Task.serving_answer`)."""

    name = "tagging"
    description = "a tag per word (logits [B, S, K], labels int32 [B, S], -1 ignored)"
    labels_per_token = True
    row_metrics = False  # a sentence's F1 needs all its pieces
    serving = task_serving(lambda task: {"text": [None]}, _token_tags)

    def decode(self, outputs):
        """Tag ids per position [rows, seq]: the argmax at each (a task maps them back to
        its words, e.g. at each word's first piece)."""
        return np.asarray(outputs).argmax(axis=-1)

    def constant_outputs(self, features, num_outputs):
        """One tag at every position, for each tag (the outside tag's: no entity at all)."""
        rows, length = features.inputs["token_ids"].shape[:2]
        return [np.broadcast_to(np.eye(num_outputs, dtype=np.float32)[c],
                                (rows, length, num_outputs)) for c in range(num_outputs)]

    def per_example_loss(self, labels, outputs):
        # Only labelled positions count; the mean is over them, so a sentence of many
        # sub-tokens does not outweigh a short one per label.
        labels = tf.cast(labels, tf.int32)
        keep = tf.cast(labels >= 0, tf.float32)
        token_loss = tf.nn.sparse_softmax_cross_entropy_with_logits(
            tf.maximum(labels, 0), tf.cast(outputs, tf.float32)) * keep
        return tf.reduce_sum(token_loss, -1) / tf.maximum(tf.reduce_sum(keep, -1), 1.0)
