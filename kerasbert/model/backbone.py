"""The BERT encoder used throughout kerasbert, plus model-size helpers.

`BertEncoder` is keras-hub's `BertBackbone` with two knobs that checkpoints
declare and keras-hub hard-codes: the feed-forward activation (`hidden_act`)
and the layer-norm epsilon (`layer_norm_eps`). Everything else (layer names,
weights, inputs, outputs, presets) is exactly keras-hub's, so keras-hub tasks
and tools keep working on it.

`causal=True` makes every self-attention left-to-right (position i attends to
positions <= i only): the "LTR" encoder of BERT's ablations (section 5.1). It
is part of the config, so a saved causal encoder stays causal when reloaded
for fine-tuning or export.
"""

import keras
import keras_hub
import numpy as np
from keras import ops
from keras_hub.layers import TransformerEncoder

from kerasbert.errors import InputError


@keras.saving.register_keras_serializable(package="kerasbert")
def gelu_tanh(x):
    """GELU with the tanh approximation (HF "gelu_new", keras-hub's BERT)."""
    return keras.activations.gelu(x, approximate=True)


# HF `hidden_act` names -> activation. HF "gelu" is the exact erf form; the
# tanh forms differ by up to ~1e-3 per unit, enough to matter for parity.
HIDDEN_ACTIVATIONS = {
    "gelu": keras.activations.gelu,  # approximate=False by default: erf.
    "gelu_new": gelu_tanh,
    "gelu_pytorch_tanh": gelu_tanh,
    "relu": keras.activations.relu,
}

# BERT's official L/H/A sizes (google-research/bert README); I = 4H.
MODEL_SIZES = {
    "tiny": (2, 128, 2),
    "mini": (4, 256, 4),
    "small": (4, 512, 8),
    "medium": (8, 512, 8),
    "base": (12, 768, 12),
    "large": (24, 1024, 16),
}

INPUT_NAMES = ("token_ids", "segment_ids", "padding_mask")


def hidden_activation(hidden_act):
    """Returns the activation function for an HF `hidden_act` name."""
    if hidden_act not in HIDDEN_ACTIVATIONS:
        raise InputError(
            f"unsupported hidden_act {hidden_act!r}; "
            f"supported: {', '.join(sorted(HIDDEN_ACTIVATIONS))}"
        )
    return HIDDEN_ACTIVATIONS[hidden_act]


@keras.saving.register_keras_serializable(package="kerasbert")
class CausalTransformerEncoder(TransformerEncoder):
    """keras-hub's TransformerEncoder that also masks attention to later positions.

    The causal mask is merged (logical and) with whatever padding or attention mask
    the caller passes, so padding still works as in the bidirectional encoder.
    """

    def call(self, inputs, padding_mask=None, attention_mask=None, **kwargs):
        length = ops.shape(inputs)[1]
        positions = ops.arange(length)
        causal = ops.cast(positions[:, None] >= positions[None, :], "int32")
        causal = ops.broadcast_to(causal[None], (ops.shape(inputs)[0], length, length))
        if attention_mask is not None:
            causal = ops.minimum(causal, ops.cast(attention_mask, "int32"))
        return super().call(inputs, padding_mask=padding_mask, attention_mask=causal, **kwargs)


