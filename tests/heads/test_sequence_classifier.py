"""Sequence classifier heads (BiLSTM or Kim-CNN + masked max-pooling): masking, training,
config and flags."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from absl import flags

from kerasbert.errors import InputError
from kerasbert.heads import sequence_classifier
from kerasbert.heads.sequence_classifier import (SequenceClassifier, build_sequence_classifier,
                                                 masked_max)
from kerasbert.hookspecs import HeadContext
from kerasbert.tasks import base
from kerasbert.plugins import resolve_kind
from tests.harness import sentence_features


def make_head(encoder, num_outputs=3):
    return SequenceClassifier(num_outputs, encoder=encoder, lstm_units=4, filters=3,
                              dropout=0.1, seed=0)


def test_masked_max():
    x = np.array([[[1.0, -5.0], [3.0, -2.0], [9.0, 9.0]]], "float32")
    np.testing.assert_array_equal(np.asarray(masked_max(x, [[1, 1, 0]])), [[3.0, -2.0]])
    np.testing.assert_array_equal(np.asarray(masked_max(x, [[0, 0, 0]])), [[0.0, 0.0]])


@pytest.mark.parametrize("encoder", ["bilstm", "cnn"])
def test_padding_changes_nothing(encoder):
    head = make_head(encoder)
    f = sentence_features()
    logits = np.asarray(head(f))
    assert logits.shape == (4, 3)
    if encoder == "cnn":
        assert [conv.kernel.shape[0] for conv in head.encoder_layers] == [3, 4, 5]
    # Garbage in the padding, and more of it.
    noisy = dict(f, sequence_output=np.concatenate(
        [f["sequence_output"] + 7.0 * (1 - f["padding_mask"][..., None]),
         np.full((4, 3, 8), 5.0, "float32")], 1).astype("float32"),
        padding_mask=np.pad(f["padding_mask"], ((0, 0), (0, 3))))
    np.testing.assert_allclose(np.asarray(head(noisy)), logits, atol=1e-6)
    for row, length in enumerate(f["padding_mask"].sum(1)):
        alone = {k: v[row: row + 1] if k == "pooled_output" else v[row: row + 1, :length]
                 for k, v in f.items()}
        np.testing.assert_allclose(np.asarray(head(alone))[0], logits[row], atol=1e-6)


@pytest.mark.parametrize("encoder,kind", [("bilstm", base.CLASSIFICATION),
                                          ("cnn", base.REGRESSION)])
def test_trains_and_lowers_the_loss(encoder, kind):
    f = sentence_features(seed=1, batch=8)
    rng = np.random.default_rng(2)
    if kind == base.CLASSIFICATION:
        labels, num_outputs = rng.integers(0, 3, size=8).astype("int32"), 3
    else:
        labels, num_outputs = rng.normal(size=8).astype("float32"), 1
    head = make_head(encoder, num_outputs)
    assert head(f).shape == (8, num_outputs)
    optimizer = keras.optimizers.Adam(5e-2)
    variables = head.trainable_variables

    def step():  # eager: a few steps cost less than tracing the LSTM gradients
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(resolve_kind(kind).per_example_loss(labels,
                                                          head(f, training=True)))
        optimizer.apply(tape.gradient(loss, variables), variables)
        return float(loss)

    history = [step() for _ in range(10)]
    assert history[-1] < 0.8 * history[0], history


def test_config_flags_and_factory():
    values = flags.FlagValues()
    sequence_classifier.define_flags(values)
    values(["prog", "--sequence_classifier_encoder=cnn"])
    assert (values.sequence_classifier_encoder, values.sequence_classifier_lstm_units,
            values.sequence_classifier_filters, values.sequence_classifier_dropout) == (
        "cnn", 256, 100, None)
    fresh = flags.FlagValues()
    sequence_classifier.define_flags(fresh)
    with pytest.raises(flags.IllegalFlagValueError):
        fresh(["prog", "--sequence_classifier_encoder=rnn"])
    with pytest.raises(InputError, match="--sequence_classifier_encoder=rnn: expected one of "
                                         "bilstm, cnn"):
        SequenceClassifier(2, encoder="rnn")

    context = HeadContext(kind=base.CLASSIFICATION, num_outputs=2, hidden_dim=8, dropout=0.2,
                          seed=3, options={"sequence_classifier_encoder": "cnn",
                                           "sequence_classifier_filters": 4})
    head = build_sequence_classifier(context)
    assert (head.name, head.encoder, head.filters, head.dropout, head.seed) == (
        "sequence_classifier", "cnn", 4, 0.2, 3)
    assert build_sequence_classifier(HeadContext(
        kind=base.CLASSIFICATION, num_outputs=2, hidden_dim=8, dropout=0.2)).encoder == "bilstm"
    f = sentence_features()
    logits = np.asarray(head(f))
    clone = SequenceClassifier.from_config(head.get_config())
    assert (clone.encoder, clone.filters, clone.kernel_sizes) == ("cnn", 4, (3, 4, 5))
    clone(f)
    clone.set_weights(head.get_weights())
    np.testing.assert_allclose(np.asarray(clone(f)), logits, atol=1e-6)
