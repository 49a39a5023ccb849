"""BIMPM on BERT token states: the stacked sentence-pair head of Wang et al. 2019.

Bilateral Multi-Perspective Matching (Wang, Hamza & Florian 2017) with BERT's final hidden
states as its word representations. The packed `[CLS] A [SEP] B [SEP]` sequence is split
into A and B (`split_pair`), then:

  context    one BiLSTM, shared by A and B (left out by `bimpm_no_context`)
  matching   every position of A against all of B and every position of B against all of
             A, with the paper's four strategies, for the forward and backward LSTM states
             separately, each over l perspectives: m_k = cosine(W_k ∘ v1, W_k ∘ v2)
               full           v2 = the other sentence's last forward / first backward state
               max-pooling    max over the other sentence of the per-perspective cosine
               attentive      v2 = Σ_j α_ij h_j / Σ_j α_ij, α_ij = cosine(h_i, h_j)
               max-attentive  v2 = the h_j with the highest α_ij
  aggregation a BiLSTM over each sentence's matching vectors (one for A, one for B); the
             last state of both directions of both sentences, concatenated (4·units)
  prediction dropout, Dense(2·units, tanh), dropout, Dense(num_outputs)

Every matching weight W ∈ R^{l×d} is its own: per direction (A→B, B→A), per LSTM
direction and per strategy (16 matrices; the paper does not say which are shared). Padding is masked
everywhere: appending padding, or batching with longer pairs, does not change the logits.

`bimpm_no_context` matches BERT's states directly. They have no forward/backward halves,
so there is one stream, with two full matchings — against the other sentence's last and
first real token — and the other three strategies once: 5·l features per position
instead of 8·l.

A sentence may be empty: a single-sentence input has no B, and the model builder's dummy
batch is just `[CLS] [SEP]`. Its matching vectors are then zeros and its aggregation state
is zero, so the head stays finite (but learns nothing from such pairs: for single-sentence
tasks use `sequence_classifier`). Each LSTM is still run on one (zero) step of an empty
sentence, so that no row has length 0 (which GPU kernels may reject); that state is then
zeroed.

Options: `bimpm_perspectives` (l, 20), `bimpm_lstm_units` (context and aggregation units
per direction, 100) and `bimpm_dropout` (0.1) — and the same three as
`bimpm_no_context_*` for the variant, since a head receives only the flags named after it.
"""

import keras
import tensorflow as tf
from absl import flags
from keras import ops

DEFAULT_PERSPECTIVES = 20
DEFAULT_LSTM_UNITS = 100
DEFAULT_DROPOUT = 0.1
# Floor on squared norms in cosines: zero (padding) vectors get cosine 0 and finite gradients.
COSINE_EPS = 1e-6

# ---- splitting the packed pair ---------------------------------------------------------------


def gather_positions(sequence, keep, min_width=1):
    """The kept positions of each row, moved to the front: ([b, n, H], bool mask [b, n]).

    n is the largest number of kept positions in the batch, at least `min_width` (≥ 1, so
    that tensors never have a zero-length axis); rows with fewer are zero-padded. Plain tf
    ops with dynamic shapes: works in graph mode and under tf.distribute.
    """
    keep = tf.cast(keep, tf.bool)
    seq_len = tf.shape(keep)[1]
    positions = tf.range(seq_len)[None, :]
    counts = tf.reduce_sum(tf.cast(keep, tf.int32), axis=1)
    width = tf.maximum(tf.reduce_max(counts), min_width)
    # Kept positions sort first, in order; the keys are distinct, so any sort is stable.
    order = tf.argsort(tf.where(keep, positions, positions + seq_len), axis=1)[:, :width]
    mask = tf.range(width)[None, :] < counts[:, None]
    gathered = tf.gather(sequence, order, batch_dims=1)
    return gathered * tf.cast(mask, gathered.dtype)[..., None], mask


