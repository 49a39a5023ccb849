"""A linear-chain CRF over K tags in TF ops, and the mixin that puts one on a tagging head.

The CRF (Lafferty et al. 2001) scores a tag sequence y_1..y_n on a row's chain positions
t_1 < ... < t_n as

    start[y_1] + Σ_i emissions[t_i, y_i] + Σ_{i>1} transitions[y_{i-1}, y_i] + end[y_n]

and p(y) = exp(score(y)) / Z. The chain is where the boolean `chain` [B, S] is True: other
positions are skipped (a transition links each chain position to the previous one), so a
chain may have gaps and any length; an empty chain has score 0 and log Z = 0. Labels < 0 on
the chain are unobserved: the likelihood sums over their tags (a partially labelled chain).

Forbidden transitions and starts (`allowed`, `allowed_start`, IOB2's from `iob2_allowed`)
score FORBIDDEN in the likelihood (no probability mass goes through them) and -inf in
Viterbi (no decoded path takes one while any allowed path exists). All the arithmetic is
float32 whatever the emissions' dtype: the loss is the difference of two whole-sentence
log-scores of a few hundred, where float16's values are 0.25 apart (256-512).
"""

import keras
import numpy as np
import tensorflow as tf
from absl import flags

from kerasbert.kind_names import PADDING_LOGIT

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
    """The state after each position, [S, B, K]: start + e at the chain's first position,
    step(previous state)[0] + e at the next ones, the previous state off the chain. Also
    whether the chain has begun, [S, B], and step(previous state)[1], int32 [S, B, K]
    (Viterbi's best previous tags; tf.scan stacks only what it carries)."""
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
        self.supports_masking = True  # a masked LSTM's Keras mask passes; `chain` is its own
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
        self.built = True  # its weights do not depend on the inputs

    def potentials(self, start_constrained=True, forbidden=FORBIDDEN):
        """(transitions, start, end) as float32 tensors, forbidden entries at `forbidden`.
        `start_constrained` [B] (or a bool): per row, whether the start constraint holds."""
        def constrain(value, allowed):
            value = tf.convert_to_tensor(value, tf.float32)
            return value if allowed is None else tf.where(allowed, value, forbidden)

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
        return viterbi(tf.cast(emissions, tf.float32), chain,
                       *self.potentials(forbidden=-float("inf")))

    def call(self, emissions, chain):
        return self.viterbi(emissions, chain)[0]

    def get_config(self):
        config = super().get_config()
        config.update(num_tags=self.num_tags,
                      allowed=None if self.allowed is None else self.allowed.tolist(),
                      allowed_start=(None if self.allowed_start is None
                                     else self.allowed_start.tolist()))
        return config


# ---- on a tagging head -----------------------------------------------------------------------

CONSTRAINTS = ("iob2", "none")


def chain_positions(padding_mask):
    """What a tagging row's CRF chains over: its real tokens but the first and the last
    (every tagging row is [CLS] word pieces [SEP])."""
    real = tf.cast(padding_mask, tf.bool)
    length = tf.reduce_sum(tf.cast(real, tf.int32), axis=-1, keepdims=True)
    position = tf.range(tf.shape(real)[-1])[None]
    return real & (position > 0) & (position < length - 1)


class CRFTagging:
    """Mixin for a tagging head layer (the class after it in the bases computes per-token
    logits in `call`): the logits become the emissions of a CRF over every word piece.

    Training (training=True) returns the emissions; `per_example_loss` (which the training
    loop prefers to the kind's, kerasbert/kinds/base.py) is the CRF's negative
    log-likelihood of the labelled positions — each word's first piece — summed over the
    tags of the unlabelled ones (the other pieces of a word, and the words at a window's
    edges that another window labels), divided by the labelled positions: at initialisation
    (zero transitions, no constraint) it equals the softmax tagger's loss, so its recipe's
    learning rates carry over. Inference returns 0 on the Viterbi path and PADDING_LOGIT
    elsewhere, so the kind's argmax at each word's first piece reads the path (evaluation,
    prediction files and the exported tagging graph unchanged), and its softmax gives
    probability 1 to the decoded tag.

    Why every word piece and not the first pieces only: the model does not know at
    inference where words start (a CoNLL word such as "U.S." is several pieces none of
    which is a "##" continuation), and chaining over what it knows keeps the model's inputs
    those of every other head. Consequences: transitions are learned between consecutive
    pieces; Viterbi maximises over the unlabelled pieces' tags too, where training sums
    over them; and IOB2 constraints hold piece to piece, so a word tagged O followed by a
    word tagged I-X needs a B-X on a piece in between (conlleval reads such an I-X as B-X).
    A window of a long sentence (kerasbert/tasks/conll/features.py) may start inside an entity; its
    first words are labelled in the window before, so here they are free and the start
    constraint costs nothing. Only where words are long next to the window is a window's
    first word labelled in it (simulated: none of 44,000 windows of 1-5-piece words at
    max_seq_length 128 or 48; 1.6% of windows of 1-3-piece words at 16); training then
    lifts the constraint for an I- label (CRF.nll), decoding cannot tell and gives that
    word no I- tag. With --document_context a row's context pieces (its document's other
    words, kerasbert/tasks/conll/features.py) are unlabelled chain positions too: the likelihood
    sums over their tags and Viterbi runs through them.
    """

    def __init__(self, num_outputs, *args, labels=(), constraints="iob2", **kwargs):
        super().__init__(num_outputs, *args, **kwargs)
        if constraints not in CONSTRAINTS:
            raise ValueError(f"constraints must be one of {CONSTRAINTS}, not {constraints!r}")
        if labels and len(labels) != num_outputs:
            raise ValueError(f"{len(labels)} labels for {num_outputs} outputs")
        self.labels, self.constraints = tuple(labels), constraints
        allowed = iob2_allowed(self.labels) if constraints == "iob2" and labels else (None, None)
        self.crf = CRF(num_outputs, *allowed, name="crf")

    def emissions(self, features, training=False):
        return super().call(features, training=training)

    def call(self, features, training=False):
        emissions = self.emissions(features, training=training)
        if training:
            return emissions
        tags = self.crf(emissions, chain_positions(features["padding_mask"]))
        return tf.where(tf.one_hot(tags, self.crf.num_tags) > 0, 0.0, PADDING_LOGIT)

    def per_example_loss(self, labels, outputs, inputs):
        labels = tf.cast(labels, tf.int32)
        chain = chain_positions(inputs["padding_mask"])
        labelled = tf.reduce_sum(tf.cast(chain & (labels >= 0), tf.float32), axis=-1)
        return self.crf.nll(outputs, labels, chain) / tf.maximum(labelled, 1.0)

    def get_config(self):
        config = super().get_config()
        config.update(labels=list(self.labels), constraints=self.constraints)
        return config


def define_constraints_flag(head, flag_values):
    """`--<head>_constraints`, for a CRF head's kerasbert_define_flags."""
    flags.DEFINE_enum(
        f"{head}_constraints", "iob2", CONSTRAINTS,
        f"Transitions the {head} head's CRF forbids: iob2 (I-X only after B-X or I-X, and "
        "not first in a row; the tags must be IOB2, as CoNLL's are once read) or none.",
        flag_values=flag_values)
