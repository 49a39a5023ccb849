"""A kerasbert head plugin: masked mean pooling of the final hidden states.

Registered through the `kerasbert.plugins` entry point in setup.cfg; kerasbert itself is
not edited. Sentence-transformers models (such as all-MiniLM-L6-v2) are trained with this
pooling, which makes it a natural alternative to BERT's [CLS] pooler.
"""

import keras
from kerasbert.hookspecs import HeadSpec, hookimpl


class MeanPoolHead(keras.layers.Layer):
    def __init__(self, num_outputs, dropout=0.1, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.num_outputs = num_outputs
        self.dropout = dropout
        self.seed = seed
        self.dropout_layer = keras.layers.Dropout(dropout, seed=seed)
        self.output_dense = keras.layers.Dense(
            num_outputs, kernel_initializer=keras.initializers.TruncatedNormal(0.02, seed=seed))

    def call(self, features, training=False):
        mask = keras.ops.cast(features["padding_mask"], features["sequence_output"].dtype)
        summed = keras.ops.sum(features["sequence_output"] * mask[:, :, None], axis=1)
        # max(…, 1): an all-padding row (never produced by kerasbert) would divide by 0.
        pooled = summed / keras.ops.maximum(keras.ops.sum(mask, axis=1, keepdims=True), 1.0)
        return self.output_dense(self.dropout_layer(pooled, training=training))

    def get_config(self):
        config = super().get_config()
        config.update(num_outputs=self.num_outputs, dropout=self.dropout, seed=self.seed)
        return config


def _build(context):
    dropout = context.options.get("mean_pool_dropout")
    return MeanPoolHead(context.num_outputs,
                        dropout=context.dropout if dropout is None else dropout,
                        seed=context.seed, name="mean_pool")


@hookimpl
def kerasbert_heads():
    return [HeadSpec(name="mean_pool",
                     kinds=("classification", "regression", "multiple_choice"),
                     build=_build,
                     description="Masked mean of the final hidden states + linear layer.")]


@hookimpl
def kerasbert_define_flags(flag_values):
    from absl import flags

    flags.DEFINE_float("mean_pool_dropout", None,
                       "Dropout before the mean_pool head's linear layer. Default: the "
                       "encoder's dropout.", flag_values=flag_values)