def split_pair(sequence, segment_ids, padding_mask, min_width=1):
    """A and B out of `[CLS] A [SEP] B [SEP]` states: ((a, a_mask), (b, b_mask)).

    A = segment-0 real positions except the first ([CLS]) and the last (the first [SEP]);
    B = segment-1 real positions except the last (the final [SEP]).
    """
    real = tf.cast(padding_mask, tf.bool)
    segment_ids = tf.cast(segment_ids, tf.int32)
    positions = tf.range(tf.shape(real)[1])[None, :]
    in_a, in_b = real & (segment_ids == 0), real & (segment_ids == 1)

    def first(within):
        return tf.reduce_min(tf.where(within, positions, tf.int32.max), axis=1, keepdims=True)

    def last(within):
        return tf.reduce_max(tf.where(within, positions, -1), axis=1, keepdims=True)

    keep_a = in_a & (positions != first(in_a)) & (positions != last(in_a))
    keep_b = in_b & (positions != last(in_b))
    return (gather_positions(sequence, keep_a, min_width),
            gather_positions(sequence, keep_b, min_width))


# ---- matching functions (the paper's section 3.3) --------------------------------------------


def _norm(squares):
    return ops.sqrt(ops.maximum(squares, COSINE_EPS))


def cosine_matrix(p, q):
    """α[b, i, j] = cosine(p_i, q_j) for p [b, n, d], q [b, m, d]."""
    dots = ops.einsum("bnd,bmd->bnm", p, q)
    return dots / (_norm(ops.sum(p * p, -1))[:, :, None] * _norm(ops.sum(q * q, -1))[:, None, :])


def multi_perspective_cosine(v1, v2, weight):
    """f_m(v1, v2; W)_k = cosine(W_k ∘ v1, W_k ∘ v2): [..., d] × [..., d] -> [..., l].

    Σ_d (W_kd v1_d)(W_kd v2_d) = (v1 ∘ v2) · W_k², so the three sums are matrix products
    with W² and no [..., l, d] tensor is formed.
    """
    w2 = ops.transpose(ops.square(weight))  # [d, l]
    dots = ops.matmul(v1 * v2, w2)
    return dots / (_norm(ops.matmul(v1 * v1, w2)) * _norm(ops.matmul(v2 * v2, w2)))


def pairwise_multi_perspective_cosine(p, q, weight):
    """f_m(p_i, q_j; W) for every pair: p [b, n, d], q [b, m, d] -> [b, n, m, l]."""
    w2 = ops.square(weight)  # [l, d]
    dots = ops.einsum("bnkd,bmd->bnmk", p[:, :, None, :] * w2, q)
    p_norm = _norm(ops.matmul(p * p, ops.transpose(w2)))  # [b, n, l]
    q_norm = _norm(ops.matmul(q * q, ops.transpose(w2)))  # [b, m, l]
    return dots / (p_norm[:, :, None, :] * q_norm[:, None, :, :])


def select_state(q, q_mask, which):
    """q's state at its first or last real position, [b, d] (zeros for an empty q)."""
    mask = ops.cast(q_mask, "int32")
    if which == "first":
        index = ops.argmax(mask, axis=1)
    elif which == "last":
        index = ops.maximum(ops.sum(mask, axis=1) - 1, 0)  # real positions are left-aligned
    else:
        raise ValueError(f"which: expected 'first' or 'last', got {which!r}")
    state = ops.take_along_axis(q, ops.cast(index, "int32")[:, None, None], axis=1)[:, 0]
    return state * ops.cast(ops.any(q_mask, axis=1), state.dtype)[:, None]


def full_matching(p, q_state, weight):
    """Each p_i against one state of the other sentence: [b, n, d], [b, d] -> [b, n, l]."""
    return multi_perspective_cosine(p, q_state[:, None, :], weight)


