"""The head harness: fake encoder outputs, and the checks every registered head passes on
every kind it declares (`HeadSpec.kinds`; installed plugins' heads included).

A head is a Keras layer fed the encoder's outputs (kerasbert/hookspecs.py, HeadSpec), so
it is checked without an encoder: `encoder_features` makes a tiny batch of them (batch 2,
seq 8, hidden 32, 4 layers) and `check_head(head, kind)` builds the head from the
HeadContext a run would give it and runs, in order:

    check_output_layout       the kind's output shape (HeadSpec's list), finite floats
    check_config_round_trip   from_config(get_config()) through JSON computes the same
    check_padding_invariance  extra padding (garbage states) leaves the real positions'
                              outputs as they were
    check_determinism         HeadContext.seed fixes the initial weights and the dropout;
                              another seed draws other weights
    check_gradients           the training loss (the head's own `per_example_loss`, else
                              the kind's) reaches every trainable weight; a head that
                              trains the encoder passes a gradient on to its outputs

tests/heads/test_head_harness.py runs it over every (head, kind) pair; the head tests
borrow the fake outputs (`pair_features`, `sentence_features`, `pad_features`).
"""

import json
import types

import keras
import numpy as np
import tensorflow as tf

from kerasbert import plugins
from kerasbert.hookspecs import HeadContext
from kerasbert.model import builder

BATCH, SEQ, HIDDEN, LAYERS = 2, 8, 32, 4
CLS, SEP = 2, 3  # the sample vocabulary's [CLS] and [SEP] ids
# Each row is [CLS] A [SEP] B [SEP] then padding: segments 0 for [CLS] A [SEP], 1 for B [SEP].
ROWS = ((2, 2), (1, 1))  # (A words, B words) of each row: lengths 7 and 5 of SEQ = 8
# The built-in heads' defaults are BERT-base sized (768 LSTM units, ...): small ones here.
TINY_OPTIONS = {
    "bimpm": {"bimpm_perspectives": 4, "bimpm_lstm_units": 8},
    "bimpm_no_context": {"bimpm_no_context_perspectives": 4, "bimpm_no_context_lstm_units": 8},
    "sim_transformer": {"sim_transformer_perspectives": 4, "sim_transformer_hidden_dim": 16,
                        "sim_transformer_num_heads": 2, "sim_transformer_intermediate_dim": 16},
    "feature_bilstm": {"feature_bilstm_lstm_units": 8},
    "bilstm_crf": {"bilstm_crf_lstm_units": 8},
    "bilstm_tagger": {"bilstm_tagger_lstm_units": 8},
    "sequence_classifier": {"sequence_classifier_lstm_units": 8,
                            "sequence_classifier_filters": 8},
    "top_bilstm": {"top_bilstm_units": 8},
}
# HeadSpec's output layout per kerasbert kind, (batch, seq, num_outputs) -> shape. A
# multiple-choice head scores each flattened [CLS] context [SEP] ending [SEP] row.
OUTPUT_SHAPES = {
    "classification": lambda b, s, k: (b, k),
    "regression": lambda b, s, k: (b, 1),
    "multiple_choice": lambda b, s, k: (b, 1),
    "span": lambda b, s, k: (b, s, 2),
    "tagging": lambda b, s, k: (b, s, k),
}
ATOL = 1e-5


# ---- fake encoder outputs ---------------------------------------------------------------

def pair_inputs(rows=ROWS, seq=SEQ):
    """int32 token_ids, segment_ids, padding_mask [len(rows), seq] of [CLS] A [SEP] B [SEP]
    rows (B may have 0 words: then no second [SEP]), right-padded with zeros."""
    token_ids = np.zeros((len(rows), seq), np.int32)
    segment_ids = np.zeros_like(token_ids)
    for i, (a, b) in enumerate(rows):
        first = [CLS] + [5 + i + j for j in range(a)] + [SEP]
        second = [7 + i + j for j in range(b)] + [SEP] if b else []
        token_ids[i, :len(first) + len(second)] = first + second
        segment_ids[i, len(first):len(first) + len(second)] = 1
    return {"token_ids": token_ids, "segment_ids": segment_ids,
            "padding_mask": (token_ids > 0).astype(np.int32)}


