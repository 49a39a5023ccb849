"""A linear-chain CRF over K tags in TF ops.

The CRF (Lafferty et al. 2001) scores a tag sequence y_1..y_n on a row's chain positions
t_1 < ... < t_n as

    start[y_1] + Σ_i emissions[t_i, y_i] + Σ_{i>1} transitions[y_{i-1}, y_i] + end[y_n]

and p(y) = exp(score(y)) / Z. The chain is where the boolean `chain` [B, S] is True: other
positions are skipped (a transition links each chain position to the previous one), so a
chain may have gaps and any length; an empty chain has score 0 and log Z = 0. Labels < 0 on
the chain are unobserved: the likelihood sums over their tags (a partially labelled chain).

Forbidden transitions and starts (`allowed`, `allowed_start`, IOB2's from `iob2_allowed`)
score FORBIDDEN, so no probability mass and no Viterbi path goes through them. All the
arithmetic is float32 whatever the emissions' dtype: Z sums exponentials of whole-sequence
scores, and float16's 11 significant bits would lose the gold path's score against it.
"""

import keras
import numpy as np
import tensorflow as tf

# exp(-1e4) underflows to 0 in float32 (whose smallest value is about e^-103), so a path
# through a forbidden transition has probability 0, yet every log-sum-exp stays finite, and
# so do its gradients (with -inf, a state that only forbidden paths reach gives 0·inf = NaN).
FORBIDDEN = -1e4


def iob2_allowed(labels):
    """(allowed [K, K] from→to, allowed_start [K]) for IOB2 tags: I-X only after B-X or I-X,
    never first. Tags that are not I- (O, B-X, tags outside the scheme) go anywhere."""
    k = len(labels)
    allowed, allowed_start = np.ones([k, k], bool), np.ones([k], bool)
    for j, tag in enumerate(labels):
        if tag.startswith("I-"):
            allowed_start[j] = False
            allowed[:, j] = [previous in (tag, "B-" + tag[2:]) for previous in labels]
    return allowed, allowed_start


def _scan_chain(step, emissions, chain, start):
    """state after each position, [S, B, K]: start + e at the chain's first position,
    step(previous state) + e at the next ones, the previous state off the chain. Also
    whether the chain has begun, [S, B], and step's second output (or None), [S, B, K]."""
    batch, k = tf.shape(emissions)[0], emissions.shape[-1]

    def body(carry, x):
        state, begun, _ = carry
        e, on = x
        value, extra = step(state)
        new = tf.where(begun[:, None], value, start) + e
        return tf.where(on[:, None], new, state), begun | on, extra

    init = (tf.zeros([batch, k]), tf.zeros([batch], tf.bool), tf.zeros([batch, k], tf.int32))
    return tf.scan(body, (tf.transpose(emissions, [1, 0, 2]), tf.transpose(chain)), init)


def log_partition(emissions, chain, transitions, start, end):
    """log Z of each row's chain, float32 [B] (the forward algorithm in log space)."""

    def step(alpha):  # log Σ_i exp(alpha_i + transitions[i, j]) for every j
        return (tf.reduce_logsumexp(alpha[:, :, None] + transitions, axis=1),
                tf.zeros_like(alpha, tf.int32))

    alphas, begun, _ = _scan_chain(step, emissions, chain, start)
    return tf.where(begun[-1], tf.reduce_logsumexp(alphas[-1] + end, axis=-1), 0.0)


def viterbi(emissions, chain, transitions, start, end):
    """The best tag sequence of each row's chain and its score: int32 [B, S] (-1 off the
    chain), float32 [B]."""
    k = emissions.shape[-1]

    def step(delta):  # best previous tag for every tag j, and its score
        scores = delta[:, :, None] + transitions
        return tf.reduce_max(scores, axis=1), tf.argmax(scores, axis=1, output_type=tf.int32)

    deltas, begun, best_previous = _scan_chain(step, emissions, chain, start)
    # Back-pointers: at a chain position after the first, the previous chain position's
    # best tag; elsewhere the tag itself, so that following them skips off-chain positions.
    follows = tf.transpose(chain)[:, :, None] & tf.concat(
        [tf.zeros_like(begun[:1]), begun[:-1]], 0)[:, :, None]
    pointers = tf.where(follows, best_previous, tf.range(k)[None, None])
    final = deltas[-1] + end
    last = tf.argmax(final, axis=-1, output_type=tf.int32)
    earlier = tf.scan(lambda tag, pointer: tf.gather(pointer, tag, batch_dims=1),
                      pointers[1:], initializer=last, reverse=True)
    tags = tf.transpose(tf.concat([earlier, last[None]], 0))
    return (tf.where(chain, tags, -1),
            tf.where(begun[-1], tf.reduce_max(final, axis=-1), 0.0))


