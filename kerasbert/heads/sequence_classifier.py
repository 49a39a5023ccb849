"""Text classification heads stacked on BERT's token states (Wang et al. 2019).

Instead of reading [CLS] alone, an encoder runs over every real token of the sequence and
is max-pooled over time:

  bilstm  a BiLSTM (units per direction: `sequence_classifier_lstm_units`, 256), then
          masked max-pooling of its outputs
  cnn     Kim (2014): Conv1D filters (`sequence_classifier_filters` per size, 100) of
          kernel sizes 3, 4 and 5 with ReLU, each masked-max-pooled over time, concatenated

then dropout and a Dense layer: logits [batch, num_outputs] (classification) or [batch, 1]
(regression). Convolutions are "same"-padded over zeroed padding and pooled over the real
positions only, so a window reaching past the sentence sees zeros however much padding
follows: extra padding changes nothing. Option `sequence_classifier_encoder` picks the
encoder; `sequence_classifier_dropout` defaults to the encoder's dropout rate.
"""

import keras
from absl import flags
from keras import ops

from kerasbert.errors import InputError
from kerasbert.heads.bimpm import bilstm

ENCODERS = ("bilstm", "cnn")
DEFAULT_LSTM_UNITS = 256
DEFAULT_FILTERS = 100
KERNEL_SIZES = (3, 4, 5)


def masked_max(x, mask):
    """Max of x [b, n, d] over mask's real positions, [b, d] (zeros when there are none)."""
    real = ops.cast(mask, "bool")[..., None]
    best = ops.max(ops.where(real, x, ops.full_like(x, -1e9)), axis=1)
    return ops.where(ops.any(real, axis=1), best, ops.zeros_like(best))


class SequenceClassifier(keras.layers.Layer):
    def __init__(self, num_outputs, encoder="bilstm", lstm_units=DEFAULT_LSTM_UNITS,
                 filters=DEFAULT_FILTERS, kernel_sizes=KERNEL_SIZES, dropout=0.1, seed=None,
                 **kwargs):
        super().__init__(**kwargs)
        if encoder not in ENCODERS:
            raise InputError(f"--sequence_classifier_encoder={encoder}: expected one of "
                             f"{', '.join(ENCODERS)}")
        # === Config ===
        self.num_outputs = num_outputs
        self.encoder = encoder
        self.lstm_units = lstm_units
        self.filters = filters
        self.kernel_sizes = tuple(kernel_sizes)
        self.dropout = dropout
        self.seed = seed
        # === Layers ===
        self.dropout_layer = keras.layers.Dropout(dropout, seed=seed, name="dropout")
        if encoder == "bilstm":
            self.encoder_layers = [bilstm(lstm_units, "bilstm",
                                          None if seed is None else seed + 1)]
        else:
            self.encoder_layers = [keras.layers.Conv1D(
                filters, size, padding="same", activation="relu", name=f"conv_{size}",
                kernel_initializer=keras.initializers.GlorotUniform(
                    seed=None if seed is None else seed + size))
                for size in self.kernel_sizes]
        self.output_dense = keras.layers.Dense(
            num_outputs,
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.02, seed=seed),
            name="output")

    def call(self, features, training=False):
        x = ops.cast(features["sequence_output"], self.compute_dtype)
        mask = ops.cast(features["padding_mask"], "bool")
        x = self.dropout_layer(x, training=training)
        if self.encoder == "bilstm":
            pooled = masked_max(self.encoder_layers[0](x, mask=mask, training=training), mask)
        else:
            x = x * ops.cast(mask, x.dtype)[..., None]  # padding reads as zeros
            pooled = ops.concatenate([masked_max(conv(x), mask) for conv in self.encoder_layers],
                                     axis=-1)
        return self.output_dense(self.dropout_layer(pooled, training=training))

    def get_config(self):
        config = super().get_config()
        config.update(num_outputs=self.num_outputs, encoder=self.encoder,
                      lstm_units=self.lstm_units, filters=self.filters,
                      kernel_sizes=list(self.kernel_sizes), dropout=self.dropout,
                      seed=self.seed)
        return config


def build_sequence_classifier(context):
    """HeadSpec factory "sequence_classifier" (kinds classification, regression)."""
    options = context.options
    units = options.get("sequence_classifier_lstm_units")
    filters = options.get("sequence_classifier_filters")
    dropout = options.get("sequence_classifier_dropout")
    return SequenceClassifier(
        context.num_outputs,
        encoder=options.get("sequence_classifier_encoder") or "bilstm",
        lstm_units=DEFAULT_LSTM_UNITS if units is None else int(units),
        filters=DEFAULT_FILTERS if filters is None else int(filters),
        dropout=context.dropout if dropout is None else float(dropout),
        seed=context.seed, name="sequence_classifier")


def define_flags(flag_values):
    """Defines the head's absl flags on `flag_values` (kerasbert_define_flags hook)."""
    flags.DEFINE_enum(
        "sequence_classifier_encoder", "bilstm", ENCODERS,
        "What the sequence_classifier head runs over BERT's token states before max-pooling "
        "them over time: a BiLSTM, or Kim (2014)'s convolutions of widths 3, 4 and 5.",
        flag_values=flag_values)
    flags.DEFINE_integer(
        "sequence_classifier_lstm_units", DEFAULT_LSTM_UNITS,
        "Units per direction of the sequence_classifier head's BiLSTM (encoder bilstm).",
        lower_bound=1, flag_values=flag_values)
    flags.DEFINE_integer(
        "sequence_classifier_filters", DEFAULT_FILTERS,
        "Filters per kernel size of the sequence_classifier head's convolutions (encoder cnn).",
        lower_bound=1, flag_values=flag_values)
    flags.DEFINE_float(
        "sequence_classifier_dropout", None,
        "Dropout rate on the sequence_classifier head's inputs and pooled features; when "
        "unset, the encoder's own dropout rate.",
        lower_bound=0.0, upper_bound=1.0, flag_values=flag_values)