def encoder_features(seed=0, rows=ROWS, seq=SEQ, hidden=HIDDEN, layers=LAYERS,
                     all_layers=True):
    """What TaskModel hands a head: the int32 inputs of `pair_inputs` and random encoder
    outputs, sequence_output [B, S, H] (non-zero at padding too, as an encoder's are),
    pooled_output [B, H] and, with `all_layers`, the embeddings and `layers` layer outputs
    (the last one is sequence_output)."""
    rng = np.random.default_rng(seed)
    batch = len(rows)
    stack = [rng.normal(size=(batch, seq, hidden)).astype(np.float32) for _ in range(layers + 1)]
    features = {**pair_inputs(rows, seq), "sequence_output": stack[-1],
                "pooled_output": np.tanh(rng.normal(size=(batch, hidden))).astype(np.float32)}
    if all_layers:
        features["all_layers"] = stack
    return features


# Three pairs of 9 positions: [CLS] a a [SEP] b b [SEP] pad pad; [CLS] a [SEP] b b b b
# [SEP] pad; [CLS] a a a [SEP] pad ... (no B). Padding is segment 1 in the first row.
SEGMENTS = np.array([[0, 0, 0, 0, 1, 1, 1, 1, 1],
                     [0, 0, 0, 1, 1, 1, 1, 1, 0],
                     [0, 0, 0, 0, 0, 0, 0, 0, 0]], "int32")
MASK = np.array([[1, 1, 1, 1, 1, 1, 1, 0, 0],
                 [1, 1, 1, 1, 1, 1, 1, 1, 0],
                 [1, 1, 1, 1, 1, 0, 0, 0, 0]], "int32")


def pair_features(seed=0, hidden=8):
    """The pair heads' tests' batch (BIMPM, Sim-Transformer): SEGMENTS and MASK above with
    random sequence_output [3, 9, hidden] and pooled_output [3, hidden]."""
    rng = np.random.default_rng(seed)
    return {"sequence_output": rng.normal(size=(3, 9, hidden)).astype("float32"),
            "pooled_output": rng.normal(size=(3, hidden)).astype("float32"),
            "token_ids": MASK.copy(), "segment_ids": SEGMENTS, "padding_mask": MASK}


def sentence_features(seed=0, batch=4):
    """The sequence heads' tests' batch (BiLSTM tagger, sequence classifier): sentences
    of 9 positions, lengths 9, 6, 4, 2, 7, 3, 8, 5 (the first `batch`), one segment;
    random sequence_output [batch, 9, 8] and pooled_output [batch, 8]."""
    rng = np.random.default_rng(seed)
    lengths = np.array([9, 6, 4, 2, 7, 3, 8, 5][:batch])[:, None]
    mask = (np.arange(9)[None] < lengths).astype("int32")
    return {"sequence_output": rng.normal(size=(batch, 9, 8)).astype("float32"),
            "pooled_output": rng.normal(size=(batch, 8)).astype("float32"),
            "token_ids": mask.copy(), "segment_ids": np.zeros_like(mask),
            "padding_mask": mask}


def pad_features(features, extra, seed=1, segment_fill=1):
    """`features` with `extra` more padding positions: garbage encoder states (scale 9),
    token_ids and padding_mask 0, segment_ids `segment_fill`; pooled_output unchanged."""
    rng = np.random.default_rng(seed)

    def garbage(states):
        noise = 9.0 * rng.normal(size=states.shape[:1] + (extra,) + states.shape[2:])
        return np.concatenate([states, noise.astype(states.dtype)], 1)

    out = {}
    for key, value in features.items():
        if key == "pooled_output":
            out[key] = value
        elif key == "sequence_output":
            out[key] = garbage(value)
        elif key == "all_layers":
            out[key] = [garbage(layer) for layer in value]
        else:
            fill = segment_fill if key == "segment_ids" else 0
            out[key] = np.pad(value, ((0, 0), (0, extra)), constant_values=fill)
    if "all_layers" in out:  # the last layer is sequence_output, garbage included
        out["all_layers"][-1] = out["sequence_output"]
    return out