def restrict_to_labels(emissions, labels, chain):
    """Emissions where a labelled chain position allows only its label: their log Z is the
    gold path's score (log Σ over the unlabelled positions' tags when some are -1)."""
    gold = tf.one_hot(tf.maximum(labels, 0), emissions.shape[-1]) > 0
    other = (chain & (labels >= 0))[..., None] & ~gold
    return tf.where(other, FORBIDDEN, emissions)


class CRF(keras.layers.Layer):
    """Transitions [K, K] (from, to), start and end scores [K]; all learned, from zeros, so
    an untrained CRF is the per-position softmax. `call(emissions, chain)` decodes: the
    Viterbi tags, int32 [B, S], -1 off the chain."""

    def __init__(self, num_tags, allowed=None, allowed_start=None, **kwargs):
        kwargs.setdefault("dtype", "float32")  # float32 also under mixed_float16
        super().__init__(**kwargs)
        self.num_tags = int(num_tags)
        self.allowed = None if allowed is None else np.asarray(allowed, bool)
        self.allowed_start = None if allowed_start is None else np.asarray(allowed_start, bool)
        k = self.num_tags
        # autocast=False: read as float32 wherever they are read, also inside a float16
        # layer's call (where Keras would otherwise round them to float16).
        self.transitions = self.add_weight(shape=(k, k), initializer="zeros", autocast=False,
                                           name="transitions")
        self.start = self.add_weight(shape=(k,), initializer="zeros", autocast=False,
                                     name="start")
        self.end = self.add_weight(shape=(k,), initializer="zeros", autocast=False, name="end")

    def potentials(self, start_constrained=True):
        """(transitions, start, end) as float32 tensors, forbidden entries at FORBIDDEN.
        `start_constrained` [B] (or a bool): per row, whether the start constraint holds."""
        def constrain(value, allowed):
            value = tf.convert_to_tensor(value, tf.float32)
            return value if allowed is None else tf.where(allowed, value, FORBIDDEN)

        transitions = constrain(self.transitions, self.allowed)
        start = tf.convert_to_tensor(self.start, tf.float32)
        constrained = constrain(start, self.allowed_start)
        return (transitions,
                tf.where(tf.reshape(start_constrained, [-1, 1]), constrained, start),
                tf.convert_to_tensor(self.end, tf.float32))

    def nll(self, emissions, labels, chain):
        """−log p(labelled tags) per row, float32 [B] (0 for a row without labels).

        A chain whose first position is labelled with a tag that may not start (I-X, in a
        window of a long sentence that begins inside an entity) is scored without the start
        constraint: its gold path is then possible, its loss finite."""
        emissions = tf.cast(emissions, tf.float32)
        labels = tf.cast(labels, tf.int32)
        first = tf.where(tf.reduce_any(chain, axis=-1), tf.gather(
            labels, tf.argmax(tf.cast(chain, tf.int32), axis=-1), batch_dims=1), -1)
        start_constrained = True
        if self.allowed_start is not None:
            start_constrained = ~((first >= 0) & tf.gather(~self.allowed_start,
                                                           tf.maximum(first, 0)))
        potentials = self.potentials(start_constrained)
        gold = log_partition(restrict_to_labels(emissions, labels, chain), chain, *potentials)
        return log_partition(emissions, chain, *potentials) - gold

    def viterbi(self, emissions, chain):
        """(tags int32 [B, S], -1 off the chain; the best path's score float32 [B])."""
        return viterbi(tf.cast(emissions, tf.float32), chain, *self.potentials())

    def call(self, emissions, chain):
        return self.viterbi(emissions, chain)[0]

    def get_config(self):
        config = super().get_config()
        config.update(num_tags=self.num_tags,
                      allowed=None if self.allowed is None else self.allowed.tolist(),
                      allowed_start=(None if self.allowed_start is None
                                     else self.allowed_start.tolist()))
        return config

