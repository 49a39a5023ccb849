"""Parameter-efficient fine-tuning of the encoder: LoRA and BitFit.

    --lora_rank=r --lora_alpha=a --lora_targets=query_value|attention|attention_ffn
    --trainable_encoder=bitfit

LoRA (Hu et al. 2021) is Keras' own `enable_lora`: factors A (initialised He-uniform) and
B (zeros, so training starts from the encoder itself), the kernel computed as
W + (alpha/r)·A·B with W frozen, and saving that writes the merged kernel and no factors
(so `model.weights.h5`, `encoder/` and every export made from them are plain encoders).
Keras factors a kernel over its last axis: right for the feed-forward kernels (d, 4d),
(4d, d) and the attention output (heads, head_dim, d), but a query/key/value kernel
(d, heads, head_dim) would get A (d, heads, r) · B (r, head_dim), a per-head update with
heads × the paper's parameters. `InputAxisLoRA` factors those over the input axis as the
paper does (the flattened d × d matrix): A (d, r) · B (r, heads, head_dim), 2·r·d
parameters; everything else about the layer stays Keras'.

BitFit (Ben Zaken et al. 2022) trains the encoder's biases and LayerNorm scales and
offsets only.

Either way the head trains in full; the frozen phase (--frozen_epochs) still trains the
head alone first, so `--frozen_epochs=N --lora_rank=r` is stack-and-LoRA.
"""

import keras
from keras import ops

from kerasbert.errors import InputError

# --lora_targets -> the kernels adapted in every transformer layer
LORA_TARGETS = {
    "query_value": ("query", "value"),
    "attention": ("query", "key", "value", "attention_output"),
    "attention_ffn": ("query", "key", "value", "attention_output", "ffn_intermediate",
                      "ffn_output"),
}


@keras.saving.register_keras_serializable(package="kerasbert")
class InputAxisLoRA(keras.layers.EinsumDense):
    """An attention projection (kernel (d, heads, head_dim)) with the LoRA paper's factors:
    A (d, r), B (r, heads, head_dim). A layer becomes one by a class switch (same weights,
    names and call); Keras' `kernel` property and saving then see the merged kernel.
    Float kernels only (no quantized LoRA)."""

    def enable_lora(self, rank, lora_alpha=None, a_initializer="he_uniform",
                    b_initializer="zeros"):
        if self.lora_enabled:
            raise ValueError("lora is already enabled. This can only be done once per layer.")
        if self.quantization_mode is not None:
            raise NotImplementedError("InputAxisLoRA: float kernels only")
        shape = tuple(self._kernel.shape)
        self._tracker.unlock()
        self.lora_kernel_a = self.add_weight(
            name="lora_kernel_a", shape=(shape[0], rank),
            initializer=keras.initializers.get(a_initializer), dtype="float32")
        self.lora_kernel_b = self.add_weight(
            name="lora_kernel_b", shape=(rank,) + shape[1:],
            initializer=keras.initializers.get(b_initializer), dtype="float32")
        self._kernel.trainable = False
        self._tracker.lock()
        self.lora_enabled = True
        self.lora_rank = rank
        self.lora_alpha = lora_alpha if lora_alpha is not None else rank

    @property
    def kernel(self):
        if not self.lora_enabled:
            return super().kernel
        update = ops.tensordot(self.lora_kernel_a, self.lora_kernel_b, axes=1)
        return ops.cast(ops.add(self._kernel, (self.lora_alpha / self.lora_rank) * update),
                        self.compute_dtype)


def _kernel_layers(transformer_layer):
    """{target name: the Dense / EinsumDense layer holding that kernel} of one keras-hub
    TransformerEncoder."""
    attention = transformer_layer._self_attention_layer
    return {"query": attention.query_dense, "key": attention.key_dense,
            "value": attention.value_dense, "attention_output": attention.output_dense,
            "ffn_intermediate": transformer_layer._feedforward_intermediate_dense,
            "ffn_output": transformer_layer._feedforward_output_dense}


PROJECTIONS = ("query", "key", "value")  # kernels (d, heads, head_dim): InputAxisLoRA


def _targets(backbone, targets):
    return [(name, _kernel_layers(layer)[name]) for layer in backbone.transformer_layers
            for name in LORA_TARGETS[targets]]


def lora_layers(backbone, targets):
    """The layers `--lora_targets=targets` adapts, layer by layer in target order."""
    return [layer for _, layer in _targets(backbone, targets)]


def enable_lora(backbone, rank, alpha=None, targets="query_value", seed=0):
    """Adds LoRA factors (Keras' enable_lora) to the targeted kernels; returns the factor
    variables. Each A gets its own seeded initializer, so a seed gives the same factors
    whatever else drew random numbers before."""
    factors = []
    for i, (name, layer) in enumerate(_targets(backbone, targets)):
        if name in PROJECTIONS:
            layer.__class__ = InputAxisLoRA
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
                              config.lora_targets, seed=config.seed_of("head_init"))
    else:
        trained = bitfit_variables(model.backbone)
    model.train_only(trained)
    return trained


def has_lora(backbone):
    return any(getattr(layer, "lora_enabled", False)
               for layer in backbone._flatten_layers(include_self=False))
