"""BIMPM heads: pair splitting, the four matching strategies against the paper's definitions,
masking, training, config and flags."""


import keras
import numpy as np
import pytest
import tensorflow as tf
from absl import flags

from kerasbert.heads import bimpm
from kerasbert.heads.bimpm import (BILSTM_STREAMS, BiMPM, MultiPerspectiveMatching,
                                   attentive_matching, build_bimpm, build_bimpm_no_context,
                                   full_matching, max_attentive_matching, max_pooling_matching,
                                   select_state, split_pair)
from kerasbert.hookspecs import HeadContext
from kerasbert.tasks import base
from kerasbert.plugins import resolve_kind
from tests.harness import MASK, SEGMENTS, pad_features, pair_features

# ---- a numpy reference, written from the paper's definitions (BiMPM, section 3.3) -----------


def np_cosine(x, y):
    return float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y)))


def np_fm(v1, v2, w):
    """m_k = cosine(W_k ∘ v1, W_k ∘ v2), k = 1..l."""
    return np.array([np_cosine(wk * v1, wk * v2) for wk in w])


def np_matching(strategy, p, q, w, target=None):
    """One row: p [n, d] against the real positions q [m, d] -> [n, l]."""
    rows = []
    for p_i in p:
        alpha = np.array([np_cosine(p_i, q_j) for q_j in q])
        if strategy == "full":
            rows.append(np_fm(p_i, q[-1] if target == "last" else q[0], w))
        elif strategy == "max_pooling":
            rows.append(np.max([np_fm(p_i, q_j, w) for q_j in q], axis=0))
        elif strategy == "attentive":
            rows.append(np_fm(p_i, (alpha[:, None] * q).sum(0) / alpha.sum(), w))
        else:
            rows.append(np_fm(p_i, q[np.argmax(alpha)], w))
    return np.array(rows)


@pytest.fixture(scope="module")
def tensors():
    """p [2, 3, 5] and q [2, 4, 5]; q's second row has 2 real positions, then garbage."""
    rng = np.random.default_rng(0)
    p = rng.normal(size=(2, 3, 5)).astype("float32")
    q = rng.normal(size=(2, 4, 5)).astype("float32")
    q_mask = np.array([[1, 1, 1, 1], [1, 1, 0, 0]], bool)
    q[1, 2:] = 50.0 * rng.normal(size=(2, 5))  # padding that must not count
    w = rng.uniform(-1, 1, size=(3, 5)).astype("float32")  # l = 3 perspectives
    return p, q, q_mask, w


@pytest.mark.parametrize("strategy", ["full_last", "full_first", "max_pooling", "attentive",
                                      "max_attentive"])
def test_matching_strategies_match_the_paper(tensors, strategy):
    p, q, q_mask, w = tensors
    name, target = ("full", strategy[5:]) if strategy.startswith("full") else (strategy, None)
    if name == "full":
        got = full_matching(p, select_state(q, q_mask, target), w)
    else:
        fn = {"max_pooling": max_pooling_matching, "attentive": attentive_matching,
              "max_attentive": max_attentive_matching}[name]
        got = fn(p, q, q_mask, w)
    assert got.shape == (2, 3, 3)
    for b in range(2):
        expected = np_matching(name, p[b], q[b][q_mask[b]], w, target)
        np.testing.assert_allclose(np.asarray(got[b]), expected, atol=1e-5)


def test_max_attentive_picks_the_most_similar_real_state():
    # p_0 is nearly q_1; q_2 (padding) is p_0 exactly but must be ignored.
    p = np.array([[[1.0, 0.0, 0.0]]], "float32")
    q = np.array([[[0.0, 1.0, 0.0], [0.9, 0.1, 0.0], [1.0, 0.0, 0.0]]], "float32")
    mask = np.array([[1, 1, 0]], bool)
    w = np.ones((1, 3), "float32")
    got = float(np.asarray(max_attentive_matching(p, q, mask, w))[0, 0, 0])
    assert got == pytest.approx(np_cosine(p[0, 0], q[0, 1]), abs=1e-6)
    assert got < 0.999  # not the padding's 1.0