@keras.saving.register_keras_serializable(package="kerasbert")
class BertEncoder(keras_hub.models.BertBackbone):
    """keras-hub's BERT backbone with a configurable activation and epsilon.

    Args:
        hidden_act: str. The checkpoint's feed-forward activation: "gelu"
            (exact, erf), "gelu_new" / "gelu_pytorch_tanh" (tanh
            approximation, what plain keras-hub BERT uses) or "relu".
        layer_norm_eps: float. Epsilon of every LayerNormalization. keras-hub
            fixes 1e-12, which is BERT's own value; other checkpoints may
            declare another.
        causal: bool. Left-to-right self-attention in every layer (an LTR
            language model's encoder); False is BERT's bidirectional encoder.
        Other args: as `keras_hub.models.BertBackbone`.
    """

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_heads,
        hidden_dim,
        intermediate_dim,
        dropout=0.1,
        max_sequence_length=512,
        num_segments=2,
        hidden_act="gelu",
        layer_norm_eps=1e-12,
        causal=False,
        dtype=None,
        **kwargs,
    ):
        activation = hidden_activation(hidden_act)
        super().__init__(
            vocabulary_size=vocabulary_size,
            num_layers=num_layers,
            num_heads=num_heads,
            hidden_dim=hidden_dim,
            intermediate_dim=intermediate_dim,
            dropout=dropout,
            max_sequence_length=max_sequence_length,
            num_segments=num_segments,
            dtype=dtype,
            **kwargs,
        )
        # The sublayers were built while tracing the functional graph above.
        # Dense and LayerNormalization read `activation` / `epsilon` at call
        # time, so overriding the attributes changes the computation; the
        # encoder-level attributes keep each layer's get_config() truthful.
        self.embeddings_layer_norm.epsilon = layer_norm_eps
        for layer in self.transformer_layers:
            layer.activation = activation
            layer._feedforward_intermediate_dense.activation = activation
            layer.layer_norm_epsilon = layer_norm_eps
            layer._self_attention_layer_norm.epsilon = layer_norm_eps
            layer._feedforward_layer_norm.epsilon = layer_norm_eps
            if causal:
                # The functional graph calls each layer at run time, so switching the
                # class (same weights, same names; only `call` differs) makes every
                # use of the encoder, including `all_layer_outputs_model`, causal.
                layer.__class__ = CausalTransformerEncoder
        self.hidden_act = hidden_act
        self.layer_norm_eps = layer_norm_eps
        self.causal = bool(causal)

    def get_config(self):
        config = super().get_config()
        config.update(
            {"hidden_act": self.hidden_act, "layer_norm_eps": self.layer_norm_eps}
        )
        if self.causal:  # absent when False: configs written before stay identical
            config["causal"] = True
        return config


# keras-hub finds a preset's tokenizer, preprocessor and task classes by their
# `backbone_cls`: a preset whose backbone is BertEncoder needs these for
# `keras_hub.models.BertTokenizer / BertTextClassifier.from_preset` to load it
# (kerasbert/export/checkpoint.py writes them). They add nothing else.
@keras.saving.register_keras_serializable(package="kerasbert")
class BertEncoderTokenizer(keras_hub.models.BertTokenizer):
    backbone_cls = BertEncoder


@keras.saving.register_keras_serializable(package="kerasbert")
class BertEncoderTextClassifierPreprocessor(keras_hub.models.BertTextClassifierPreprocessor):
    backbone_cls = BertEncoder
    tokenizer_cls = BertEncoderTokenizer


@keras.saving.register_keras_serializable(package="kerasbert")
class BertEncoderTextClassifier(keras_hub.models.BertTextClassifier):
    backbone_cls = BertEncoder
    preprocessor_cls = BertEncoderTextClassifierPreprocessor


def all_layer_outputs_model(backbone):
    """A model giving the embeddings and every transformer layer's output.

    Shares the backbone's layers (and so its weights). Inputs are the
    backbone's three int32 inputs; the output is a list of L + 1 tensors
    `[embeddings, layer_0, ..., layer_{L-1}]`, each (batch, seq, hidden). The
    embeddings entry is taken after the embeddings layer norm (dropout is
    identity at inference), as in BERT's feature-based experiments.
    """
    inputs = {
        name: keras.Input(shape=(None,), dtype="int32", name=name)
        for name in INPUT_NAMES
    }
    # Re-run the backbone's own layers on fresh inputs; this mirrors
    # BertBackbone's graph and avoids depending on node bookkeeping.
    tokens = backbone.token_embedding(inputs["token_ids"])
    positions = backbone.position_embedding(tokens)
    segments = backbone.segment_embedding(inputs["segment_ids"])
    x = backbone.embeddings_add((tokens, positions, segments))
    x = backbone.embeddings_layer_norm(x)
    outputs = [x]
    x = backbone.embeddings_dropout(x)
    for layer in backbone.transformer_layers:
        x = layer(x, padding_mask=inputs["padding_mask"])
        outputs.append(x)
    return keras.Model(inputs, outputs, name=f"{backbone.name}_all_layers")


