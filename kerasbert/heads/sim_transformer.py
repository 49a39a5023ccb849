"""Sim-Transformer (Wang et al. 2019): BIMPM with its BiLSTMs replaced by transformer layers.

The pair is split and matched exactly as in `kerasbert.heads.bimpm`; what changes:

  context      Dense(hidden_dim) on BERT's states, then `num_layers` keras-hub
               TransformerEncoder layers with padding masks, shared by A and B (BERT's
               states already carry positions)
  matching     one stream of states (a transformer has no forward/backward halves): full
               matching against the other sentence's last and first real token, plus
               max-pooling, attentive and max-attentive matching: 5·l features per position
  aggregation  per sentence, Dense(hidden_dim) + sinusoidal positions on the matching
               vectors, then `num_layers` TransformerEncoder layers (one stack for A, one
               for B, as BIMPM has two aggregation BiLSTMs)
  pooling      a transformer has no "last state" to read, and the split-out sentences have
               no [CLS]-like summary token, so each sentence is the masked mean of its
               aggregated states (an empty sentence gives zeros); the pair vector is the
               two means concatenated, 2·hidden_dim
  prediction   dropout, Dense(hidden_dim, tanh), dropout, Dense(num_outputs)

The paper gives no sizes; the defaults mirror BIMPM's (hidden 200 = its 2 × 100 BiLSTM
units; 4 heads of 50; feed-forward 400; one layer). Options: `sim_transformer_perspectives`,
`_hidden_dim`, `_num_heads`, `_intermediate_dim`, `_num_layers`, `_dropout`.
"""

import keras
import keras_hub
from absl import flags
from keras import ops

from kerasbert.errors import InputError
from kerasbert.heads.bimpm import (
    DEFAULT_DROPOUT,
    DEFAULT_PERSPECTIVES,
    MultiPerspectiveMatching,
    feed_forward,
    split_pair,
)

DEFAULTS = dict(perspectives=DEFAULT_PERSPECTIVES, hidden_dim=200, num_heads=4,
                intermediate_dim=400, num_layers=1, dropout=DEFAULT_DROPOUT)


def masked_mean(x, mask):
    """Mean of x [b, n, d] over mask's real positions, [b, d] (zeros when there are none)."""
    weights = ops.cast(mask, x.dtype)[..., None]
    return ops.sum(x * weights, axis=1) / ops.maximum(ops.sum(weights, axis=1), 1.0)


