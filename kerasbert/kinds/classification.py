"""Sentence and sentence-pair classification and regression (GLUE), and their serving."""

import numpy as np
import tensorflow as tf

from kerasbert.data.tokenization import pack_inputs
from kerasbert.kinds.base import Serving, TaskKind


def sentence_inputs(task):
    return {"text_a": [None], **({"text_b": [None]} if task.is_sentence_pair() else {})}


def encode_sentences(tokenizer, inputs, max_seq_length):
    """[CLS] A [SEP] (B [SEP]) for each raw text (pair), as [batch, max_seq_length]."""
    ids_a = tokenizer.tokenize_ids(inputs["text_a"])
    ids_b = None
    if "text_b" in inputs:
        tf.debugging.assert_equal(tf.size(inputs["text_a"]), tf.size(inputs["text_b"]),
                                  message="text_a and text_b need the same number of texts")
        ids_b = tokenizer.tokenize_ids(inputs["text_b"])
    return pack_inputs(tokenizer, ids_a, ids_b, max_seq_length)


def _label_outputs(task, logits):
    logits = tf.cast(logits, tf.float32)
    best = tf.argmax(logits, axis=-1, output_type=tf.int32)
    return {"probabilities": tf.nn.softmax(logits, axis=-1),
            "label": tf.gather(tf.constant(list(task.label_list), tf.string), best)}


def _score_outputs(task, outputs):
    return {"score": tf.cast(outputs[:, 0], tf.float32)}


class ClassificationKind(TaskKind):
    """Logits [B, K]; labels int32 [B]; −log softmax of the gold class."""

    name = "classification"
    description = "one label per text or pair (logits [B, K], labels int32 [B])"
    has_accuracy = True
    serving = Serving(sentence_inputs, _label_outputs, encode=encode_sentences)

    def decode(self, outputs):
        """Class ids: the argmax over the logits (the first on ties)."""
        return np.asarray(outputs).argmax(axis=-1)

    def constant_outputs(self, features, num_outputs):
        """Each class predicted for every row (the majority class's is among them)."""
        rows = len(features.inputs["token_ids"])
        return [np.eye(num_outputs, dtype=np.float32)[np.full(rows, c)]
                for c in range(num_outputs)]

    def per_example_loss(self, labels, outputs):
        return tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.cast(labels, tf.int32), logits=tf.cast(outputs, tf.float32))

    def correct_count(self, labels, outputs):
        predicted = tf.argmax(outputs, axis=-1, output_type=tf.int32)
        return tf.reduce_sum(tf.cast(tf.equal(predicted, tf.cast(labels, tf.int32)),
                                     tf.float32))


class RegressionKind(TaskKind):
    """Predictions [B, 1]; labels float32 [B]; squared error."""

    name = "regression"
    description = "one score per text or pair (outputs [B, 1], labels float32 [B])"
    serving = Serving(sentence_inputs, _score_outputs, encode=encode_sentences)

    def decode(self, outputs):
        """The predicted values [rows]."""
        return np.asarray(outputs)[:, 0]

    def constant_outputs(self, features, num_outputs):
        """One constant value for every row (its correlation with the labels is undefined,
        counted as 0 by `Task.constant_baseline`; an error metric gets the value 0's)."""
        return [np.zeros([len(features.inputs["token_ids"]), 1], np.float32)]

    def per_example_loss(self, labels, outputs):
        return tf.square(tf.cast(outputs[:, 0], tf.float32) - tf.cast(labels, tf.float32))
