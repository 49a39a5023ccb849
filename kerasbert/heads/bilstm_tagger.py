"""A BiLSTM tagger stacked on BERT (Wang et al. 2019's sequence-labeling head).

BERT's final hidden states → dropout → one BiLSTM over the real tokens → dropout → a Dense
classifier per token. Output: [batch, seq, num_labels] logits, read at each word's first
word piece by the NER task like the plain `tagger`'s. Unlike `feature_bilstm` it reads
only the last layer and lets BERT train (stack-and-finetune's phase 2).
Options: `bilstm_tagger_lstm_units` (units per direction, 256), `bilstm_tagger_dropout`
(default: the encoder's dropout rate).
"""

import keras
from absl import flags

from kerasbert.heads.bimpm import bilstm

DEFAULT_LSTM_UNITS = 256


class BiLSTMTagger(keras.layers.Layer):
    def __init__(self, num_outputs, lstm_units=DEFAULT_LSTM_UNITS, dropout=0.1, seed=None,
                 **kwargs):
        super().__init__(**kwargs)
        # === Config ===
        self.num_outputs = num_outputs
        self.lstm_units = lstm_units
        self.dropout = dropout
        self.seed = seed
        # === Layers ===
        self.dropout_layer = keras.layers.Dropout(dropout, seed=seed, name="dropout")
        self.bilstm = bilstm(lstm_units, "bilstm", None if seed is None else seed + 1)
        self.output_dense = keras.layers.Dense(
            num_outputs,
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.02, seed=seed),
            name="output")

    def call(self, features, training=False):
        x = keras.ops.cast(features["sequence_output"], self.compute_dtype)
        mask = keras.ops.cast(features["padding_mask"], "bool")
        x = self.bilstm(self.dropout_layer(x, training=training), mask=mask, training=training)
        return self.output_dense(self.dropout_layer(x, training=training))

    def get_config(self):
        config = super().get_config()
        config.update(num_outputs=self.num_outputs, lstm_units=self.lstm_units,
                      dropout=self.dropout, seed=self.seed)
        return config


def build_bilstm_tagger(context):
    """HeadSpec factory "bilstm_tagger" (kind tagging)."""
    units = context.options.get("bilstm_tagger_lstm_units")
    dropout = context.options.get("bilstm_tagger_dropout")
    return BiLSTMTagger(
        context.num_outputs,
        lstm_units=DEFAULT_LSTM_UNITS if units is None else int(units),
        dropout=context.dropout if dropout is None else float(dropout),
        seed=context.seed, name="bilstm_tagger")


def define_flags(flag_values):
    """Defines the head's absl flags on `flag_values` (kerasbert_define_flags hook)."""
    flags.DEFINE_integer(
        "bilstm_tagger_lstm_units", DEFAULT_LSTM_UNITS,
        "Units per direction of the bilstm_tagger head's BiLSTM.",
        lower_bound=1, flag_values=flag_values)
    flags.DEFINE_float(
        "bilstm_tagger_dropout", None,
        "Dropout rate on the bilstm_tagger head's BiLSTM inputs and outputs; when unset, the "
        "encoder's own dropout rate.",
        lower_bound=0.0, upper_bound=1.0, flag_values=flag_values)
