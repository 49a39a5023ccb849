"""The paper's feature-based NER head: a frozen BERT's layers → 2-layer BiLSTM → classifier.

BERT section 5.3 (Table 7): no BERT weight is trained; the activations of one or more layers
feed a randomly initialised two-layer bidirectional LSTM, then a linear classifier per
token. Which layers, the `--feature_bilstm_layers` option:

  embeddings        the embedding output (after its LayerNorm)          paper: 91.0 dev F1
  second_to_last    layer L-1                                            95.6
  last              layer L                                              94.9
  sum_last_four     weighted sum of layers L-3..L                        95.9
  concat_last_four  layers L-3..L concatenated (4H features)             96.1 (the best)
  sum_all           weighted sum of the embeddings and all L layers     95.5 (paper: "all
                    12 layers"; we include the embeddings, as ELMo's mix does)

The paper's "two-layer 768-dimensional BiLSTM" is read as 768 units per direction
(`--feature_bilstm_lstm_units`).

The paper does not say how its sums are weighted; we follow ELMo (Peters et al. 2018, eq. 1):
gamma · Σ_j softmax(s)_j h_j with learned scalars s (initially 0, so a plain average) and a
learned scale gamma (initially 1) — see `ScalarMix`.

Contract with the model builder: the head reads `features["all_layers"]`, the list
[embeddings, layer_1 out, ..., layer_L out] of [batch, seq, H] tensors (see
`kerasbert.model.backbone.all_layer_outputs_model`), or, when features were cached,
`features["layer_features"]`, [batch, k, seq, H] holding only the k layers this option
uses (see `compute_layer_features`); plus `padding_mask` [batch, seq]. The backbone must
be frozen and run with training=False (no encoder dropout), as when features are cached.
"""

import hashlib
import logging
import os
import weakref

import keras
import numpy as np
import tensorflow as tf
from absl import flags

from kerasbert.errors import InputError
from kerasbert.model.backbone import INPUT_NAMES, all_layer_outputs_model

log = logging.getLogger(__name__)

LAYER_CHOICES = ("embeddings", "second_to_last", "last", "sum_last_four", "concat_last_four",
                 "sum_all")
DEFAULT_LAYERS = "concat_last_four"
DEFAULT_LSTM_UNITS = 768


def layer_indices(layers: str, num_layers: int, flag="feature_bilstm_layers") -> tuple[int, ...]:
    """Indices into [embeddings, layer_1, ..., layer_L] that a layer choice reads; an
    InputError naming `flag` for an unknown choice or an encoder too shallow for it."""
    if layers not in LAYER_CHOICES:
        raise InputError(f"--{flag}={layers}: expected one of {', '.join(LAYER_CHOICES)}")
    needed = {"second_to_last": 2, "sum_last_four": 4, "concat_last_four": 4}.get(layers, 1)
    if num_layers < needed:
        raise InputError(f"--{flag}={layers} needs an encoder with at least "
                         f"{needed} transformer layers; this one has {num_layers}")
    L = num_layers
    return {
        "embeddings": (0,),
        "second_to_last": (L - 1,),
        "last": (L,),
        "sum_last_four": tuple(range(L - 3, L + 1)),
        "concat_last_four": tuple(range(L - 3, L + 1)),
        "sum_all": tuple(range(L + 1)),
    }[layers]


class ScalarMix(keras.layers.Layer):
    """gamma · Σ_j softmax(s)_j x[:, j]: a learned weighted sum over axis 1 of [b, k, seq, H]."""

    def build(self, input_shape):
        self.scalars = self.add_weight(shape=(input_shape[1],), initializer="zeros",
                                       name="scalars")
        self.gamma = self.add_weight(shape=(), initializer="ones", name="gamma")

    def call(self, x):
        weights = keras.ops.softmax(self.scalars)
        return self.gamma * keras.ops.einsum("bksh,k->bsh", x, weights)


