"""BERT's SQuAD head: a start vector S and an end vector E over the final hidden states.

P_start(i) = softmax_i(S·T_i) and P_end(j) = softmax_j(E·T_j); both vectors are the two
columns of one Dense(2) on `sequence_output` (plus a bias each, as in google-research/bert's
`run_squad.py` and HuggingFace's `qa_outputs`). No dropout of its own: the encoder's
dropout already acts on T. Output: float32 logits [batch, seq, 2] (start, end). Padding
positions get PADDING_LOGIT, far below any real logit, so they are never the argmax and
carry zero softmax probability.
"""

import keras
from keras import ops

from kerasbert.kind_names import PADDING_LOGIT


class SpanHead(keras.layers.Layer):
    def __init__(self, seed=None, **kwargs):
        super().__init__(**kwargs)
        # === Config ===
        self.seed = seed
        # === Layers ===
        self.output_dense = keras.layers.Dense(
            2,
            # BERT's initializer_range: truncated normal with stddev 0.02.
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.02, seed=seed),
            dtype=self.dtype_policy,
            name="start_end",
        )

    def build(self, input_shape=None):
        hidden = input_shape["sequence_output"][-1] if isinstance(input_shape, dict) else None
        if hidden is not None:
            self.output_dense.build((None, None, hidden))
        self.built = True

    def call(self, features, training=False):
        logits = ops.cast(self.output_dense(features["sequence_output"]), "float32")
        keep = ops.expand_dims(ops.cast(features["padding_mask"], "bool"), -1)
        return ops.where(keep, logits, ops.full_like(logits, PADDING_LOGIT))

    def compute_output_shape(self, input_shape):
        return tuple(input_shape["sequence_output"][:-1]) + (2,)

    def get_config(self):
        config = super().get_config()
        config.update(seed=self.seed)
        return config


def build_span_head(context):
    """HeadSpec factory: register as name "span", kinds ("span",)."""
    return SpanHead(seed=context.seed, name="span")
