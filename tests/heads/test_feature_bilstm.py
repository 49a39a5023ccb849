"""The feature-based head: layer choices, scalar mix, training on frozen features, caching."""

import os

import keras
import keras_hub
import numpy as np
import pytest
import tensorflow as tf
from absl import flags

from kerasbert.errors import InputError
from kerasbert.heads import feature_bilstm
from kerasbert.heads.feature_bilstm import (
    LAYER_CHOICES,
    FeatureBiLSTM,
    ScalarMix,
    build_feature_bilstm,
    compute_layer_features,
    layer_indices,
)
from kerasbert.hookspecs import HeadContext
from kerasbert.model.backbone import all_layer_outputs_model
from kerasbert.tasks import base
from kerasbert.plugins import resolve_kind

# Tiny, but with 4 layers so that the "last four" choices exist.
TINY = dict(vocabulary_size=40, num_layers=4, num_heads=2, hidden_dim=32, intermediate_dim=64,
            max_sequence_length=16)


@pytest.fixture(scope="module")
def backbone():
    keras.utils.set_random_seed(0)
    return keras_hub.models.BertBackbone(**TINY)


@pytest.fixture(scope="module")
def data():
    """A tiny learnable tagging set: label = token id mod 3, padding and [CLS] ignored."""
    rng = np.random.default_rng(0)
    token_ids = rng.integers(1, 40, size=(8, 12)).astype("int32")
    lengths = rng.integers(4, 13, size=8)
    lengths[0] = 12
    mask = (np.arange(12)[None] < lengths[:, None]).astype("int32")
    token_ids *= mask
    labels = np.where(mask == 1, token_ids % 3, -1).astype("int32")
    labels[:, 0] = -1
    return {"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids),
            "padding_mask": mask}, labels


@pytest.fixture(scope="module")
def live(backbone, data):
    """What the model builder passes: every layer of the frozen encoder, run for inference."""
    inputs, _ = data
    return {"all_layers": all_layer_outputs_model(backbone)(inputs, training=False),
            "padding_mask": inputs["padding_mask"]}


def test_layer_indices_for_bert_base():
    # [embeddings, layer 1, ..., layer 12]: indices 0..12.
    assert layer_indices("embeddings", 12) == (0,)
    assert layer_indices("second_to_last", 12) == (11,)
    assert layer_indices("last", 12) == (12,)
    assert layer_indices("sum_last_four", 12) == (9, 10, 11, 12)
    assert layer_indices("concat_last_four", 12) == (9, 10, 11, 12)
    assert layer_indices("sum_all", 12) == tuple(range(13))
    with pytest.raises(InputError, match="concat_last_four needs an encoder with at least 4 "
                                         "transformer layers; this one has 2"):
        layer_indices("concat_last_four", 2)
    with pytest.raises(InputError, match="--feature_bilstm_layers=top: expected one of"):
        FeatureBiLSTM(9, layers="top")


def test_scalar_mix_is_softmax_weighted_and_scaled():
    x = np.random.default_rng(1).normal(size=(2, 2, 3, 4)).astype("float32")
    mix = ScalarMix()
    np.testing.assert_allclose(np.asarray(mix(x)), x.mean(1), atol=1e-6)  # starts as an average
    mix.scalars.assign([0.0, np.log(3.0)])  # softmax -> 1/4, 3/4
    mix.gamma.assign(2.0)
    np.testing.assert_allclose(np.asarray(mix(x)), 2.0 * (0.25 * x[:, 0] + 0.75 * x[:, 1]),
                               atol=1e-5)


