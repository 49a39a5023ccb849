"""Encoder + head as one Keras model, for every task kind.

Multiple-choice inputs arrive as [batch, choices, seq]; they are flattened to
[batch·choices, seq] for the encoder and the head's one score per sequence is regrouped
to [batch, choices] logits, so the softmax runs over the choices.

Two optional head attributes change how the encoder runs (see kerasbert/hookspecs.py):
`needs_all_layers` adds `all_layers` (embeddings and every transformer layer's output) to
the head's features; `trains_backbone = False` freezes the encoder and runs it without
dropout (the feature-based approach). A frozen head that reads `layer_features` can be fed
those precomputed (`--feature_cache_dir`): the encoder is then not run at all.
"""

import keras
import tensorflow as tf

from kerasbert.model.backbone import INPUT_NAMES, all_layer_outputs_model


class TaskModel(keras.Model):
    def __init__(self, backbone, head, **kwargs):
        super().__init__(**kwargs)
        self.backbone = backbone
        self.head = head
        self.head_trains_backbone = getattr(head, "trains_backbone", True)
        self.encoder_trains = None  # paths of the only encoder variables that train (train_only)
        self.set_backbone_trainable(True)
        self.all_layers_model = (all_layer_outputs_model(backbone)
                                 if getattr(head, "needs_all_layers", False) else None)

    def set_backbone_trainable(self, trainable):
        """Freezes or unfreezes the encoder (a head may keep it frozen for good). A frozen
        encoder also runs without dropout: its outputs are fixed features."""
        self.frozen_backbone = not (trainable and self.head_trains_backbone)
        self.backbone.trainable = not self.frozen_backbone  # (re)sets every variable's flag
        if self.encoder_trains is not None and not self.frozen_backbone:
            for variable in self.backbone.weights:
                variable.trainable = variable.path in self.encoder_trains

    def train_only(self, encoder_variables):
        """From now on an unfrozen encoder trains only `encoder_variables` (LoRA factors,
        BitFit's biases; kerasbert/model/adapters.py); the head still trains in full.
        Kept as paths: setting `trainable` on the encoder resets every variable's flag."""
        self.encoder_trains = frozenset(v.path for v in encoder_variables)
        self.set_backbone_trainable(not self.frozen_backbone)

    def call(self, inputs, training=False):
        cached = inputs.get("layer_features")  # a frozen encoder's precomputed layers
        token_ids = inputs["token_ids"]
        choices = token_ids.shape.rank == 3
        if choices:
            num_choices = tf.shape(token_ids)[1]
            seq_len = tf.shape(token_ids)[-1]
            inputs = {k: tf.reshape(inputs[k], [-1, seq_len]) for k in INPUT_NAMES}
        else:
            inputs = {k: inputs[k] for k in INPUT_NAMES}
        encoder_training = training and not self.frozen_backbone
        if cached is not None:
            encoded = {"layer_features": cached}
        elif self.all_layers_model is not None:
            all_layers = self.all_layers_model(inputs, training=encoder_training)
            sequence = all_layers[-1]
            encoded = {"sequence_output": sequence, "all_layers": all_layers,
                       "pooled_output": self.backbone.pooled_dense(sequence[:, 0, :])}
        else:
            encoded = self.backbone(inputs, training=encoder_training)
        outputs = self.head({**inputs, **encoded}, training=training)
        if choices:
            outputs = tf.reshape(outputs, [-1, num_choices])
        return outputs
