"""Parameter-efficient fine-tuning of the encoder: LoRA and BitFit.

    --lora_rank=r --lora_alpha=a --lora_targets=query_value|attention|attention_ffn
    --trainable_encoder=bitfit

LoRA (Hu et al. 2021) is Keras' own: `EinsumDense.enable_lora` / `Dense.enable_lora` add
factors A (initialised He-uniform) and B (zeros, so training starts from the encoder
itself) and compute the kernel as W + (alpha/r)·A·B, with W frozen. Keras factors an
attention kernel of shape (d, heads, head_dim) as A (d, heads, r) · B (r, head_dim): per
head a rank-r update, B shared by the heads, d·heads·r + r·head_dim parameters (not the
paper's 2·r·d, which factors the flattened d×d matrix); the attention output kernel
(heads, head_dim, d) and the feed-forward kernels get the paper's d_in·r + r·d_out.
Keras saves a LoRA layer with the update merged into its kernel and no factors, so
`model.weights.h5`, `encoder/` and every export made from them are plain encoders.

BitFit (Ben Zaken et al. 2022) trains the encoder's biases and LayerNorm scales and
offsets only.

Either way the head trains in full; the frozen phase (--frozen_epochs) still trains the
head alone first, so `--frozen_epochs=N --lora_rank=r` is stack-and-LoRA.
"""

import keras

from kerasbert.errors import InputError

# --lora_targets -> the kernels adapted in every transformer layer
LORA_TARGETS = {
    "query_value": ("query", "value"),
    "attention": ("query", "key", "value", "attention_output"),
    "attention_ffn": ("query", "key", "value", "attention_output", "ffn_intermediate",
                      "ffn_output"),
}


def _kernel_layers(transformer_layer):
    """{target name: the Dense / EinsumDense layer holding that kernel} of one keras-hub
    TransformerEncoder."""
    attention = transformer_layer._self_attention_layer
    return {"query": attention.query_dense, "key": attention.key_dense,
            "value": attention.value_dense, "attention_output": attention.output_dense,
            "ffn_intermediate": transformer_layer._feedforward_intermediate_dense,
            "ffn_output": transformer_layer._feedforward_output_dense}


def lora_layers(backbone, targets):
    """The layers `--lora_targets=targets` adapts, layer by layer in target order."""
    return [_kernel_layers(layer)[name] for layer in backbone.transformer_layers
            for name in LORA_TARGETS[targets]]


def enable_lora(backbone, rank, alpha=None, targets="query_value", seed=0):
    """Adds LoRA factors (Keras' enable_lora) to the targeted kernels; returns the factor
    variables. Each A gets its own seeded initializer, so a seed gives the same factors
    whatever else drew random numbers before."""
    factors = []
    for i, layer in enumerate(lora_layers(backbone, targets)):
        layer.enable_lora(rank, lora_alpha=alpha,
                          a_initializer=keras.initializers.HeUniform(seed=seed + i))
        factors += [layer.lora_kernel_a, layer.lora_kernel_b]
    return factors


def bitfit_variables(backbone):
    """The encoder's biases and LayerNorm gammas and betas (BitFit's trained parameters)."""
    found = []
    for layer in backbone._flatten_layers(include_self=False):
        if isinstance(layer, keras.layers.LayerNormalization):
            found += [w for w in (layer.gamma, layer.beta) if w is not None]
        elif isinstance(layer, (keras.layers.Dense, keras.layers.EinsumDense)):
            if layer.bias is not None:
                found.append(layer.bias)
    return found


def describe(config):
    """One line for the run's log, or None for plain fine-tuning."""
    if config.lora_rank:
        alpha = config.lora_alpha if config.lora_alpha is not None else config.lora_rank
        return (f"LoRA rank {config.lora_rank}, alpha {alpha:g} on "
                f"{', '.join(LORA_TARGETS[config.lora_targets])} kernels")
    if config.trainable_encoder == "bitfit":
        return "BitFit: the encoder's biases and LayerNorm parameters"
    return None


def apply_strategy(model, config):
    """Sets what of `model`'s encoder the fine-tune phase trains (--lora_rank,
    --trainable_encoder); call it under the strategy's scope, before the optimizers exist
    (LoRA adds variables). Returns the encoder variables that will train (None: all)."""
    if not (config.lora_rank or config.trainable_encoder != "all"):
        return None
    if not model.head_trains_backbone:
        flag = "--lora_rank" if config.lora_rank else "--trainable_encoder"
        raise InputError(f"{flag}: the head {config.head} keeps the encoder frozen (a "
                         "feature-based head): there is nothing of the encoder to adapt")
    if config.lora_rank:
        trained = enable_lora(model.backbone, config.lora_rank, config.lora_alpha,
                              config.lora_targets, seed=config.seed)
    else:
        trained = bitfit_variables(model.backbone)
    model.train_only(trained)
    return trained


def has_lora(backbone):
    return any(getattr(layer, "lora_enabled", False)
               for layer in backbone._flatten_layers(include_self=False))
