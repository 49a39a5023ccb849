"""The paper's classification layer: new weights W ∈ R^{K×H} on the [CLS] representation.

As in google-research/bert's `run_classifier.py`, C is by default the pooled output (the
pre-trained tanh "pooler" over the final hidden state of [CLS]), followed by dropout and
a linear layer. `--cls_linear_use_pooler=false` takes the raw final hidden state of [CLS]
instead. With K=1 the same layer is the STS-B regressor and SWAG's choice scorer V·C_k.
"""

import keras


class ClsClassifier(keras.layers.Layer):
    def __init__(self, num_outputs, dropout=0.1, use_pooler=True, seed=None, **kwargs):
        super().__init__(**kwargs)
        # === Config ===
        self.num_outputs = num_outputs
        self.dropout = dropout
        self.use_pooler = use_pooler
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
        if self.use_pooler:
            cls = features["pooled_output"]
        else:
            cls = features["sequence_output"][:, 0, :]
        return self.output_dense(self.dropout_layer(cls, training=training))

    def get_config(self):
        config = super().get_config()
        config.update(num_outputs=self.num_outputs, dropout=self.dropout,
                      use_pooler=self.use_pooler, seed=self.seed)
        return config