def max_pooling_matching(p, q, q_mask, weight):
    """max_j f_m(p_i, q_j; W) over q's real positions: [b, n, l] (0 for an empty q)."""
    pairs = pairwise_multi_perspective_cosine(p, q, weight)
    real = ops.cast(q_mask, "bool")[:, None, :, None]
    best = ops.max(ops.where(real, pairs, ops.full_like(pairs, -2.0)), axis=2)  # cosines ≥ -1
    return ops.where(ops.any(real, axis=2), best, ops.zeros_like(best))


def attentive_matching(p, q, q_mask, weight):
    """f_m(p_i, Σ_j α_ij q_j / Σ_j α_ij; W), α the cosines with q's real positions."""
    alpha = cosine_matrix(p, q) * ops.cast(q_mask, p.dtype)[:, None, :]
    total = ops.sum(alpha, -1, keepdims=True)
    # The cosine after it makes the mean's scale irrelevant (only its sign counts), so a
    # vanishing Σα is only kept away from zero.
    total = ops.where(ops.abs(total) < COSINE_EPS, ops.full_like(total, COSINE_EPS), total)
    mean = ops.matmul(alpha, q) / total
    return multi_perspective_cosine(p, mean, weight)


def max_attentive_matching(p, q, q_mask, weight):
    """f_m(p_i, q_j*; W), j* = argmax_j α_ij over q's real positions."""
    alpha = cosine_matrix(p, q)
    real = ops.cast(q_mask, "bool")[:, None, :]
    best = ops.argmax(ops.where(real, alpha, ops.full_like(alpha, -2.0)), axis=-1)
    chosen = ops.take_along_axis(q, ops.cast(best, "int32")[..., None], axis=1)  # [b, n, d]
    return multi_perspective_cosine(p, chosen, weight)  # q padding is zero: 0 if q is empty


# ---- layers -----------------------------------------------------------------------------------

STRATEGIES = ("max_pooling", "attentive", "max_attentive")
BILSTM_STREAMS = (("last",), ("first",))  # forward states: full match on the last; backward


class MultiPerspectiveMatching(keras.layers.Layer):
    """One direction of the bilateral matching: every position of P against all of Q.

    `call(p, q, p_mask, q_mask)` takes states [b, n, streams, d] and [b, m, streams, d]
    (streams: forward and backward LSTM states, or one) and returns [b, n, features], with
    features = l · Σ_streams (len(full_targets[s]) + 3) and zeros at P's padding.
    `full_targets[s]` names the states of Q that stream s is fully matched against.
    """

    def __init__(self, perspectives=DEFAULT_PERSPECTIVES, full_targets=BILSTM_STREAMS,
                 seed=None, **kwargs):
        super().__init__(**kwargs)
        # === Config ===
        self.perspectives = perspectives
        self.full_targets = tuple(tuple(t) for t in full_targets)
        self.seed = seed
        self.matchings = []  # (stream, strategy, target or None, weight), in output order

    @property
    def output_dim(self):
        return self.perspectives * sum(len(t) + len(STRATEGIES) for t in self.full_targets)

    def build(self, p_shape):
        dim = p_shape[-1]
        for s, targets in enumerate(self.full_targets):
            names = [("full", t) for t in targets] + [(name, None) for name in STRATEGIES]
            for strategy, target in names:
                label = strategy if target is None else f"full_{target}"
                seed = None if self.seed is None else self.seed + len(self.matchings) + 1
                weight = self.add_weight(
                    shape=(self.perspectives, dim), name=f"stream_{s}_{label}",
                    initializer=keras.initializers.GlorotUniform(seed=seed))
                self.matchings.append((s, strategy, target, weight))

    def call(self, p, q, p_mask, q_mask):
        outputs = []
        for s, strategy, target, weight in self.matchings:
            ps, qs = p[:, :, s], q[:, :, s]
            if strategy == "full":
                outputs.append(full_matching(ps, select_state(qs, q_mask, target), weight))
            elif strategy == "max_pooling":
                outputs.append(max_pooling_matching(ps, qs, q_mask, weight))
            elif strategy == "attentive":
                outputs.append(attentive_matching(ps, qs, q_mask, weight))
            else:
                outputs.append(max_attentive_matching(ps, qs, q_mask, weight))
        matched = ops.concatenate(outputs, axis=-1)
        return matched * ops.cast(p_mask, matched.dtype)[..., None]

    def get_config(self):
        config = super().get_config()
        config.update(perspectives=self.perspectives,
                      full_targets=[list(t) for t in self.full_targets], seed=self.seed)
        return config


