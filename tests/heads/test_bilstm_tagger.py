"""The stacked BiLSTM tagger: per-token logits, masking, training, config and flags."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from absl import flags

from kerasbert.heads import bilstm_tagger
from kerasbert.heads.bilstm_tagger import BiLSTMTagger, build_bilstm_tagger
from kerasbert.hookspecs import HeadContext
from kerasbert.tasks import base
from kerasbert.plugins import resolve_kind
from tests.harness import sentence_features


def test_padding_changes_no_real_position():
    head = BiLSTMTagger(5, lstm_units=4, seed=0)
    f = sentence_features()
    logits = np.asarray(head(f))
    assert logits.shape == (4, 9, 5)
    real = f["padding_mask"] == 1
    noisy = dict(f, sequence_output=np.concatenate(
        [f["sequence_output"] + 7.0 * (1 - f["padding_mask"][..., None]),
         np.full((4, 3, 8), 5.0, "float32")], 1),
        padding_mask=np.pad(f["padding_mask"], ((0, 0), (0, 3))))
    np.testing.assert_allclose(np.asarray(head(noisy))[:, :9][real], logits[real], atol=1e-6)
    # The BiLSTM reads context: changing the last real token changes the first one's logits.
    changed = f["sequence_output"].copy()
    changed[0, 8] += 1.0
    first = np.asarray(head(dict(f, sequence_output=changed)))[0, 0]
    assert np.abs(first - logits[0, 0]).max() > 1e-5


def test_trains_and_lowers_the_tagging_loss():
    f = sentence_features(seed=1)
    # Learnable: a token's label is which of its first three features is largest.
    labels = np.where(f["padding_mask"] == 1, f["sequence_output"][..., :3].argmax(-1),
                      -1).astype("int32")
    head = BiLSTMTagger(3, lstm_units=6, dropout=0.1, seed=0)
    optimizer = keras.optimizers.Adam(5e-2)
    head(f)
    variables = head.trainable_variables

    def step():  # eager: a few steps cost less than tracing the LSTM gradients
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(resolve_kind(base.TAGGING).per_example_loss(labels,
                                                          head(f, training=True)))
        optimizer.apply(tape.gradient(loss, variables), variables)
        return float(loss)

    history = [step() for _ in range(10)]
    assert history[-1] < 0.8 * history[0], history


def test_config_flags_and_factory():
    values = flags.FlagValues()
    bilstm_tagger.define_flags(values)
    values(["prog"])
    assert (values.bilstm_tagger_lstm_units, values.bilstm_tagger_dropout) == (256, None)
    fresh = flags.FlagValues()
    bilstm_tagger.define_flags(fresh)
    with pytest.raises(flags.IllegalFlagValueError):
        fresh(["prog", "--bilstm_tagger_lstm_units=0"])

    context = HeadContext(kind=base.TAGGING, num_outputs=9, hidden_dim=8, dropout=0.2, seed=3,
                          options={"bilstm_tagger_lstm_units": 5})
    head = build_bilstm_tagger(context)
    assert (head.name, head.num_outputs, head.lstm_units, head.dropout, head.seed) == (
        "bilstm_tagger", 9, 5, 0.2, 3)
    f = sentence_features()
    logits = np.asarray(head(f))
    clone = BiLSTMTagger.from_config(head.get_config())
    clone(f)
    clone.set_weights(head.get_weights())
    np.testing.assert_allclose(np.asarray(clone(f)), logits, atol=1e-6)
    assert build_bilstm_tagger(HeadContext(
        kind=base.TAGGING, num_outputs=9, hidden_dim=8, dropout=0.2,
        options={"bilstm_tagger_dropout": 0.4})).dropout == 0.4