# ---- the (head, kind) pairs -------------------------------------------------------------

def head_kind_pairs(registry=None):
    """Every (head name, kind name) a registered head declares, sorted."""
    registry = registry or plugins.registry()
    return sorted((name, kind) for name, (spec, _) in registry.heads.items()
                  for kind in spec.kinds)


def first_task(kind, registry=None):
    """The first registered task of `kind` by name, or None."""
    registry = registry or plugins.registry()
    names = sorted(name for name, (task, _) in registry.tasks.items() if task.kind == kind)
    return registry.task(names[0]) if names else None


def head_context(head, kind, seed=0, dropout=0.1, registry=None):
    """The HeadContext a run of the kind's first registered task gives `head`
    (kerasbert.model.builder.head_context: its num_outputs and labels) on a LAYERS-layer,
    HIDDEN-wide encoder, with TINY_OPTIONS; 3 made-up labels where no task is of the kind."""
    task = first_task(kind, registry)
    options = TINY_OPTIONS.get(head, {})
    if task is None:
        return HeadContext(kind=kind, num_outputs=3, hidden_dim=HIDDEN, dropout=dropout,
                           options=options, seed=seed, labels=("a", "b", "c"),
                           num_layers=LAYERS)
    encoder = types.SimpleNamespace(hidden_dim=HIDDEN, dropout=dropout,
                                    transformer_layers=[None] * LAYERS)
    return builder.head_context(task, encoder, options, seed)


def build(head, kind, seed=0, registry=None):
    """(head layer, its context) of registered head `head` for `kind`."""
    registry = registry or plugins.registry()
    context = head_context(head, kind, seed=seed, registry=registry)
    return registry.head(head).build(context), context


def features_for(layer, seed=0, **options):
    """encoder_features as TaskModel gives them to `layer`: all_layers only when it asks."""
    return encoder_features(seed, all_layers=getattr(layer, "needs_all_layers", False),
                            **options)


def call(layer, features, training=False):
    return np.asarray(keras.ops.convert_to_numpy(layer(features, training=training)))


# ---- labels and loss --------------------------------------------------------------------

def synthetic_labels(kind, context, features):
    """Labels in a kerasbert kind's layout for `features` (None for another kind): tagging
    labels -1 at [CLS], [SEP] and padding and a valid IOB2 sequence elsewhere (O, with one
    B- tag), since a CRF head's constraints give an invalid one no likelihood."""
    batch = features["padding_mask"].shape[0]
    if kind == "classification":
        return np.arange(batch, dtype=np.int32) % context.num_outputs
    if kind == "regression":
        return np.linspace(-0.5, 0.5, batch).astype(np.float32)
    if kind == "multiple_choice":
        return np.zeros([1], np.int32)  # the batch's rows are the choices of one example
    if kind == "span":
        return np.array([[1, 2], [3, 3]] * batch, np.int32)[:batch]
    if kind == "tagging":
        labels = list(context.labels)
        outside = labels.index("O") if "O" in labels else 0
        begin = next((i for i, name in enumerate(labels) if name.startswith("B-")), outside)
        words = (features["padding_mask"] == 1) & (features["token_ids"] != CLS) & (
            features["token_ids"] != SEP)
        tags = np.where(words, outside, -1).astype(np.int32)
        tags[:, 1] = np.where(words[:, 1], begin, -1)
        return tags
    return None


def task_labels(kind, batch, registry=None):
    """The first `batch` labels of the bundled sample of `kind`'s first registered task,
    featurized at SEQ on the sample vocabulary (None without such a task): labels for a
    plugin's kind, whose layout only its tasks know."""
    from kerasbert.data.tokenization import WordPieceTokenizer
    from kerasbert.model.encoders import SAMPLE_VOCAB

    task = first_task(kind, registry)
    if task is None:
        return None
    examples = task.read_examples(task.sample_dir(), "train")
    features = task.featurize(examples, WordPieceTokenizer(SAMPLE_VOCAB, do_lower_case=True),
                              SEQ)
    return None if features.labels is None else np.asarray(features.labels)[:batch]