def bilstm(units, name, seed=None, return_sequences=True, merge_mode="concat"):
    """A BiLSTM whose two directions start from different (seeded) weights."""
    def lstm(k, backwards):
        lstm_seed = None if seed is None else seed + k
        return keras.layers.LSTM(
            units, return_sequences=return_sequences, go_backwards=backwards,
            kernel_initializer=keras.initializers.GlorotUniform(seed=lstm_seed),
            recurrent_initializer=keras.initializers.Orthogonal(seed=lstm_seed),
            name=f"backward_{name}" if backwards else name)  # Bidirectional adds "forward_"

    return keras.layers.Bidirectional(lstm(0, False), backward_layer=lstm(1, True),
                                      merge_mode=merge_mode, name=name)


def nonempty_mask(mask):
    """`mask` with position 0 forced on: every row has a step (see the module docstring)."""
    mask = ops.cast(mask, "bool")
    first = ops.arange(ops.shape(mask)[1])[None, :] == 0
    return ops.logical_or(mask, first)


def feed_forward(hidden, num_outputs, seed, name):
    """The prediction layer: Dense(hidden, tanh) then the output Dense."""
    return (keras.layers.Dense(hidden, activation="tanh", name=f"{name}_hidden",
                               kernel_initializer=keras.initializers.GlorotUniform(seed=seed)),
            keras.layers.Dense(num_outputs, name=f"{name}_output",
                               kernel_initializer=keras.initializers.GlorotUniform(
                                   seed=None if seed is None else seed + 1)))


