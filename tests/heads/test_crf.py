"""The linear-chain CRF against brute force: every tag sequence of tiny chains enumerated
(K = 3-4 tags, at most 5 positions, random emissions, transitions and masks with gaps)."""

import itertools

import keras
import numpy as np
import pytest
import tensorflow as tf
from scipy.special import logsumexp

from kerasbert.heads.crf import CRF, iob2_allowed

LABELS = {3: ("O", "B-X", "I-X"), 4: ("O", "B-X", "I-X", "B-Y")}


def paths(emissions, chain, crf, start_constrained=True):
    """{tags on the chain: score} of every allowed tag sequence of one row, in float64."""
    transitions, start, end = (np.asarray(w, np.float64)
                               for w in (crf.transitions, crf.start, crf.end))
    positions = np.flatnonzero(chain)
    out = {}
    for tags in itertools.product(range(crf.num_tags), repeat=len(positions)):
        if crf.allowed is not None and any(
                not crf.allowed[a, b] for a, b in itertools.pairwise(tags)):
            continue
        if tags and start_constrained and crf.allowed_start is not None and (
                not crf.allowed_start[tags[0]]):
            continue
        score = sum(emissions[p, t] for p, t in zip(positions, tags)) + sum(
            transitions[a, b] for a, b in itertools.pairwise(tags))
        out[tags] = score + (start[tags[0]] + end[tags[-1]] if tags else 0.0)
    return out


def random_case(seed, k, constrained, batch=6, length=5):
    """A CRF with random weights and random (gappy, some empty) chains and emissions."""
    rng = np.random.default_rng(seed)
    allowed = iob2_allowed(LABELS[k]) if constrained else (None, None)
    crf = CRF(k, *allowed)
    for weight in (crf.transitions, crf.start, crf.end):
        weight.assign(rng.normal(size=weight.shape))
    emissions = rng.normal(scale=2.0, size=(batch, length, k))
    chain = rng.random((batch, length)) < 0.7
    chain[0] = False  # an empty chain
    chain[1] = True  # a full one
    return crf, emissions, chain, rng


def legal_labels(rng, table, chain, hide=0.0):
    """Labels [S] of a random allowed path (-1 off the chain), a `hide` share unobserved."""
    keys = list(table)
    labels = np.full(chain.shape, -1)
    labels[chain] = keys[rng.integers(len(keys))]
    labels[chain & (rng.random(chain.shape) < hide)] = -1
    return labels


@pytest.mark.parametrize("policy", ["float32", "mixed_float16"])
@pytest.mark.parametrize("k,constrained", [(3, False), (4, False), (3, True), (4, True)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_crf_matches_brute_force(seed, k, constrained, policy):
    crf, emissions, chain, rng = random_case(seed, k, constrained)
    dtype = "float16" if policy == "mixed_float16" else "float32"
    # The reference sees the emissions as the CRF gets them (rounded to float16).
    emissions = emissions.astype(dtype)
    reference = emissions.astype(np.float64)
    tables = [paths(e, c, crf) for e, c in zip(reference, chain)]
    full = np.stack([legal_labels(rng, t, c) for t, c in zip(tables, chain)])
    partial = np.stack([legal_labels(rng, t, c, hide=0.5) for t, c in zip(tables, chain)])

    class Float16Head(keras.layers.Layer):
        """Calls the CRF from inside a float16 layer's call, where Keras autocasts."""

        def call(self, e):
            return (crf.nll(e, full, chain), crf.nll(e, partial, chain),
                    *crf.viterbi(e, chain))

    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        nll_full, nll_partial, tags, best = (
            np.asarray(x) for x in Float16Head()(tf.constant(emissions)))
    finally:
        keras.config.set_dtype_policy(previous)

    for b, table in enumerate(tables):
        log_z = logsumexp(list(table.values()))
        gold = table[tuple(full[b][chain[b]])]
        consistent = [s for tags_, s in table.items()
                      if all(p < 0 or p == t for p, t in zip(partial[b][chain[b]], tags_))]
        np.testing.assert_allclose(nll_full[b], log_z - gold, atol=1e-5)
        np.testing.assert_allclose(nll_partial[b], log_z - logsumexp(consistent), atol=1e-5)
        path = max(table, key=table.get)
        assert tuple(tags[b][chain[b]]) == path
        assert (tags[b][~chain[b]] == -1).all()
        np.testing.assert_allclose(best[b], table[path], atol=1e-5)
    assert nll_full[0] == 0.0 and best[0] == 0.0  # the empty chain


def test_a_window_that_starts_inside_an_entity_is_scored_without_the_start_constraint():
    crf, emissions, chain, _ = random_case(3, 3, constrained=True, batch=2)
    chain[:] = [[False, True, True, False, True], [True] * 5]
    labels = np.array([[-1, 2, 2, 0, 1], [2, 2, -1, -1, 0]])  # I-X first
    nll = np.asarray(crf.nll(emissions, labels, chain))
    for b in range(2):
        table = paths(emissions[b], chain[b], crf, start_constrained=False)
        consistent = [s for tags, s in table.items()
                      if all(p < 0 or p == t for p, t in zip(labels[b][chain[b]], tags))]
        np.testing.assert_allclose(nll[b], logsumexp(list(table.values()))
                                   - logsumexp(consistent), atol=1e-5)


def test_gradients_are_finite_even_for_impossible_gold_paths():
    crf, emissions, chain, rng = random_case(4, 4, constrained=True)
    labels = np.where(chain, rng.integers(-1, 4, size=chain.shape), -1)
    labels[1, :2] = [0, 2]  # O then I-X: a forbidden transition in the gold path
    labels[2] = -1  # nothing labelled
    emissions = tf.Variable(emissions, dtype=tf.float32)
    with tf.GradientTape() as tape:
        nll = crf.nll(emissions, labels, chain)
    grads = tape.gradient(nll, [emissions, *crf.trainable_variables])
    assert np.isfinite(nll.numpy()).all() and nll[1] > 1e3 and nll[2] == 0.0
    assert all(np.isfinite(g.numpy()).all() for g in grads)


def test_viterbi_paths_never_take_a_forbidden_transition():
    rng = np.random.default_rng(5)
    labels = ("O", "B-PER", "I-PER", "B-LOC", "I-LOC")
    allowed, allowed_start = iob2_allowed(labels)
    assert allowed_start.tolist() == [True, True, False, True, False]
    assert allowed[:, 2].tolist() == [False, True, True, False, False]
    crf = CRF(5, allowed, allowed_start)
    crf.transitions.assign(rng.normal(scale=5.0, size=(5, 5)))
    # Emissions that favour the I- tags everywhere, and gaps in the chains.
    emissions = rng.normal(scale=20.0, size=(64, 12, 5)) + [0, 0, 30, 0, 30]
    chain = rng.random((64, 12)) < 0.6
    tags, _ = crf.viterbi(emissions, chain)
    for row, on in zip(tags.numpy(), chain):
        path = row[on]
        assert len(path) == 0 or allowed_start[path[0]]
        assert all(allowed[a, b] for a, b in itertools.pairwise(path))
