"""Sim-Transformer: BIMPM with transformer layers; masking, training, config and flags."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from absl import flags

from kerasbert.errors import InputError
from kerasbert.heads import sim_transformer
from kerasbert.heads.sim_transformer import SimTransformer, build_sim_transformer, masked_mean
from kerasbert.hookspecs import HeadContext
from kerasbert.tasks import base
from kerasbert.plugins import resolve_kind
from tests.harness import MASK, pad_features, pair_features


def make_head(num_outputs=3, layers=1, dropout=0.1):
    return SimTransformer(num_outputs, perspectives=3, hidden_dim=8, num_heads=2,
                          intermediate_dim=16, num_layers=layers, dropout=dropout, seed=0)


def test_masked_mean():
    x = np.arange(12, dtype="float32").reshape(2, 3, 2)
    mask = np.array([[1, 1, 0], [0, 0, 0]], bool)
    np.testing.assert_array_equal(np.asarray(masked_mean(x, mask)), [[1.0, 2.0], [0.0, 0.0]])


@pytest.mark.filterwarnings("error:You are using a softmax over axis")  # see min_width
def test_padding_changes_nothing():
    head = make_head(layers=2)
    features = pair_features()
    logits = np.asarray(head(features))
    assert logits.shape == (3, 3) and np.isfinite(logits).all()
    np.testing.assert_allclose(np.asarray(head(pad_features(features, 5))), logits, atol=1e-6)
    for row, length in enumerate(MASK.sum(1)):
        alone = {k: v[row: row + 1] if k == "pooled_output" else v[row: row + 1, :length]
                 for k, v in features.items()}
        np.testing.assert_allclose(np.asarray(head(alone))[0], logits[row], atol=1e-6)
    changed = dict(features, sequence_output=features["sequence_output"][:, ::-1] * 1.0)
    assert np.abs(np.asarray(head(changed)) - logits).max() > 1e-4


@pytest.mark.parametrize("kind", [base.CLASSIFICATION, base.REGRESSION])
def test_trains_and_lowers_the_loss(kind):
    features = pair_features(seed=3)
    if kind == base.CLASSIFICATION:
        labels, num_outputs = np.array([0, 2, 1], "int32"), 3
    else:
        labels, num_outputs = np.array([0.2, -0.5, 0.9], "float32"), 1
    head = make_head(num_outputs, dropout=0.0)  # no dropout noise: the loss falls steadily
    assert head(features).shape == (3, num_outputs)
    optimizer = keras.optimizers.Adam(1e-2)
    variables = head.trainable_variables

    def step():  # eager: a few steps cost less than tracing
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(resolve_kind(kind).per_example_loss(labels,
                                                          head(features, training=True)))
        grads = tape.gradient(loss, variables)
        assert all(g is not None for g in grads)  # every weight is on the loss's path
        optimizer.apply(grads, variables)
        return float(loss)

    history = [step() for _ in range(8)]
    assert history[-1] < 0.7 * history[0], history


def test_config_round_trip_and_flags():
    head = make_head()
    features = pair_features()
    logits = np.asarray(head(features))
    clone = SimTransformer.from_config(head.get_config())
    assert (clone.hidden_dim, clone.num_heads, clone.intermediate_dim, clone.num_layers,
            clone.perspectives) == (8, 2, 16, 1, 3)
    clone(features)
    clone.set_weights(head.get_weights())
    np.testing.assert_allclose(np.asarray(clone(features)), logits, atol=1e-6)

    values = flags.FlagValues()
    sim_transformer.define_flags(values)
    values(["prog"])
    assert {name: values[f"sim_transformer_{name}"].value
            for name in sim_transformer.DEFAULTS} == sim_transformer.DEFAULTS
    fresh = flags.FlagValues()
    sim_transformer.define_flags(fresh)
    with pytest.raises(flags.IllegalFlagValueError):
        fresh(["prog", "--sim_transformer_num_layers=0"])

    context = HeadContext(kind=base.REGRESSION, num_outputs=1, hidden_dim=8, dropout=0.3,
                          seed=4, options={"sim_transformer_hidden_dim": 12,
                                           "sim_transformer_num_heads": 3,
                                           "sim_transformer_dropout": None})
    head = build_sim_transformer(context)
    assert (head.name, head.num_outputs, head.hidden_dim, head.num_heads, head.dropout,
            head.seed) == ("sim_transformer", 1, 12, 3, 0.1, 4)
    assert len(head.context_layers) == 1 and len(head.aggregate_layers_a) == 1
    with pytest.raises(InputError, match="--sim_transformer_num_heads=5 must divide "
                                         "--sim_transformer_hidden_dim=12"):
        build_sim_transformer(HeadContext(
            kind=base.REGRESSION, num_outputs=1, hidden_dim=8, dropout=0.1,
            options={"sim_transformer_hidden_dim": 12, "sim_transformer_num_heads": 5}))