def parse_model_size(spec):
    """Parses `--model_size`: a name in MODEL_SIZES or "L/H/A" (e.g. "2/32/2").

    Returns:
        (num_layers, hidden_dim, num_heads).
    """
    valid = f"valid values: {', '.join(MODEL_SIZES)} or L/H/A such as 4/256/4"
    text = str(spec).strip().lower()
    if text in MODEL_SIZES:
        return MODEL_SIZES[text]
    parts = text.split("/")
    try:
        sizes = tuple(int(p) for p in parts)
    except ValueError:
        sizes = ()
    if len(sizes) != 3 or min(sizes) <= 0:
        raise InputError(f"--model_size: {spec!r} is not a model size; {valid}")
    num_layers, hidden, heads = sizes
    if hidden % heads:
        raise InputError(
            f"--model_size: hidden size {hidden} is not divisible by "
            f"{heads} attention heads; {valid}"
        )
    return sizes


def random_backbone(
    model_size, vocab_size, max_position=512, dropout=0.1, seed=None, causal=False
):
    """A randomly initialised `BertEncoder` of a given `--model_size`.

    Intermediate size is 4H and the activation exact GELU, as in BERT. With a
    `seed`, initial weights are reproducible without touching global RNGs.
    """
    num_layers, hidden, heads = parse_model_size(model_size)
    backbone = BertEncoder(
        vocabulary_size=vocab_size,
        num_layers=num_layers,
        num_heads=heads,
        hidden_dim=hidden,
        intermediate_dim=4 * hidden,
        dropout=dropout,
        max_sequence_length=max_position,
        hidden_act="gelu",
        causal=causal,
    )
    if seed is not None:
        _reinitialize(backbone.weights, np.random.default_rng(seed))
    return backbone


def reinit_top_layers(backbone, num_layers, seed, flag="--reinit_top_layers"):
    """Re-initialises the top `num_layers` transformer layers and the pooler as BERT's
    pre-training initialised them (Zhang et al. 2021, "Revisiting Few-sample BERT
    Fine-tuning"): kernels N(0, 0.02) truncated at 2 sigma (initializer_range), biases
    0, LayerNorm gamma 1 and beta 0; from a generator of its own seeded by `seed` (the
    run's head_init_seed: part of the initialisation). Lower layers and embeddings stay."""
    layers = getattr(backbone, "transformer_layers", None)
    pooler = getattr(backbone, "pooled_dense", None)
    if layers is None or pooler is None:
        raise InputError(f"{flag}={num_layers}: the encoder ({type(backbone).__name__}) has "
                         "no BERT transformer layers and pooler to re-initialise")
    if num_layers > len(layers):
        raise InputError(f"{flag}={num_layers}: the encoder has only {len(layers)} "
                         "transformer layers")
    if num_layers == 0:
        return
    weights = [w for layer in layers[len(layers) - num_layers:] for w in layer.weights]
    # Its own stream: a random encoder drew its weights from default_rng(seed) itself.
    _reinitialize(weights + list(pooler.weights), np.random.default_rng([seed, 1]))


def _reinitialize(weights, rng):
    """BERT's init from a private RNG: N(0, 0.02) truncated at 2 sigma for
    kernels and embeddings, zeros for biases, ones for LayerNorm gammas."""
    for weight in weights:
        name = weight.path.rsplit("/", 1)[-1]
        shape = tuple(weight.shape)
        if name == "gamma":
            value = np.ones(shape)
        elif name in ("beta", "bias"):
            value = np.zeros(shape)
        else:
            value = rng.normal(0.0, 0.02, size=shape)
            outside = np.abs(value) > 0.04
            while outside.any():
                value[outside] = rng.normal(0.0, 0.02, size=outside.sum())
                outside = np.abs(value) > 0.04
        weight.assign(value.astype(weight.dtype))