class SimTransformer(keras.layers.Layer):
    def __init__(self, num_outputs, perspectives=DEFAULTS["perspectives"],
                 hidden_dim=DEFAULTS["hidden_dim"], num_heads=DEFAULTS["num_heads"],
                 intermediate_dim=DEFAULTS["intermediate_dim"],
                 num_layers=DEFAULTS["num_layers"], dropout=DEFAULTS["dropout"], seed=None,
                 **kwargs):
        super().__init__(**kwargs)
        if hidden_dim % num_heads:
            raise InputError(f"--sim_transformer_num_heads={num_heads} must divide "
                             f"--sim_transformer_hidden_dim={hidden_dim}")
        # === Config ===
        self.num_outputs = num_outputs
        self.perspectives = perspectives
        self.hidden_dim = hidden_dim
        self.num_heads = num_heads
        self.intermediate_dim = intermediate_dim
        self.num_layers = num_layers
        self.dropout = dropout
        self.seed = seed

        def sub_seed(k):  # distinct seeds per sub-layer, so no two start as clones
            return None if seed is None else seed + 100 * k

        def dense(k, name):
            return keras.layers.Dense(
                hidden_dim, name=name,
                kernel_initializer=keras.initializers.GlorotUniform(seed=sub_seed(k)))

        def encoders(k, name):
            return [keras_hub.layers.TransformerEncoder(
                intermediate_dim, num_heads, dropout=dropout,
                kernel_initializer=keras.initializers.GlorotUniform(seed=sub_seed(k + i)),
                name=f"{name}_{i}") for i in range(num_layers)]

        # === Layers ===
        self.dropout_layer = keras.layers.Dropout(dropout, seed=seed, name="dropout")
        self.context_projection = dense(1, "context_projection")
        self.context_layers = encoders(10, "context_transformer")
        targets = (("last", "first"),)
        self.match_a = MultiPerspectiveMatching(perspectives, targets, seed=sub_seed(2),
                                                name="match_a_to_b")
        self.match_b = MultiPerspectiveMatching(perspectives, targets, seed=sub_seed(3),
                                                name="match_b_to_a")
        self.positions = keras_hub.layers.SinePositionEncoding(name="positions")
        self.aggregate_projection_a = dense(4, "aggregate_projection_a")
        self.aggregate_projection_b = dense(5, "aggregate_projection_b")
        self.aggregate_layers_a = encoders(20, "aggregate_a_transformer")
        self.aggregate_layers_b = encoders(30, "aggregate_b_transformer")
        self.hidden_dense, self.output_dense = feed_forward(hidden_dim, num_outputs,
                                                            sub_seed(6), "prediction")

    def _encode(self, projection, layers, x, mask, training, positions=False):
        x = projection(self.dropout_layer(x, training=training))
        if positions:
            x = x + self.positions(x)
        for layer in layers:
            x = layer(x, padding_mask=mask, training=training)
        return x * ops.cast(mask, x.dtype)[..., None]

    def call(self, features, training=False):
        sequence = ops.cast(features["sequence_output"], self.compute_dtype)
        # At least 2 columns: Keras warns about attention over a single key (a softmax over
        # one value), which eager calls on one-token sentences would otherwise trigger.
        (a, a_mask), (b, b_mask) = split_pair(sequence, features["segment_ids"],
                                              features["padding_mask"], min_width=2)
        a_states = self._encode(self.context_projection, self.context_layers, a, a_mask,
                                training)
        b_states = self._encode(self.context_projection, self.context_layers, b, b_mask,
                                training)
        a_matched = self.match_a(a_states[:, :, None], b_states[:, :, None], a_mask, b_mask)
        b_matched = self.match_b(b_states[:, :, None], a_states[:, :, None], b_mask, a_mask)
        a_out = self._encode(self.aggregate_projection_a, self.aggregate_layers_a, a_matched,
                             a_mask, training, positions=True)
        b_out = self._encode(self.aggregate_projection_b, self.aggregate_layers_b, b_matched,
                             b_mask, training, positions=True)
        pair = ops.concatenate([masked_mean(a_out, a_mask), masked_mean(b_out, b_mask)], -1)
        hidden = self.hidden_dense(self.dropout_layer(pair, training=training))
        return self.output_dense(self.dropout_layer(hidden, training=training))

    def get_config(self):
        config = super().get_config()
        config.update(num_outputs=self.num_outputs, perspectives=self.perspectives,
                      hidden_dim=self.hidden_dim, num_heads=self.num_heads,
                      intermediate_dim=self.intermediate_dim, num_layers=self.num_layers,
                      dropout=self.dropout, seed=self.seed)
        return config


def build_sim_transformer(context):
    """HeadSpec factory "sim_transformer". Options: sim_transformer_<name> for DEFAULTS."""
    options = {}
    for name, default in DEFAULTS.items():
        value = context.options.get(f"sim_transformer_{name}")
        options[name] = default if value is None else type(default)(value)
    return SimTransformer(context.num_outputs, seed=context.seed, name="sim_transformer",
                          **options)


def define_flags(flag_values):
    """Defines the head's absl flags on `flag_values` (kerasbert_define_flags hook)."""
    helps = {
        "perspectives": "Number of perspectives l of the sim_transformer head's "
                        "multi-perspective cosine matching.",
        "hidden_dim": "Width of the sim_transformer head's transformer layers (BERT's states "
                      "and the matching vectors are projected to it); its prediction layer "
                      "has as many hidden units.",
        "num_heads": "Attention heads of each of the sim_transformer head's transformer "
                     "layers; must divide --sim_transformer_hidden_dim.",
        "intermediate_dim": "Feed-forward size inside each of the sim_transformer head's "
                            "transformer layers.",
        "num_layers": "Transformer layers of the sim_transformer head's context encoder and "
                      "of each of its two aggregation encoders.",
    }
    for name, help_text in helps.items():
        flags.DEFINE_integer(f"sim_transformer_{name}", DEFAULTS[name], help_text,
                             lower_bound=1, flag_values=flag_values)
    flags.DEFINE_float(
        "sim_transformer_dropout", DEFAULTS["dropout"],
        "Dropout rate in the sim_transformer head: on the inputs of its projections and "
        "prediction layers and inside its transformer layers.",
        lower_bound=0.0, upper_bound=1.0, flag_values=flag_values)
