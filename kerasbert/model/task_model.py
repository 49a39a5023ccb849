"""Encoder + head as one Keras model, for every task kind.

Multiple-choice inputs arrive as [batch, choices, seq]; they are flattened to
[batch·choices, seq] for the encoder and the head's one score per sequence is regrouped
to [batch, choices] logits, so the softmax runs over the choices.
"""

import keras
import tensorflow as tf

INPUT_NAMES = ("token_ids", "segment_ids", "padding_mask")


class TaskModel(keras.Model):
    def __init__(self, backbone, head, **kwargs):
        super().__init__(**kwargs)
        self.backbone = backbone
        self.head = head

    def call(self, inputs, training=False):
        token_ids = inputs["token_ids"]
        choices = token_ids.shape.rank == 3
        if choices:
            num_choices = tf.shape(token_ids)[1]
            seq_len = tf.shape(token_ids)[-1]
            inputs = {k: tf.reshape(inputs[k], [-1, seq_len]) for k in INPUT_NAMES}
        else:
            inputs = {k: inputs[k] for k in INPUT_NAMES}
        encoded = self.backbone(inputs, training=training)
        outputs = self.head({**inputs, **encoded}, training=training)
        if choices:
            outputs = tf.reshape(outputs, [-1, num_choices])
        return outputs
