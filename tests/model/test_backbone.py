"""BertEncoder's activation/epsilon overrides, all-layer outputs, model sizes."""

import keras
import keras_hub
import numpy as np
import pytest
from scipy.special import erf

from kerasbert.errors import InputError
from kerasbert.model.backbone import MODEL_SIZES
from kerasbert.model.backbone import BertEncoder
from kerasbert.model.backbone import all_layer_outputs_model
from kerasbert.model.backbone import parse_model_size
from kerasbert.model.backbone import random_backbone

ARCH = dict(vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32, max_sequence_length=12)


def inputs():
    return {
        "token_ids": np.array([[2, 7, 8, 9, 3, 11, 3, 0], [2, 5, 3, 6, 3, 0, 0, 0]], "int32"),
        "segment_ids": np.array([[0, 0, 0, 0, 0, 1, 1, 0], [0, 0, 0, 1, 1, 0, 0, 0]], "int32"),
        "padding_mask": np.array([[1] * 7 + [0], [1] * 5 + [0] * 3], "int32"),
    }


def sequence(model):
    return np.asarray(model(inputs(), training=False)["sequence_output"])


def scaled_up(model, factor=20.0):
    """Scales feed-forward kernels so pre-activations spread over [-3, 3],
    where exact and tanh GELU differ visibly, and the differences reach the
    output instead of vanishing under BERT's small initial weights."""
    for layer in model.transformer_layers:
        for dense in (layer._feedforward_intermediate_dense, layer._feedforward_output_dense):
            dense.kernel.assign(dense.kernel * factor)
    return model


def test_activation_override_takes_effect():
    stock = scaled_up(keras_hub.models.BertBackbone(**ARCH))
    weights = stock.get_weights()
    encoders = {}
    for act in ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu"):
        encoders[act] = BertEncoder(hidden_act=act, **ARCH)
        encoders[act].set_weights(weights)
    # keras-hub's stock BERT is the tanh form; the erf form differs from it.
    np.testing.assert_allclose(sequence(encoders["gelu_new"]), sequence(stock), atol=1e-6)
    np.testing.assert_allclose(sequence(encoders["gelu_pytorch_tanh"]), sequence(stock), atol=1e-6)
    assert np.abs(sequence(encoders["gelu"]) - sequence(stock)).max() > 1e-4
    assert np.abs(sequence(encoders["relu"]) - sequence(stock)).max() > 1e-2

    # The Dense layer itself applies exact erf GELU.
    x = np.random.default_rng(0).normal(size=(3, 16)).astype("float32")
    dense = encoders["gelu"].transformer_layers[0]._feedforward_intermediate_dense
    pre = x @ np.asarray(dense.kernel) + np.asarray(dense.bias)
    np.testing.assert_allclose(np.asarray(dense(x)), 0.5 * pre * (1 + erf(pre / np.sqrt(2))), atol=1e-5)
    layer_config = encoders["gelu"].transformer_layers[0].get_config()
    assert layer_config["activation"] == "gelu"


def test_layer_norm_epsilon_override():
    default = BertEncoder(**ARCH)
    loose = BertEncoder(layer_norm_eps=1e-2, **ARCH)
    loose.set_weights(default.get_weights())
    norms = [layer for layer in loose._flatten_layers() if isinstance(layer, keras.layers.LayerNormalization)]
    assert len(norms) == 1 + 2 * ARCH["num_layers"]
    assert all(layer.epsilon == 1e-2 for layer in norms)
    # keras-hub's own value is BERT's 1e-12.
    assert default.embeddings_layer_norm.epsilon == 1e-12
    assert np.abs(sequence(loose) - sequence(default)).max() > 1e-3


def test_config_round_trip_and_serialization():
    encoder = BertEncoder(hidden_act="gelu_new", layer_norm_eps=1e-6, dropout=0.0, **ARCH)
    config = encoder.get_config()
    assert config["hidden_act"] == "gelu_new" and config["layer_norm_eps"] == 1e-6
    clone = BertEncoder.from_config(config)
    assert clone.get_config() == config
    revived = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(encoder))
    assert type(revived) is BertEncoder and revived.hidden_act == "gelu_new"
    with pytest.raises(InputError, match="hidden_act 'swish'.*gelu"):
        BertEncoder(hidden_act="swish", **ARCH)


def test_all_layer_outputs_model():
    encoder = random_backbone("2/16/2", 50, max_position=12, seed=0)
    model = all_layer_outputs_model(encoder)
    assert sorted(i.name for i in model.inputs) == sorted(i.name for i in encoder.inputs)
    assert sorted(i.name for i in model.inputs) == ["padding_mask", "segment_ids", "token_ids"]
    assert all(i.dtype == "int32" for i in model.inputs)
    outs = [np.asarray(o) for o in model(inputs(), training=False)]
    assert len(outs) == 3 and all(o.shape == (2, 8, 16) for o in outs)
    np.testing.assert_allclose(outs[-1], sequence(encoder), atol=1e-6)
    # Each entry feeds the next layer: the list is the chain, in order.
    mask = inputs()["padding_mask"]
    for i, layer in enumerate(encoder.transformer_layers):
        np.testing.assert_allclose(np.asarray(layer(outs[i], padding_mask=mask)), outs[i + 1], atol=1e-6)
    # Entry 0 is the layer-normalised embeddings (unit scale, zero-ish mean: gamma=1, beta=0).
    np.testing.assert_allclose(outs[0].mean(-1), 0.0, atol=1e-5)
    # The model shares the backbone's weights.
    assert len(model.weights) == len(encoder.weights) - 2  # all but the pooler


def test_model_sizes():
    assert parse_model_size("base") == (12, 768, 12)
    assert parse_model_size(" Tiny ") == MODEL_SIZES["tiny"]
    assert parse_model_size("2/32/2") == (2, 32, 2)
    for bad in ("huge", "2/32", "2/x/2", "0/32/2", "2/30/4"):
        with pytest.raises(InputError, match=r"--model_size.*tiny, mini, small, medium, base, large"):
            parse_model_size(bad)


def test_random_backbone():
    encoder = random_backbone("2/32/2", 60, max_position=16, dropout=0.2, seed=7)
    assert encoder.intermediate_dim == 128 and encoder.hidden_act == "gelu" and encoder.dropout == 0.2
    same = random_backbone("2/32/2", 60, max_position=16, dropout=0.2, seed=7)
    other = random_backbone("2/32/2", 60, max_position=16, dropout=0.2, seed=8)
    for a, b, c in zip(encoder.get_weights(), same.get_weights(), other.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert any(not np.array_equal(a, c) for a, c in zip(encoder.get_weights(), other.get_weights()))
    embeddings = np.asarray(encoder.token_embedding.embeddings)
    assert np.abs(embeddings).max() <= 0.04 and 0.01 < embeddings.std() < 0.02