def test_an_empty_sentence_matches_as_zeros():
    rng = np.random.default_rng(1)
    p = rng.normal(size=(1, 2, 4)).astype("float32")
    q = np.zeros((1, 3, 4), "float32")  # split-out sentences are zero at padding
    mask = np.zeros((1, 3), bool)
    w = rng.normal(size=(2, 4)).astype("float32")
    for got in (full_matching(p, select_state(q, mask, "last"), w),
                max_pooling_matching(p, q, mask, w), attentive_matching(p, q, mask, w),
                max_attentive_matching(p, q, mask, w)):
        np.testing.assert_array_equal(np.asarray(got), np.zeros((1, 2, 2)))


def test_matching_layer_concatenates_strategies_per_stream(tensors):
    p, q, q_mask, _ = tensors
    # Two streams as a BiLSTM gives them: forward states full-match q's last, backward its first.
    rng = np.random.default_rng(2)
    p2 = np.stack([p, rng.normal(size=p.shape)], axis=2).astype("float32")  # [2, 3, 2, 5]
    q2 = np.stack([q, rng.normal(size=q.shape)], axis=2).astype("float32")
    p_mask = np.array([[1, 1, 1], [1, 1, 0]], bool)
    layer = MultiPerspectiveMatching(3, BILSTM_STREAMS, seed=0)
    got = np.asarray(layer(p2, q2, p_mask, q_mask))
    assert got.shape == (2, 3, 8 * 3) and layer.output_dim == 24
    assert len(layer.weights) == 8 and all(w.shape == (3, 5) for w in layer.weights)
    np.testing.assert_array_equal(got[1, 2], 0.0)  # p's padding
    order = [(0, "full", "last"), (0, "max_pooling", None), (0, "attentive", None),
             (0, "max_attentive", None), (1, "full", "first"), (1, "max_pooling", None),
             (1, "attentive", None), (1, "max_attentive", None)]
    for k, ((stream, strategy, target), weight) in enumerate(zip(order, layer.weights)):
        for b in range(2):
            n = p_mask[b].sum()
            expected = np_matching(strategy, p2[b, :n, stream], q2[b][q_mask[b]][:, stream],
                                   np.asarray(weight), target)
            np.testing.assert_allclose(got[b, :n, 3 * k: 3 * k + 3], expected, atol=1e-5)


# ---- splitting the packed pair ----------------------------------------------------------------

# SEGMENTS, MASK: [CLS] a a [SEP] b b [SEP] pad pad; [CLS] a [SEP] b b b b [SEP] pad;
# [CLS] a a a [SEP] pad ... (no B) (tests/harness.py, shared with Sim-Transformer's tests).


def test_split_pair_takes_a_and_b_without_cls_sep_and_padding():
    # Each state holds its own (row, position): the split shows where it read from.
    rows, positions = np.meshgrid(np.arange(3), np.arange(9), indexing="ij")
    x = np.stack([rows, positions], -1).astype("float32") + 1.0  # +1: zeros mean "padding"
    spec = tf.TensorSpec([None, None], tf.int32)

    @tf.function(input_signature=[tf.TensorSpec([None, None, 2]), spec, spec])
    def graph_split(*args):  # graph mode, unknown batch and length
        return split_pair(*args)

    for split in (split_pair, graph_split):
        (a, a_mask), (b, b_mask) = split(x, SEGMENTS, MASK)
        np.testing.assert_array_equal(np.asarray(a_mask), [[1, 1, 0], [1, 0, 0], [1, 1, 1]])
        np.testing.assert_array_equal(np.asarray(b_mask), [[1, 1, 0, 0], [1, 1, 1, 1],
                                                           [0, 0, 0, 0]])
        np.testing.assert_array_equal(np.asarray(a)[..., 1] - 1, [[1, 2, -1], [1, -1, -1],
                                                                  [1, 2, 3]])
        np.testing.assert_array_equal(np.asarray(b)[..., 1] - 1, [[4, 5, -1, -1],
                                                                  [3, 4, 5, 6],
                                                                  [-1, -1, -1, -1]])
        np.testing.assert_array_equal(np.asarray(a)[..., 0] - 1, [[0, 0, -1], [1, -1, -1],
                                                                  [2, 2, 2]])


