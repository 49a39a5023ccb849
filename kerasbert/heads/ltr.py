"""Heads for fine-tuning a left-to-right (causal) encoder, BERT's "LTR & No NSP" ablation.

In a causal encoder the [CLS] state at position 0 sees only [CLS] itself, so BERT's
classifier on [CLS] learns nothing about the input. Two heads read the whole input:

  last_token  a linear layer on the final hidden state of the last real token (the only
              position that has seen the whole input: OpenAI GPT's classifier)
  top_bilstm  BERT 5.1's "+ BiLSTM": a randomly initialised BiLSTM over the final hidden
              states, then for span tasks (SQuAD) start/end logits per token, else a
              linear layer on [forward state at the last real token; backward state at
              the first token]

Both also work on a bidirectional encoder.
"""

import keras
from absl import flags
from keras import ops

from kerasbert.kind_names import PADDING_LOGIT
from kerasbert.tasks import base


def _dense(units, seed, name):
    return keras.layers.Dense(
        units, kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.02, seed=seed),
        name=name)


def last_token_states(sequence, padding_mask):
    """[batch, H] final hidden states at each sequence's last non-padding position."""
    last = ops.maximum(ops.sum(ops.cast(padding_mask, "int32"), axis=-1) - 1, 0)
    return ops.take_along_axis(sequence, last[:, None, None], axis=1)[:, 0, :]


class LastTokenClassifier(keras.layers.Layer):
    def __init__(self, num_outputs, dropout=0.1, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.num_outputs, self.dropout, self.seed = num_outputs, dropout, seed
        self.dropout_layer = keras.layers.Dropout(dropout, seed=seed, name="dropout")
        self.output_dense = _dense(num_outputs, seed, "output")

    def call(self, features, training=False):
        state = last_token_states(features["sequence_output"], features["padding_mask"])
        return self.output_dense(self.dropout_layer(state, training=training))

    def get_config(self):
        config = super().get_config()
        config.update(num_outputs=self.num_outputs, dropout=self.dropout, seed=self.seed)
        return config


class TopBiLSTM(keras.layers.Layer):
    def __init__(self, kind, num_outputs, units, dropout=0.1, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.kind, self.num_outputs, self.units = kind, num_outputs, units
        self.dropout, self.seed = dropout, seed

        def lstm(k, backwards):  # distinct seeds: the two directions must not start equal
            s = None if seed is None else seed + k + 1
            return keras.layers.LSTM(
                units, return_sequences=True, go_backwards=backwards,
                kernel_initializer=keras.initializers.GlorotUniform(seed=s),
                recurrent_initializer=keras.initializers.Orthogonal(seed=s),
                name=f"lstm_{'backward' if backwards else 'forward'}")

        self.bilstm = keras.layers.Bidirectional(lstm(0, False), backward_layer=lstm(1, True),
                                                 name="bilstm")
        self.dropout_layer = keras.layers.Dropout(dropout, seed=seed, name="dropout")
        self.output_dense = _dense(2 if kind == base.SPAN else num_outputs, seed, "output")

    def call(self, features, training=False):
        mask = ops.cast(features["padding_mask"], "bool")
        states = self.bilstm(features["sequence_output"], mask=mask, training=training)
        if self.kind == base.SPAN:
            logits = ops.cast(self.output_dense(self.dropout_layer(states, training=training)),
                              "float32")
            keep = ops.expand_dims(mask, -1)
            return ops.where(keep, logits, ops.full_like(logits, PADDING_LOGIT))
        # Each direction's state after reading the whole input (the backward LSTM's
        # outputs are re-reversed by Bidirectional, so its final state sits at position 0).
        forward = last_token_states(states[..., :self.units], features["padding_mask"])
        summary = ops.concatenate([forward, states[:, 0, self.units:]], axis=-1)
        return self.output_dense(self.dropout_layer(summary, training=training))

    def get_config(self):
        config = super().get_config()
        config.update(kind=self.kind, num_outputs=self.num_outputs, units=self.units,
                      dropout=self.dropout, seed=self.seed)
        return config


def build_last_token(context):
    return LastTokenClassifier(context.num_outputs, dropout=context.dropout, seed=context.seed,
                               name="last_token")


def build_top_bilstm(context):
    units = context.options.get("top_bilstm_units") or context.hidden_dim
    return TopBiLSTM(context.kind, context.num_outputs, units, dropout=context.dropout,
                     seed=context.seed, name="top_bilstm")


def define_flags(flag_values):
    flags.DEFINE_integer("top_bilstm_units", 0, "LSTM units per direction of the top_bilstm "
                         "head (0 = the encoder's hidden size).", flag_values=flag_values)
