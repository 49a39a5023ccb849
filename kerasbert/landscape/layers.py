"""How far each layer moves in fine-tuning, and what rolling layers back costs.

Groups: `embeddings` (token, position, segment tables and their LayerNorm), `layer_<i>`
(each transformer layer), `pooler`, `head` (the task head: no pre-trained value, so it is
never rolled back).
"""

import re

import numpy as np

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