def regrouped(kind_object, outputs, batch):
    """A choices kind's outputs as TaskModel regroups them: [1, batch] (one example)."""
    if kind_object.inputs_rank == 3:
        return tf.reshape(outputs, [1, batch])
    return outputs


def training_loss(layer, kind, context, features, registry=None):
    """Mean training loss of `layer` on `features` (call(training=True)): the head's own
    `per_example_loss` when it has one, else the kind's; for a kind without labels to make,
    the mean square of the outputs (enough to reach every weight)."""
    registry = registry or plugins.registry()
    kind_object = registry.kind(kind)
    batch = features["padding_mask"].shape[0]
    labels = synthetic_labels(kind, context, features)
    if labels is None:
        labels = task_labels(kind, batch, registry)
    outputs = layer(features, training=True)
    own = getattr(layer, "per_example_loss", None)
    if own is not None:
        return tf.reduce_mean(own(labels, outputs, features))
    if labels is None:
        return tf.reduce_mean(tf.square(tf.cast(outputs, tf.float32)))
    outputs = regrouped(kind_object, outputs, batch)
    return tf.reduce_mean(kind_object.per_example_loss(labels, outputs))


# ---- the checks -------------------------------------------------------------------------

# Heads whose dropout HeadContext.seed does not reach (their training-mode outputs differ
# between two builds of one seed; a run still repeats, since it seeds Keras globally).
UNSEEDED_DROPOUT = {
    "sim_transformer": "keras-hub's TransformerEncoder takes no dropout seed",
}


class HeadUnderTest:
    """Registered head `head` built for `kind` (seed 0) and its outputs on encoder_features,
    shared by the checks of one (head, kind) pair so that each builds little."""

    def __init__(self, head, kind, registry=None):
        self.head, self.kind = head, kind
        self.registry = registry or plugins.registry()
        self.layer, self.context = build(head, kind, seed=0, registry=self.registry)
        self.features = features_for(self.layer)
        self.outputs = call(self.layer, self.features)

    def __str__(self):
        return f"{self.head} on {self.kind}"


def check_output_layout(h):
    """Finite floats in the kind's layout (HeadSpec's list; for a plugin's kind, which
    HeadSpec does not describe, one row per example)."""
    assert np.issubdtype(h.outputs.dtype, np.floating), f"{h}: {h.outputs.dtype} outputs"
    assert np.isfinite(h.outputs).all(), f"{h}: outputs not finite"
    if h.kind in OUTPUT_SHAPES:
        expected = OUTPUT_SHAPES[h.kind](BATCH, SEQ, h.context.num_outputs)
        assert h.outputs.shape == expected, f"{h}: outputs {h.outputs.shape} != {expected}"
    else:
        assert h.outputs.shape[0] == BATCH, f"{h}: outputs {h.outputs.shape}"


def check_config_round_trip(h):
    """from_config of get_config through JSON (as a .keras file stores it) builds the same
    weights, which with the original's values compute the same outputs."""
    h.clone = type(h.layer).from_config(json.loads(json.dumps(h.layer.get_config())))
    h.clone_outputs = call(h.clone, h.features)  # builds its weights
    assert [w.shape for w in h.clone.weights] == [w.shape for w in h.layer.weights], str(h)
    h.clone_weights = [w.numpy() for w in h.clone.weights]  # as seed 0 drew them
    h.clone.set_weights(h.layer.get_weights())
    np.testing.assert_allclose(call(h.clone, h.features), h.outputs, atol=ATOL, err_msg=str(h))


