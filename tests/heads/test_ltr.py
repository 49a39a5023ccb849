"""Heads for left-to-right encoders: last_token and top_bilstm."""

import numpy as np

from kerasbert.heads.ltr import LastTokenClassifier, TopBiLSTM, last_token_states
from kerasbert.heads.span import PADDING_LOGIT
from kerasbert.tasks import base


def _features(seq, mask):
    return {"sequence_output": seq, "padding_mask": np.array(mask, np.int32)}


def test_last_token_states_pick_the_last_real_position():
    seq = np.arange(2 * 5 * 3, dtype=np.float32).reshape(2, 5, 3)
    got = np.asarray(last_token_states(seq, np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])))
    np.testing.assert_array_equal(got, np.stack([seq[0, 2], seq[1, 4]]))


def test_last_token_classifier_ignores_padding_and_reads_the_last_token():
    head = LastTokenClassifier(3, dropout=0.0, seed=0)
    rng = np.random.default_rng(0)
    seq = rng.normal(size=(1, 6, 8)).astype(np.float32)
    mask = [[1, 1, 1, 1, 0, 0]]
    out = np.asarray(head(_features(seq, mask)))
    changed = seq.copy()
    changed[0, 4:] += 5.0  # padding
    changed[0, :3] += 5.0  # earlier tokens: the head reads only position 3
    np.testing.assert_allclose(np.asarray(head(_features(changed, mask))), out, atol=1e-6)
    changed[0, 3] += 1.0
    assert np.abs(np.asarray(head(_features(changed, mask))) - out).max() > 1e-4


def test_top_bilstm_classifier_sees_every_real_token_but_no_padding():
    head = TopBiLSTM(base.CLASSIFICATION, 2, units=4, dropout=0.0, seed=0)
    rng = np.random.default_rng(1)
    seq = rng.normal(size=(1, 6, 8)).astype(np.float32)
    mask = [[1, 1, 1, 1, 1, 0]]
    out = np.asarray(head(_features(seq, mask)))
    assert out.shape == (1, 2)
    padded = seq.copy()
    padded[0, 5] += 3.0
    np.testing.assert_allclose(np.asarray(head(_features(padded, mask))), out, atol=1e-5)
    for position in (0, 2, 4):  # a change anywhere in the input reaches the output
        changed = seq.copy()
        changed[0, position] += 1.0
        assert np.abs(np.asarray(head(_features(changed, mask))) - out).max() > 1e-5


def test_top_bilstm_span_logits_mask_padding():
    head = TopBiLSTM(base.SPAN, 1, units=4, dropout=0.0, seed=0)
    seq = np.random.default_rng(2).normal(size=(2, 5, 8)).astype(np.float32)
    out = np.asarray(head(_features(seq, [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])))
    assert out.shape == (2, 5, 2)
    assert (out[0, 3:] == PADDING_LOGIT).all() and (out[1] > PADDING_LOGIT).all()
