"""A tiny random BERT checkpoint in HuggingFace's layout, and an independent float64
numpy BERT that computes what HuggingFace's BertModel does on it: the references of the
checkpoint tests (tests/model/test_encoders.py, tests/test_export_checkpoint.py) and of
the `tiny_checkpoint` fixture (tests/conftest.py)."""

import json
import os

import numpy as np
from safetensors.numpy import save_file
from scipy.special import erf

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


# --- an independent numpy BERT (HF layout, float64) ----------------------------------------


def gelu_exact(x):
    return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))


ACTIVATIONS = {"gelu": gelu_exact, "gelu_new": gelu_tanh, "relu": lambda x: np.maximum(x, 0)}


def reference_bert(w, config, inputs, prefix=""):
    """Returns (sequence_output, pooled_output) of BERT as HF computes it."""
    w = {k[len(prefix):]: v.astype(np.float64) for k, v in w.items() if k.startswith(prefix)}
    eps, act = config["layer_norm_eps"], ACTIVATIONS[config["hidden_act"]]
    heads = config["num_attention_heads"]

    def dense(x, name):
        return x @ w[name + ".weight"].T + w[name + ".bias"]

    def layer_norm(x, name):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + eps) * w[name + ".weight"] + w[name + ".bias"]

    ids, segments, mask = inputs["token_ids"], inputs["segment_ids"], inputs["padding_mask"]
    batch, length = ids.shape
    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][:length][None]
        + w["embeddings.token_type_embeddings.weight"][segments]
    )
    x = layer_norm(x, "embeddings.LayerNorm")
    additive_mask = (1.0 - mask[:, None, None, :]) * -10000.0
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}."

        def split(t):
            return t.reshape(batch, length, heads, -1).transpose(0, 2, 1, 3)

        q, k, v = (split(dense(x, p + "attention.self." + n)) for n in ("query", "key", "value"))
        scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1]) + additive_mask
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, length, -1)
        x = layer_norm(dense(context, p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
        h = act(dense(x, p + "intermediate.dense"))
        x = layer_norm(dense(h, p + "output.dense") + x, p + "output.LayerNorm")
    pooled = np.tanh(dense(x[:, 0], "pooler.dense"))
    return x, pooled


# --- a tiny random HF checkpoint --------------------------------------------------------------


def hf_weights(seed=0, hidden=32, layers=2, inner=64, vocab=100, positions=16, **_):
    """Random BERT weights in HF naming, with non-trivial biases and LayerNorms."""
    rng = np.random.default_rng(seed)
    w = {}

    def add(name, *shape, scale=0.2, center=0.0):
        w[name] = (center + scale * rng.standard_normal(shape)).astype(np.float32)

    def linear(name, n_in, n_out):
        add(name + ".weight", n_out, n_in)
        add(name + ".bias", n_out, scale=0.1)

    def layer_norm(name):
        add(name + ".weight", hidden, scale=0.1, center=1.0)
        add(name + ".bias", hidden, scale=0.1)

    add("embeddings.word_embeddings.weight", vocab, hidden, scale=1.0)
    add("embeddings.position_embeddings.weight", positions, hidden, scale=0.5)
    add("embeddings.token_type_embeddings.weight", 2, hidden, scale=0.5)
    layer_norm("embeddings.LayerNorm")
    for i in range(layers):
        p = f"encoder.layer.{i}."
        for n in ("query", "key", "value"):
            linear(p + "attention.self." + n, hidden, hidden)
        linear(p + "attention.output.dense", hidden, hidden)
        layer_norm(p + "attention.output.LayerNorm")
        linear(p + "intermediate.dense", hidden, inner)
        linear(p + "output.dense", inner, hidden)
        layer_norm(p + "output.LayerNorm")
    linear("pooler.dense", hidden, hidden)
    return w


def hf_config(hidden_act="gelu", eps=1e-12, hidden=32, layers=2, heads=2, inner=64, vocab=100, positions=16):
    return {
        "architectures": ["BertModel"],
        "model_type": "bert",
        "vocab_size": vocab,
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "intermediate_size": inner,
        "max_position_embeddings": positions,
        "type_vocab_size": 2,
        "hidden_act": hidden_act,
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "layer_norm_eps": eps,
    }


def write_hf(folder, weights, config, cased=False):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f)
    words = [f"{'Word' if cased and i % 2 else 'word'}{i}" for i in range(config["vocab_size"] - len(SPECIALS))]
    with open(os.path.join(folder, "vocab.txt"), "w") as f:
        f.write("\n".join(SPECIALS + words) + "\n")
    save_file(weights, os.path.join(folder, "model.safetensors"))
    return str(folder)