class BiMPM(keras.layers.Layer):
    """BIMPM over BERT's states of a sentence pair; `context=False` drops the context BiLSTM."""

    def __init__(self, num_outputs, perspectives=DEFAULT_PERSPECTIVES,
                 lstm_units=DEFAULT_LSTM_UNITS, dropout=DEFAULT_DROPOUT, context=True,
                 seed=None, **kwargs):
        super().__init__(**kwargs)
        # === Config ===
        self.num_outputs = num_outputs
        self.perspectives = perspectives
        self.lstm_units = lstm_units
        self.dropout = dropout
        self.context = context
        self.seed = seed

        def sub_seed(k):  # distinct seeds per sub-layer, so no two start as clones
            return None if seed is None else seed + 100 * k

        # === Layers ===
        self.dropout_layer = keras.layers.Dropout(dropout, seed=seed, name="dropout")
        self.context_bilstm = (bilstm(lstm_units, "context", sub_seed(1), merge_mode=None)
                               if context else None)
        targets = BILSTM_STREAMS if context else (("last", "first"),)
        self.match_a = MultiPerspectiveMatching(perspectives, targets, seed=sub_seed(2),
                                                name="match_a_to_b")
        self.match_b = MultiPerspectiveMatching(perspectives, targets, seed=sub_seed(3),
                                                name="match_b_to_a")
        self.aggregate_a = bilstm(lstm_units, "aggregate_a", sub_seed(4), return_sequences=False)
        self.aggregate_b = bilstm(lstm_units, "aggregate_b", sub_seed(5), return_sequences=False)
        self.hidden_dense, self.output_dense = feed_forward(2 * lstm_units, num_outputs,
                                                            sub_seed(6), "prediction")

    def encode(self, x, mask, training):
        """[b, n, H] -> [b, n, streams, d]: the context BiLSTM's two directions, or x itself."""
        if self.context_bilstm is None:
            return x[:, :, None, :]
        x = self.dropout_layer(x, training=training)
        forward, backward = self.context_bilstm(x, mask=nonempty_mask(mask), training=training)
        states = ops.stack([forward, backward], axis=2)
        return states * ops.cast(mask, states.dtype)[:, :, None, None]

    def aggregate(self, bilstm_layer, matched, mask, training):
        """Last forward and backward states over the matching vectors, [b, 2·units]."""
        x = self.dropout_layer(matched, training=training)
        states = bilstm_layer(x, mask=nonempty_mask(mask), training=training)
        return states * ops.cast(ops.any(mask, axis=1), states.dtype)[:, None]

    def call(self, features, training=False):
        sequence = ops.cast(features["sequence_output"], self.compute_dtype)
        (a, a_mask), (b, b_mask) = split_pair(sequence, features["segment_ids"],
                                              features["padding_mask"])
        a_states = self.encode(a, a_mask, training)
        b_states = self.encode(b, b_mask, training)
        a_matched = self.match_a(a_states, b_states, a_mask, b_mask)
        b_matched = self.match_b(b_states, a_states, b_mask, a_mask)
        pair = ops.concatenate([self.aggregate(self.aggregate_a, a_matched, a_mask, training),
                                self.aggregate(self.aggregate_b, b_matched, b_mask, training)],
                               axis=-1)
        hidden = self.hidden_dense(self.dropout_layer(pair, training=training))
        return self.output_dense(self.dropout_layer(hidden, training=training))

    def get_config(self):
        config = super().get_config()
        config.update(num_outputs=self.num_outputs, perspectives=self.perspectives,
                      lstm_units=self.lstm_units, dropout=self.dropout, context=self.context,
                      seed=self.seed)
        return config


def _build(context, prefix, with_context):
    options = context.options

    def option(name, default, cast):
        value = options.get(f"{prefix}_{name}")
        return default if value is None else cast(value)

    return BiMPM(context.num_outputs,
                 perspectives=option("perspectives", DEFAULT_PERSPECTIVES, int),
                 lstm_units=option("lstm_units", DEFAULT_LSTM_UNITS, int),
                 dropout=option("dropout", DEFAULT_DROPOUT, float),
                 context=with_context, seed=context.seed, name=prefix)


def build_bimpm(context):
    """HeadSpec factory "bimpm". Options: bimpm_perspectives / _lstm_units / _dropout."""
    return _build(context, "bimpm", True)


def build_bimpm_no_context(context):
    """HeadSpec factory "bimpm_no_context". Options: bimpm_no_context_perspectives / ..."""
    return _build(context, "bimpm_no_context", False)


def define_flags(flag_values):
    """Defines both variants' absl flags on `flag_values` (kerasbert_define_flags hook)."""
    for prefix, what in (("bimpm", "bimpm head"),
                         ("bimpm_no_context", "bimpm_no_context head (BIMPM without its "
                                              "context BiLSTM)")):
        flags.DEFINE_integer(
            f"{prefix}_perspectives", DEFAULT_PERSPECTIVES,
            f"Number of perspectives l of the {what}'s multi-perspective cosine matching.",
            lower_bound=1, flag_values=flag_values)
        flags.DEFINE_integer(
            f"{prefix}_lstm_units", DEFAULT_LSTM_UNITS,
            f"Units per direction of the {what}'s BiLSTMs (context and aggregation); its "
            "prediction layer's hidden size is twice this.",
            lower_bound=1, flag_values=flag_values)
        flags.DEFINE_float(
            f"{prefix}_dropout", DEFAULT_DROPOUT,
            f"Dropout rate on the inputs of the {what}'s BiLSTMs and prediction layers.",
            lower_bound=0.0, upper_bound=1.0, flag_values=flag_values)