class FeatureBiLSTM(keras.layers.Layer):
    """Frozen-BERT features → combination → 2 × BiLSTM → Dense, per token."""

    needs_all_layers = True  # the model builder must add features["all_layers"]
    trains_backbone = False  # the feature-based approach: the encoder stays frozen
    layers_flag = "feature_bilstm_layers"  # the flag errors about the layer choice name

    def __init__(self, num_outputs, layers=DEFAULT_LAYERS, lstm_units=DEFAULT_LSTM_UNITS,
                 dropout=0.1, seed=None, lstm_layers=2, **kwargs):
        super().__init__(**kwargs)
        if layers not in LAYER_CHOICES:
            layer_indices(layers, 0, self.layers_flag)  # raises the InputError naming it
        # === Config ===
        self.num_outputs = num_outputs
        self.layers_choice = layers
        self.lstm_units = lstm_units
        self.dropout = dropout
        self.seed = seed
        self.lstm_layers = lstm_layers  # the paper's two; bilstm_crf may stack fewer
        # === Layers ===
        self.mix = ScalarMix(name="scalar_mix") if layers.startswith("sum_") else None
        self.dropout_layer = keras.layers.Dropout(dropout, seed=seed, name="dropout")
        self.bilstms = [self._bilstm(i) for i in range(lstm_layers)]
        self.output_dense = keras.layers.Dense(
            num_outputs,
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=0.02, seed=seed),
            name="output")

    def _bilstm(self, i):
        # Distinct seeds per direction and layer: with one seed, Bidirectional's backward copy
        # would start as an exact clone of the forward LSTM.
        def lstm(k, backwards):
            seed = None if self.seed is None else self.seed + 10 * i + k + 1
            return keras.layers.LSTM(
                self.lstm_units, return_sequences=True, go_backwards=backwards,
                kernel_initializer=keras.initializers.GlorotUniform(seed=seed),
                recurrent_initializer=keras.initializers.Orthogonal(seed=seed),
                name=f"lstm_{i}_{'backward' if backwards else 'forward'}")

        return keras.layers.Bidirectional(lstm(0, False), backward_layer=lstm(1, True),
                                          name=f"bilstm_{i}")

    def check_depth(self, num_layers):
        """Refuses, before any model is built, an encoder too shallow for the layer choice
        (inside `call` Keras would wrap the error in its own report)."""
        if num_layers is not None:
            layer_indices(self.layers_choice, num_layers, self.layers_flag)

    def select(self, features):
        """The k chosen layers as one [batch, k, seq, H] tensor."""
        if "layer_features" in features:  # cached: exactly the chosen layers
            x = features["layer_features"]
        else:
            all_layers = features["all_layers"]
            indices = layer_indices(self.layers_choice, len(all_layers) - 1, self.layers_flag)
            x = keras.ops.stack([all_layers[i] for i in indices], axis=1)
        return keras.ops.cast(x, self.compute_dtype)

    def call(self, features, training=False):
        x = self.select(features)  # [batch, k, seq, H]
        if self.mix is not None:
            x = self.mix(x)
        elif self.layers_choice == "concat_last_four":
            shape = keras.ops.shape(x)
            x = keras.ops.reshape(keras.ops.transpose(x, (0, 2, 1, 3)),
                                  (shape[0], shape[2], shape[1] * shape[3]))
        else:
            x = x[:, 0]
        mask = keras.ops.cast(features["padding_mask"], "bool")
        for bilstm in self.bilstms:
            x = bilstm(self.dropout_layer(x, training=training), mask=mask, training=training)
        return self.output_dense(self.dropout_layer(x, training=training))

    def get_config(self):
        config = super().get_config()
        config.update(num_outputs=self.num_outputs, layers=self.layers_choice,
                      lstm_units=self.lstm_units, dropout=self.dropout, seed=self.seed,
                      lstm_layers=self.lstm_layers)
        return config


def build_feature_bilstm(context):
    """HeadSpec factory. Options: feature_bilstm_layers / _lstm_units / _dropout."""
    options = context.options
    dropout = options.get("feature_bilstm_dropout")
    head = FeatureBiLSTM(
        context.num_outputs,
        layers=options.get("feature_bilstm_layers") or DEFAULT_LAYERS,
        lstm_units=int(options.get("feature_bilstm_lstm_units") or DEFAULT_LSTM_UNITS),
        dropout=context.dropout if dropout is None else float(dropout),
        seed=context.seed,
        name="feature_bilstm")
    head.check_depth(context.num_layers)
    return head


def define_flags(flag_values):
    """Defines the head's absl flags on `flag_values` (for the kerasbert_define_flags hook)."""
    flags.DEFINE_enum(
        "feature_bilstm_layers", DEFAULT_LAYERS, LAYER_CHOICES,
        "Which frozen BERT layers feed the feature_bilstm head, as in the BERT paper's "
        "feature-based table: the embeddings, the second-to-last or last hidden layer, a "
        "learned weighted sum of the last four or of all layers, or the last four "
        "concatenated (the paper's best).",
        flag_values=flag_values)
    flags.DEFINE_integer(
        "feature_bilstm_lstm_units", DEFAULT_LSTM_UNITS,
        "Units per direction of each of the feature_bilstm head's two BiLSTM layers (the "
        "paper uses 768).",
        lower_bound=1, flag_values=flag_values)
    flags.DEFINE_float(
        "feature_bilstm_dropout", None,
        "Dropout rate on the feature_bilstm head's BiLSTM inputs and outputs; when unset, the "
        "encoder's own dropout rate.",
        lower_bound=0.0, upper_bound=1.0, flag_values=flag_values)


