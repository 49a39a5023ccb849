"""The paper's token classifier for NER (fine-tuning): a linear layer on every final hidden.

BERT section 4.3 / 5.3: the final hidden vector T_i of each token goes through dropout and a
new classification layer W ∈ R^{K×H}; the logits of a word are read at its first word
piece (the task labels the other pieces -1, so they count neither in the loss nor in the
predictions). Output: [batch, seq, num_labels] logits.
"""

import keras


class TokenTagger(keras.layers.Layer):
    def __init__(self, num_outputs, dropout=0.1, seed=None, **kwargs):
        super().__init__(**kwargs)
        # === Config ===
        self.num_outputs = num_outputs
        self.dropout = dropout
        self.seed = seed
        # === Layers ===
        self.dropout_layer = keras.layers.Dropout(dropout, seed=seed, name="dropout")
        self.output_dense = keras.layers.Dense(
            num_outputs,
            # BERT's initializer_range: truncated normal with stddev 0.02.
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.02, seed=seed),
            name="output",
        )

    def call(self, features, training=False):
        x = self.dropout_layer(features["sequence_output"], training=training)
        return self.output_dense(x)

    def get_config(self):
        config = super().get_config()
        config.update(num_outputs=self.num_outputs, dropout=self.dropout, seed=self.seed)
        return config


def build_tagger(context):
    """HeadSpec factory: a TokenTagger sized from the HeadContext."""
    return TokenTagger(context.num_outputs, dropout=context.dropout, seed=context.seed,
                       name="tagger")