def test_split_recovers_the_sentences_of_pairs_packed_by_the_tokenizer(uncased_vocab):
    from kerasbert.data.tokenization import WordPieceTokenizer, encode_texts

    tokenizer = WordPieceTokenizer(uncased_vocab)
    texts_a = ["How would I boil an egg quickly?", "Short.",
               "Every sentence here is invented for this test of the splitter."]
    texts_b = ["What is a fast way to boil eggs?",
               "A much longer second sentence makes the pair truncate from the end.", "Ok"]
    inputs = encode_texts(tokenizer, texts_a, texts_b, max_seq_length=14)  # truncates two
    ids = inputs["token_ids"][..., None].astype("float32")
    (a, a_mask), (b, b_mask) = split_pair(ids, inputs["segment_ids"], inputs["padding_mask"])
    for row in range(3):
        got_a = np.asarray(a)[row, :, 0][np.asarray(a_mask)[row]].astype(int).tolist()
        got_b = np.asarray(b)[row, :, 0][np.asarray(b_mask)[row]].astype(int).tolist()
        full_a, full_b = (tokenizer.tokenize_ids([t])[0].numpy().tolist()
                          for t in (texts_a[row], texts_b[row]))
        # Truncation keeps a prefix of each; everything but [CLS] and two [SEP] is kept.
        assert got_a == full_a[:len(got_a)] and got_b == full_b[:len(got_b)]
        assert len(got_a) + len(got_b) + 3 == inputs["padding_mask"][row].sum()
    assert np.asarray(a_mask).sum(1).tolist()[1] == len(tokenizer.tokenize("Short."))


def test_a_batch_of_empty_pairs_still_has_one_column():
    # The model builder's dummy batch is [CLS] [SEP]: A and B are empty in every row.
    x = np.ones((2, 4, 3), "float32")
    mask = np.array([[1, 1, 0, 0]] * 2, "int32")
    (a, a_mask), (b, b_mask) = split_pair(x, np.zeros_like(mask), mask)
    assert a.shape == b.shape == (2, 1, 3)
    assert not np.asarray(a_mask).any() and not np.asarray(b_mask).any()
    np.testing.assert_array_equal(np.asarray(a), 0.0)
    (a, _), _ = split_pair(x, np.zeros_like(mask), mask, min_width=2)
    assert a.shape == (2, 2, 3)


# ---- the heads ------------------------------------------------------------------------------

def make_head(context, num_outputs=3, dropout=0.1):
    return BiMPM(num_outputs, perspectives=3, lstm_units=4, dropout=dropout, context=context,
                 seed=0)


@pytest.mark.parametrize("context", [True, False], ids=["bimpm", "no_context"])
def test_padding_changes_nothing(context):
    head = make_head(context)
    features = pair_features()
    logits = np.asarray(head(features))
    assert logits.shape == (3, 3) and np.isfinite(logits).all()
    np.testing.assert_allclose(np.asarray(head(pad_features(features, 4))), logits, atol=1e-6)
    # Each pair alone, cut to its length: as in the batch next to longer pairs.
    for row, length in enumerate(MASK.sum(1)):
        alone = {k: v[row: row + 1] if k == "pooled_output" else v[row: row + 1, :length]
                 for k, v in features.items()}
        np.testing.assert_allclose(np.asarray(head(alone))[0], logits[row], atol=1e-6)
    assert not np.allclose(np.asarray(head(features, training=True)), logits)  # dropout
    # ... while the real states do matter.
    changed = dict(features, sequence_output=features["sequence_output"] * 1.5 + 0.3)
    assert np.abs(np.asarray(head(changed)) - logits).max() > 1e-4


def test_graph_mode_with_unknown_shapes_gives_the_eager_logits():
    head = make_head(True)
    features = pair_features()
    eager = np.asarray(head(features))
    spec = {k: tf.TensorSpec([None, None], tf.int32)
            for k in ("token_ids", "segment_ids", "padding_mask")}
    spec.update(sequence_output=tf.TensorSpec([None, None, 8]),
                pooled_output=tf.TensorSpec([None, 8]))
    graph = tf.function(lambda f: head(f), input_signature=[spec])
    np.testing.assert_allclose(np.asarray(graph(features)), eager, atol=1e-6)


