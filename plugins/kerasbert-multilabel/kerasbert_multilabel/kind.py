"""The multi_label kind: K independent yes/no labels per text.

    outputs   logits float32 (or float16 under mixed precision) [B, K]
    labels    multi-hot float32 [B, K] (int 0/1 works too): 1 where the label applies
    loss      per example, the mean over the K labels of the sigmoid cross-entropy,
              computed in float32 whatever the outputs' dtype
    decision  a label applies when its probability sigmoid(logit) is above 0.5, i.e. its
              logit is above 0: `MultiLabelKind.decode`, the one decision that training's
              accuracy, the metrics and prediction files (Task.predictions) and the
              export all use
    accuracy  exact match: an example counts as right only when all K decisions are
              (history's train_accuracy, sklearn's multi-label accuracy_score)

Serving (kerasbert/export/saved_model.py):

    serving_default  text string [None]: one raw text per example (WordPiece and
                     [CLS] text [SEP] packing to the run's max_seq_length in the graph)
    outputs          probabilities float32 [None, K]: sigmoid of each label's logit, in
                         the order of the metadata's label_list
                     predicted int32 [None, K]: 1 where the probability is above 0.5
                     labels string [None, K]: the predicted labels' names in label_list
                         order, padded with "" to K (a text with no label: all "")
    metadata         label_list (the column order), and threshold 0.5
"""

import tensorflow as tf

from kerasbert.data.tokenization import pack_inputs
from kerasbert.kinds.base import Serving, TaskKind

THRESHOLD = 0.5  # on the probability; the same as logit > 0


def text_inputs(task):
    return {"text": [None]}


def encode_text(tokenizer, inputs, max_seq_length):
    """[CLS] text [SEP] per raw text, as int32 [batch, max_seq_length] (what
    Task.featurize's encode_texts makes for one text per example)."""
    return pack_inputs(tokenizer, tokenizer.tokenize_ids(inputs["text"]), None, max_seq_length)


def decide(logits):
    """int32 [B, K]: 1 where a label applies (probability above THRESHOLD, i.e. logit above
    0). TF ops, so numpy logits (the metrics) and tensors (training, serving) alike."""
    return tf.cast(tf.cast(logits, tf.float32) > 0.0, tf.int32)


def label_outputs(task, logits):
    logits = tf.cast(logits, tf.float32)
    predicted = decide(logits)
    names = tf.broadcast_to(tf.constant(list(task.label_list), tf.string), tf.shape(logits))
    labels = tf.ragged.boolean_mask(names, predicted > 0).to_tensor(
        default_value="", shape=[None, len(task.label_list)])
    return {"probabilities": tf.sigmoid(logits), "predicted": predicted, "labels": labels}


def metadata(run):
    return {"threshold": THRESHOLD}


class MultiLabelKind(TaskKind):
    name = "multi_label"
    description = ("K independent labels per text (logits [B, K], labels float32 "
                   "multi-hot [B, K])")
    has_accuracy = True  # exact match
    row_metrics = True  # one row per example: metrics of sampled rows are meaningful
    serving = Serving(text_inputs, label_outputs, encode=encode_text, metadata=metadata)
    greater_is_better = True  # its tasks' F1s (a task may still declare its own)

    def decode(self, outputs):
        """The decisions [B, K] (`decide`): what the task's metrics and prediction files
        read (kerasbert's default Task.predictions), as its serving and accuracy do."""
        return decide(outputs)

    def per_example_loss(self, labels, outputs):
        per_label = tf.nn.sigmoid_cross_entropy_with_logits(
            labels=tf.cast(labels, tf.float32), logits=tf.cast(outputs, tf.float32))
        return tf.reduce_mean(per_label, axis=-1)

    def correct_count(self, labels, outputs):
        gold = tf.cast(tf.cast(labels, tf.float32) > 0.5, tf.int32)
        right = tf.equal(self.decode(outputs), gold)
        return tf.reduce_sum(tf.cast(tf.reduce_all(right, axis=-1), tf.float32))
