"""How far each layer moves in fine-tuning, and what rolling layers back costs.

Groups: `embeddings` (token, position, segment tables and their LayerNorm), `layer_<i>`
(each transformer layer), `pooler`, `head` (the task head: no pre-trained value, so it is
never rolled back).

Filters (`filter_axes`, for Li et al.'s filter normalisation and the ε-sharpness ball): a
filter is what one output unit reads, as a convolution's filter is in Li et al.
- Dense kernels [in, out]: one column per output unit (the norm runs over axis 0);
- EinsumDense kernels (attention): the kernel's axes that reach the output index the
  filters, the contracted ones span them: query/key/value [H, heads, head_dim] → one
  filter per (head, dim), over axis 0; attention_output [heads, head_dim, H] → one per
  output unit, over axes 0 and 1;
- embedding tables [rows, H] (token, position, segment): one filter per row (a token's
  vector, as Li et al.'s code treats an embedding weight);
- any other matrix (a plugin head's own layers): Keras' convention, the last axis indexes
  the output units;
- biases and LayerNorm gains/offsets (`directions.is_matrix` false): None, not a filter.
"""

import re

import numpy as np

from kerasbert.landscape.directions import is_matrix
from kerasbert.training.trajectory import model_weights

EMBEDDING_LAYERS = ("token_embedding", "position_embedding", "segment_embedding",
                    "embeddings_layer_norm")


def weight_groups(model):
    """The group of each weight of `trajectory.model_weights(model)`, in order."""
    head = {id(w) for w in model.head.weights}
    groups = []
    for w in model_weights(model):
        first = w.path.split("/", 1)[0]
        match = re.fullmatch(r"transformer_layer_(\d+)", first)
        if id(w) in head:
            groups.append("head")
        elif match:
            groups.append(f"layer_{int(match.group(1))}")
        elif first in EMBEDDING_LAYERS:
            groups.append("embeddings")
        elif first == "pooled_dense":
            groups.append("pooler")
        else:
            groups.append("other")
    return groups


def _owners(model):
    """{id(weight): the layer that creates it}. `_trainable_variables` and
    `_non_trainable_variables` are a layer's own weights (what Keras' `save_own_variables`
    writes), without those of its sub-layers."""
    owners = {}
    for layer in model._flatten_layers(include_self=True, recursive=True):
        for w in layer._trainable_variables + layer._non_trainable_variables:
            owners[id(w)] = layer
    return owners


def _einsum_contracted_axes(equation, ndim):
    """The kernel axes an EinsumDense equation ("abc,cde->abde") sums over, or None when
    the equation does not name the kernel's axes one letter each."""
    try:
        operands, output = equation.replace(" ", "").split("->")
        kernel = operands.split(",")[1]
    except (ValueError, IndexError):
        return None
    if "." in kernel or len(kernel) != ndim:
        return None
    return tuple(i for i, letter in enumerate(kernel) if letter not in output)


def filter_axes(model):
    """For each weight of `trajectory.model_weights(model)`, the axes one filter spans (the
    norm of a filter is taken over them), or None for biases and LayerNorm (module
    docstring)."""
    owners = _owners(model)
    axes = []
    for w in model_weights(model):
        shape, name = tuple(w.shape), w.path.rsplit("/", 1)[-1]
        if not is_matrix(w.path, shape):
            axes.append(None)
            continue
        layer = owners.get(id(w))
        contracted = None
        if name == "embeddings":
            contracted = tuple(range(1, len(shape)))
        elif layer is not None and isinstance(getattr(layer, "equation", None), str):
            contracted = _einsum_contracted_axes(layer.equation, len(shape))
        if not contracted:
            contracted = tuple(range(len(shape) - 1))
        axes.append(contracted)
    return axes


def group_order(groups):
    """embeddings, layer_0 … layer_{L-1}, pooler, head, other — those present."""
    layers = sorted({g for g in groups if g.startswith("layer_")}, key=lambda g: int(g[6:]))
    fixed = ["embeddings", *layers, "pooler", "head", "other"]
    return [g for g in fixed if g in set(groups)]


def relative_change(theta0, theta1, groups):
    """{group: ‖θ1ˡ − θ0ˡ‖ / ‖θ0ˡ‖}, plus the absolute norms, in `group_order`."""
    sums = {}
    for a, b, g in zip(theta0, theta1, groups, strict=True):
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        delta, base = sums.get(g, (0.0, 0.0))
        sums[g] = (delta + float(np.sum((b64 - a64) ** 2)), base + float(np.sum(a64 ** 2)))
    rows = []
    for g in group_order(groups):
        delta, base = sums[g]
        rows.append({"group": g, "change_norm": np.sqrt(delta), "start_norm": np.sqrt(base),
                     "relative_change": np.sqrt(delta) / np.sqrt(base) if base > 0 else np.nan})
    return rows


def rolled_back(theta1, theta0, groups, reset):
    """θ1 with the weights of the groups in `reset` set back to their θ0 values."""
    reset = set(reset)
    return [a if g in reset else b for a, b, g in zip(theta0, theta1, groups, strict=True)]


def rollback_plan(groups):
    """(label, groups to reset): none, each pre-trained group alone, the lowest k and the
    highest k transformer layers for k = 1 … L."""
    layers = [g for g in group_order(groups) if g.startswith("layer_")]
    plan = [("none", ())]
    plan += [(g, (g,)) for g in group_order(groups) if g not in ("head", "other")]
    plan += [(f"lowest_{k}", tuple(layers[:k])) for k in range(1, len(layers) + 1)]
    plan += [(f"highest_{k}", tuple(layers[-k:])) for k in range(1, len(layers) + 1)]
    return plan


def rollback(evaluator, theta0, theta1, groups):
    """Dev metrics of the fine-tuned model with each plan entry rolled back; the model is
    left at θ1."""
    rows = []
    for label, reset in rollback_plan(groups):
        evaluator.set_weights(rolled_back(theta1, theta0, groups, reset))
        rows.append({"rollback": label, "groups": " ".join(reset), **evaluator.evaluate()})
    evaluator.set_weights(theta1)
    return rows