def check_padding_invariance(h, extra=3):
    """Extra padding (garbage states) changes no output at a real position: a per-example
    output not at all, a per-position one ([B, S, ...]) not at the first S positions where
    padding_mask is 1."""
    padded = call(h.layer, pad_features(h.features, extra))
    if padded.shape == h.outputs.shape:
        np.testing.assert_allclose(padded, h.outputs, atol=ATOL, err_msg=str(h))
        return
    assert padded.shape[1] == h.outputs.shape[1] + extra == SEQ + extra, (
        f"{h}: outputs {h.outputs.shape}, then {padded.shape} with {extra} more positions")
    real = h.features["padding_mask"] == 1
    np.testing.assert_allclose(padded[:, :SEQ][real], h.outputs[real], atol=ATOL,
                               err_msg=str(h))


ENCODER_OUTPUTS = ("sequence_output", "pooled_output")


def check_gradients(h):
    """Every trainable weight of the head is reached by a finite gradient of the training
    loss (it may be 0: a choice score's bias cancels in the softmax over the choices); a
    head that trains the encoder (trains_backbone, default True) passes a non-zero
    gradient on to the encoder outputs it reads (sequence_output, pooled_output or
    all_layers)."""
    watched = {k: tf.constant(h.features[k]) for k in ENCODER_OUTPUTS}
    if "all_layers" in h.features:
        watched["all_layers"] = [tf.constant(x) for x in h.features["all_layers"]]
        watched["sequence_output"] = watched["all_layers"][-1]
    with tf.GradientTape() as tape:
        tape.watch(tf.nest.flatten(watched))
        loss = training_loss(h.layer, h.kind, h.context, {**h.features, **watched},
                             h.registry)
    assert np.isfinite(float(loss)), f"{h}: training loss {float(loss)}"
    weights = h.layer.trainable_weights
    assert weights, f"{h}: no trainable weights"
    grads = tape.gradient(loss, list(weights) + tf.nest.flatten(watched))
    grads = [None if g is None else tf.convert_to_tensor(g).numpy() for g in grads]
    dead = [w.path for w, g in zip(weights, grads) if g is None or not np.isfinite(g).all()]
    assert not dead, f"{h}: no finite gradient reaches {dead}"
    if getattr(h.layer, "trains_backbone", True):
        assert any(g is not None and np.any(g) for g in grads[len(weights):]), (
            f"{h} trains the encoder but passes it no gradient")


def check_determinism(h):
    """HeadContext.seed decides the head's initial weights and its dropout: the clone of
    check_config_round_trip (seed 0 too, by its config) drew the same weights and gave the
    same outputs, and the same dropout masks in training (the first training call of
    each); a build of seed 1 draws other weights (checked on the head's first kind only:
    the draw is the factory's, whatever the kind, and a build costs seconds)."""
    for a, b in zip(h.layer.weights, h.clone_weights):
        np.testing.assert_array_equal(a.numpy(), b, err_msg=f"{h}: {a.path}")
    np.testing.assert_array_equal(h.clone_outputs, h.outputs, err_msg=str(h))
    if h.head not in UNSEEDED_DROPOUT:
        np.testing.assert_array_equal(call(h.clone, h.features, training=True),
                                      call(h.layer, h.features, training=True),
                                      err_msg=f"{h}: dropout in training")
    if h.kind != h.registry.head(h.head).kinds[0]:
        return
    other, _ = build(h.head, h.kind, seed=1, registry=h.registry)
    call(other, h.features)
    assert any(not np.array_equal(a.numpy(), b.numpy())
               for a, b in zip(h.layer.weights, other.weights)), (
        f"{h}: seeds 0 and 1 build the same weights")


# In this order: check_determinism reads check_config_round_trip's clone and
# compares h.layer's first dropout masks (before check_gradients' training call).
CHECKS = (check_output_layout, check_config_round_trip, check_padding_invariance,
          check_determinism, check_gradients)


def check_head(head, kind, registry=None):
    """Every check of this module on registered head `head` for `kind`."""
    h = HeadUnderTest(head, kind, registry)
    for check in CHECKS:
        try:
            check(h)
        except AssertionError as e:
            e.add_note(f"harness check {check.__name__}: {h}")
            raise