@pytest.mark.parametrize("context,kind", [(True, base.CLASSIFICATION), (False, base.REGRESSION)],
                         ids=["bimpm-classification", "no_context-regression"])
def test_trains_and_lowers_the_loss(context, kind):
    features = pair_features(seed=3)
    if kind == base.CLASSIFICATION:
        labels, num_outputs = np.array([0, 2, 1], "int32"), 3
    else:
        labels, num_outputs = np.array([0.2, -0.5, 0.9], "float32"), 1
    head = make_head(context, num_outputs, dropout=0.0)  # no dropout noise: steady descent
    assert head(features).shape == (3, num_outputs)
    optimizer = keras.optimizers.Adam(2e-2)
    variables = head.trainable_variables

    def step():  # eager: a few steps cost less than tracing the LSTM gradients
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(resolve_kind(kind).per_example_loss(labels,
                                                          head(features, training=True)))
        grads = tape.gradient(loss, variables)
        assert all(g is not None for g in grads)  # every weight is on the loss's path
        optimizer.apply(grads, variables)
        return float(loss)

    history = [step() for _ in range(8)]
    assert history[-1] < 0.8 * history[0], history


def test_dummy_pairs_build_every_weight_and_stay_finite():
    head = make_head(True)
    x = np.ones((2, 4, 8), "float32")
    mask = np.array([[1, 1, 0, 0]] * 2, "int32")  # [CLS] [SEP]
    logits = np.asarray(head({"sequence_output": x, "segment_ids": np.zeros_like(mask),
                              "padding_mask": mask}))
    assert np.isfinite(logits).all()
    # 3 LSTM weights × 2 directions × 3 BiLSTMs, 8 matching W × 2 directions, 2 Dense × 2.
    assert len(head.weights) == 18 + 16 + 4


@pytest.mark.parametrize("context", [True, False], ids=["bimpm", "no_context"])
def test_config_round_trip(context):
    head = make_head(context)
    features = pair_features()
    logits = np.asarray(head(features))
    clone = BiMPM.from_config(head.get_config())
    assert (clone.perspectives, clone.lstm_units, clone.dropout, clone.context, clone.seed) == (
        3, 4, 0.1, context, 0)
    clone(features)
    clone.set_weights(head.get_weights())
    np.testing.assert_allclose(np.asarray(clone(features)), logits, atol=1e-6)


def test_flags_and_factories():
    values = flags.FlagValues()
    bimpm.define_flags(values)
    values(["prog", "--bimpm_no_context_perspectives=7"])
    assert (values.bimpm_perspectives, values.bimpm_lstm_units, values.bimpm_dropout) == (
        20, 100, 0.1)
    assert values.bimpm_no_context_perspectives == 7
    for bad in ("--bimpm_perspectives=0", "--bimpm_no_context_lstm_units=0",
                "--bimpm_dropout=1.5"):
        fresh = flags.FlagValues()
        bimpm.define_flags(fresh)
        with pytest.raises(flags.IllegalFlagValueError):
            fresh(["prog", bad])

    def context(**options):
        return HeadContext(kind=base.CLASSIFICATION, num_outputs=2, hidden_dim=8, dropout=0.3,
                           options=options, seed=5)

    head = build_bimpm(context())
    assert (head.name, head.num_outputs, head.perspectives, head.lstm_units, head.dropout,
            head.context, head.seed) == ("bimpm", 2, 20, 100, 0.1, True, 5)
    head = build_bimpm(context(bimpm_perspectives=4, bimpm_lstm_units=6, bimpm_dropout=0.2))
    assert (head.perspectives, head.lstm_units, head.dropout) == (4, 6, 0.2)
    # The variant reads its own flags (a head receives only the flags named after it).
    head = build_bimpm_no_context(context(bimpm_perspectives=4, bimpm_no_context_lstm_units=9))
    assert (head.name, head.perspectives, head.lstm_units, head.context) == (
        "bimpm_no_context", 20, 9, False)
