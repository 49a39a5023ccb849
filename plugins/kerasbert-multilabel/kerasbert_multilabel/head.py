"""The multi_label_linear head: one logit per label from a pooled text representation."""

import keras


class MultiLabelLinear(keras.layers.Layer):
    """pooling: "mean" (the final hidden states averaged over the real tokens), "cls" (the
    raw final state of [CLS]) or "pooler" (BERT's tanh pooler over it); then dropout and a
    dense layer with `num_outputs` logits, one independent yes/no decision per label."""

    def __init__(self, num_outputs, dropout=0.1, pooling="mean", seed=None, **kwargs):
        super().__init__(**kwargs)
        if pooling not in ("mean", "cls", "pooler"):
            raise ValueError(f"pooling={pooling!r}: expected mean, cls or pooler")
        self.num_outputs, self.dropout, self.pooling, self.seed = (num_outputs, dropout,
                                                                   pooling, seed)
        self.dropout_layer = keras.layers.Dropout(dropout, seed=seed, name="dropout")
        self.output_dense = keras.layers.Dense(
            num_outputs, kernel_initializer=keras.initializers.TruncatedNormal(0.02, seed=seed),
            name="output")

    def call(self, features, training=False):
        if self.pooling == "pooler":
            pooled = features["pooled_output"]
        elif self.pooling == "cls":
            pooled = features["sequence_output"][:, 0, :]
        else:
            sequence = features["sequence_output"]
            mask = keras.ops.cast(features["padding_mask"], sequence.dtype)[:, :, None]
            # max(…, 1): an all-padding row (kerasbert never makes one) would divide by 0.
            pooled = (keras.ops.sum(sequence * mask, axis=1)
                      / keras.ops.maximum(keras.ops.sum(mask, axis=1), 1.0))
        return self.output_dense(self.dropout_layer(pooled, training=training))

    def get_config(self):
        config = super().get_config()
        config.update(num_outputs=self.num_outputs, dropout=self.dropout,
                      pooling=self.pooling, seed=self.seed)
        return config