@pytest.mark.parametrize("layers", LAYER_CHOICES)
def test_each_layer_choice_builds_and_learns(data, live, layers):
    _, labels = data
    features = live
    head = FeatureBiLSTM(3, layers=layers, lstm_units=8, dropout=0.0, seed=0)
    head({"all_layers": [a[:1, :2] for a in features["all_layers"]],  # builds (cheaply)
          "padding_mask": features["padding_mask"][:1, :2]})
    # The first LSTM reads H features, or 4H for the concatenation.
    width = 4 * 32 if layers == "concat_last_four" else 32
    assert head.bilstms[0].forward_layer.cell.kernel.shape == (width, 4 * 8)
    assert (head.mix is not None) == layers.startswith("sum_")
    optimizer = keras.optimizers.Adam(5e-2)
    variables = head.trainable_variables

    def step():  # eager: a few steps cost less than tracing the LSTM gradients (~5 s)
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(resolve_kind(base.TAGGING).per_example_loss(labels,
                                                          head(features, training=True)))
        optimizer.apply(tape.gradient(loss, variables), variables)
        return loss

    history = [float(step()) for _ in range(6)]
    assert all(b < a for a, b in zip(history, history[1:])), history
    assert history[-1] < 0.95 * history[0], history
    assert head(features).shape == (8, 12, 3)
    if head.mix is not None:  # the layer weights learn too
        assert np.abs(np.asarray(head.mix.scalars)).max() > 1e-3


def test_padding_does_not_change_real_positions(data, live):
    inputs, _ = data
    head = FeatureBiLSTM(3, layers="sum_all", lstm_units=8, seed=0)
    features = live
    out = np.asarray(head(features))
    noisy = dict(features, all_layers=[a + 5.0 * (1 - inputs["padding_mask"][..., None])
                                       for a in features["all_layers"]])
    real = inputs["padding_mask"] == 1
    np.testing.assert_allclose(np.asarray(head(noisy))[real], out[real], atol=1e-5)


@pytest.mark.parametrize("layers", ["second_to_last", "concat_last_four"])
def test_cached_features_give_the_live_outputs(backbone, data, live, layers, tmp_path):
    inputs, _ = data
    head = FeatureBiLSTM(3, layers=layers, lstm_units=8, seed=0)
    expected = np.asarray(head(live))
    real = inputs["padding_mask"] == 1
    k = len(layer_indices(layers, 4))

    exact = compute_layer_features(backbone, inputs, layers, batch_size=3, dtype="float32")
    assert exact.shape == (8, k, 12, 32) and exact.dtype == np.float32
    cached = np.asarray(head({"layer_features": exact, "padding_mask": inputs["padding_mask"]}))
    np.testing.assert_allclose(cached[real], expected[real], rtol=1e-5, atol=1e-6)

    half = compute_layer_features(backbone, inputs, layers, batch_size=3,
                                  cache_dir=str(tmp_path))
    assert half.dtype == np.float16 and os.listdir(tmp_path) == [os.path.basename(half.filename)]
    # float16 keeps 11 significant bits: relative error <= 2^-11 per feature.
    np.testing.assert_allclose(half.astype(np.float32), exact, rtol=2 ** -11, atol=1e-7)
    cached = np.asarray(head({"layer_features": half, "padding_mask": inputs["padding_mask"]}))
    scale = np.abs(expected[real]).max()
    np.testing.assert_allclose(cached[real], expected[real], atol=1e-2 * scale)


def test_cache_is_reused_and_keyed_by_weights_inputs_and_layers(backbone, data, tmp_path,
                                                                monkeypatch):
    inputs, _ = data
    first = compute_layer_features(backbone, inputs, "last", 4, cache_dir=str(tmp_path))

    def no_encoder(*args):
        raise AssertionError("the encoder ran although the features were cached")

    monkeypatch.setattr(feature_bilstm, "_encoder", no_encoder)
    again = compute_layer_features(backbone, inputs, "last", 4, cache_dir=str(tmp_path))
    assert again.filename == first.filename
    np.testing.assert_array_equal(again, first)
    monkeypatch.undo()

    other_inputs = dict(inputs, token_ids=np.roll(inputs["token_ids"], 1, axis=0))
    compute_layer_features(backbone, other_inputs, "last", 4, cache_dir=str(tmp_path))
    compute_layer_features(backbone, inputs, "last", 4, cache_dir=str(tmp_path), dtype="float32")
    assert len(os.listdir(tmp_path)) == 3
    keras.utils.set_random_seed(1)
    other = keras_hub.models.BertBackbone(**TINY)  # another checkpoint
    compute_layer_features(other, inputs, "last", 4, cache_dir=str(tmp_path))
    assert len(os.listdir(tmp_path)) == 4
    assert not any(".tmp" in name for name in os.listdir(tmp_path))