# ---- feature caching -------------------------------------------------------------------------


def _cache_key(backbone, inputs, indices, dtype) -> str:
    """sha256 of everything the features depend on: weights, input ids, layers, dtype."""
    h = hashlib.sha256(f"v1 {indices} {np.dtype(dtype).name}".encode())
    for weight in backbone.weights:
        h.update(weight.path.encode())
        h.update(np.ascontiguousarray(keras.ops.convert_to_numpy(weight)).tobytes())
    for name in sorted(inputs):
        h.update(name.encode())
        h.update(np.ascontiguousarray(inputs[name], np.int32).tobytes())
    return h.hexdigest()


_ENCODERS = weakref.WeakKeyDictionary()  # backbone -> {layer indices: traced function}


def _encoder(backbone, indices):
    """A traced function: int32 inputs -> the chosen layers [b, k, seq, H]. One per backbone
    and layer choice, so the train, dev and test splits share one trace."""

    per_backbone = _ENCODERS.setdefault(backbone, {})
    if indices not in per_backbone:
        model = all_layer_outputs_model(backbone)
        spec = {k: tf.TensorSpec([None, None], tf.int32) for k in INPUT_NAMES}

        @tf.function(input_signature=[spec])
        def encode(batch):
            outputs = model(batch, training=False)
            return tf.stack([outputs[i] for i in indices], axis=1)

        per_backbone[indices] = encode
    return per_backbone[indices]


def compute_layer_features(backbone, inputs, layers: str, batch_size: int = 64,
                           cache_dir: str | None = None, dtype="float16") -> np.ndarray:
    """The frozen encoder's chosen layers for a whole split: [n, k, seq, H] in `dtype`.

    `inputs`: token_ids / segment_ids / padding_mask int arrays [n, seq]. Only the k layers
    that `layers` reads are kept, so the head's `layer_features` input is this array's rows.
    float16 halves memory and disk (BERT activations are O(1)-O(10), well within its range;
    the head casts back). With `cache_dir`, the array is saved as `<layers>-<key>.npy`, the key
    a sha256 of the weights, the inputs, the layers and the dtype, and later calls with the
    same key memory-map it instead of running the encoder. Size: n·k·seq·H·bytes, e.g. CoNLL
    train at seq 128 with BERT-base and concat_last_four in float16: 14k·4·128·768·2 ≈ 11 GB.
    """
    indices = layer_indices(layers, len(backbone.transformer_layers))
    dtype = np.dtype(dtype)
    n, seq = np.shape(inputs["token_ids"])
    shape = (n, len(indices), seq, backbone.hidden_dim)
    path = None
    if cache_dir is not None:
        key = _cache_key(backbone, inputs, indices, dtype)
        path = os.path.join(cache_dir, f"{layers}-{key[:24]}.npy")
        if os.path.exists(path):
            log.info("feature cache hit: %s", path)
            return np.load(path, mmap_mode="r")
        os.makedirs(cache_dir, exist_ok=True)
        tmp = f"{path}.tmp-{os.getpid()}"
        out = np.lib.format.open_memmap(tmp, mode="w+", dtype=dtype, shape=shape)
    else:
        out = np.zeros(shape, dtype)

    encode = _encoder(backbone, indices)
    lengths = np.asarray(inputs["padding_mask"]).sum(-1)
    for start in range(0, n, batch_size):
        stop = min(start + batch_size, n)
        width = max(int(lengths[start:stop].max()), 1)  # trim all-padding columns (faster)
        batch = {k: tf.constant(np.asarray(inputs[k][start:stop, :width], np.int32))
                 for k in INPUT_NAMES}
        out[start:stop, :, :width] = encode(batch).numpy().astype(dtype)
    if path is None:
        return out
    out.flush()
    del out
    os.replace(tmp, path)
    log.info("feature cache written: %s (%.1f MB)", path, os.path.getsize(path) / 2**20)
    return np.load(path, mmap_mode="r")


def attach_cached_features(model, features, cache_dir):
    """Adds `layer_features` (the frozen encoder's chosen layers, cached in `cache_dir`) to
    the inputs of every split, so the model skips the encoder (kerasbert/model/task_model.py).

    InputError when the model's head does not read cached layers or trains the encoder.
    """
    head = model.head
    if not hasattr(head, "layers_choice") or model.head_trains_backbone:
        raise InputError(f"--feature_cache_dir={cache_dir}: the {head.name} head does not read "
                         "cached encoder layers; it serves feature-based heads on a frozen "
                         "encoder (--head=feature_bilstm, or --head=bilstm_crf "
                         "--bilstm_crf_frozen)")
    for split in features.values():
        split.inputs["layer_features"] = compute_layer_features(
            model.backbone, split.inputs, head.layers_choice, cache_dir=cache_dir)