def test_flags_and_factory():
    values = flags.FlagValues()
    feature_bilstm.define_flags(values)
    values(["prog"])
    assert (values.feature_bilstm_layers, values.feature_bilstm_lstm_units,
            values.feature_bilstm_dropout) == ("concat_last_four", 768, None)
    assert "feature-based" in values["feature_bilstm_layers"].help
    for bad in ("--feature_bilstm_layers=top", "--feature_bilstm_lstm_units=0",
                "--feature_bilstm_dropout=1.5"):
        fresh = flags.FlagValues()
        feature_bilstm.define_flags(fresh)
        with pytest.raises(flags.IllegalFlagValueError):
            fresh(["prog", bad])

    context = HeadContext(kind=base.TAGGING, num_outputs=9, hidden_dim=32, dropout=0.1, seed=3,
                          options={"feature_bilstm_layers": "sum_all",
                                   "feature_bilstm_lstm_units": 16})
    head = build_feature_bilstm(context)
    assert (head.name, head.layers_choice, head.lstm_units, head.dropout, head.seed) == (
        "feature_bilstm", "sum_all", 16, 0.1, 3)
    assert head.needs_all_layers and not head.trains_backbone
    assert build_feature_bilstm(HeadContext(
        kind=base.TAGGING, num_outputs=9, hidden_dim=32, dropout=0.1,
        options={"feature_bilstm_dropout": 0.3})).dropout == 0.3
    clone = FeatureBiLSTM.from_config(head.get_config())
    assert (clone.layers_choice, clone.lstm_units, clone.num_outputs) == ("sum_all", 16, 9)


# --- --feature_cache_dir: training on cached layers ----------------------------------------

def _conll_run(tmp_path, name, **overrides):
    from kerasbert.config import RunConfig

    values = dict(task="conll2003", head="feature_bilstm", output_dir=str(tmp_path / name),
                  init_checkpoint="random", model_size="4/32/2", max_seq_length=32,
                  max_train_examples=16, max_eval_examples=8, train_batch_size=8,
                  num_train_epochs=2.0, learning_rate=1e-3, seed=7,
                  head_options={"feature_bilstm_layers": "concat_last_four",
                                "feature_bilstm_lstm_units": 8})
    return RunConfig(**{**values, **overrides})


def test_training_on_cached_layers_matches_the_live_encoder_and_reuses_the_cache(
        tmp_path, monkeypatch):
    from kerasbert.heads import feature_bilstm
    from kerasbert.io_utils import read_history
    from kerasbert.run import execute

    cache = tmp_path / "cache"
    live = execute(_conll_run(tmp_path, "live"))
    cached = execute(_conll_run(tmp_path, "cached", feature_cache_dir=str(cache)))
    # One float16 array per split (train, valid), keyed by weights, inputs and layers.
    assert len(list(cache.glob("concat_last_four-*.npy"))) == 2
    live_history = read_history(str(tmp_path / "live" / "history.csv"))
    cached_history = read_history(str(tmp_path / "cached" / "history.csv"))
    # The same training up to the float16 rounding of the cached activations.
    for a, b in zip(live_history, cached_history):
        assert float(b["train_loss"]) == pytest.approx(float(a["train_loss"]), rel=1e-2)
    assert cached["f1"] == pytest.approx(live["f1"], abs=0.05)

    def no_encoder(*args, **kwargs):
        raise AssertionError("the encoder ran although its layers were cached")

    monkeypatch.setattr(feature_bilstm, "_encoder", no_encoder)
    again = execute(_conll_run(tmp_path, "again", feature_cache_dir=str(cache)))
    assert again == cached  # a second run reads the cache: same data, same numbers


def test_feature_cache_needs_a_feature_based_head(tmp_path):
    from kerasbert.errors import InputError
    from kerasbert.run import execute

    config = _conll_run(tmp_path, "tagger", head="tagger", head_options={},
                        feature_cache_dir=str(tmp_path / "cache"))
    with pytest.raises(InputError, match="--feature_cache_dir=.*feature_bilstm"):
        execute(config)
    assert not (tmp_path / "tagger").exists() and not (tmp_path / "cache").exists()
