"""tagger_crf and bilstm_crf: the loss the training loop takes from them, the Viterbi path
as their inference outputs, and bilstm_crf on a frozen encoder's cached layers."""

import dataclasses
import itertools

import keras
import numpy as np
import pytest
import tensorflow as tf
from absl import flags

from kerasbert import plugins
from kerasbert.heads import bilstm_crf
from kerasbert.heads.bilstm_crf import BiLSTMCRF
from kerasbert.heads.crf import chain_positions, iob2_allowed
from kerasbert.heads.tagger_crf import TaggerCRF
from kerasbert.hookspecs import HeadContext
from kerasbert.kinds.base import training_loss
from kerasbert.tasks import base
from kerasbert.tasks.conll import LABELS

RNG = np.random.default_rng(0)
# Rows of [CLS] pieces [SEP] and padding; labels on some pieces (first pieces of words).
MASK = np.array([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0], [1, 1, 0, 0, 0, 0]], np.int32)
LABELLED = np.array([[-1, 1, -1, 2, 0, -1], [-1, 0, 3, -1, -1, -1], [-1] * 6], np.int32)
FEATURES = {"sequence_output": RNG.normal(size=(3, 6, 16)).astype("float32"),
            "padding_mask": MASK}
FEATURES["all_layers"] = [FEATURES["sequence_output"]] * 3


def _heads(constraints="iob2"):
    return [TaggerCRF(9, labels=LABELS, constraints=constraints, dropout=0.0, seed=1),
            BiLSTMCRF(9, labels=LABELS, constraints=constraints, layers="last",
                      lstm_units=4, lstm_layers=1, dropout=0.0, seed=1)]


def _best_path(emissions, head):
    """Brute force over every IOB2-allowed tag sequence of a row's chain (≤ 4 positions)."""
    transitions, start, end = (np.asarray(w, np.float64)
                               for w in (head.crf.transitions, head.crf.start, head.crf.end))
    allowed, allowed_start = iob2_allowed(LABELS)

    def score(tags):
        if not allowed_start[tags[0]] or not all(allowed[a, b]
                                                 for a, b in itertools.pairwise(tags)):
            return -np.inf
        return (start[tags[0]] + end[tags[-1]] + sum(emissions[i, t] for i, t in enumerate(tags))
                + sum(transitions[a, b] for a, b in itertools.pairwise(tags)))

    return max(itertools.product(range(9), repeat=len(emissions)), key=score)


@pytest.mark.parametrize("policy", ["float32", "mixed_float16"])
def test_inference_outputs_are_the_viterbi_path_of_the_emissions(policy):
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        for head in _heads():
            head(FEATURES)
            head.crf.transitions.assign(RNG.normal(scale=2.0, size=(9, 9)))
            head.crf.start.assign(RNG.normal(size=9))
            emissions = np.asarray(head.emissions(FEATURES), np.float64)
            outputs = np.asarray(head(FEATURES))
            assert outputs.dtype == np.float32
            chain = np.asarray(chain_positions(MASK))
            for row in range(3):
                got = outputs[row][chain[row]]
                if chain[row].any():
                    assert tuple(got.argmax(-1)) == _best_path(emissions[row][chain[row]], head)
                # The kind's softmax gives the decoded tag probability 1.
                np.testing.assert_array_equal(tf.nn.softmax(got).numpy().max(-1), 1.0)
    finally:
        keras.config.set_dtype_policy(previous)


def test_the_training_loop_takes_the_heads_loss():
    kind = plugins.registry().kind(base.TAGGING)
    for head in _heads():
        model = type("Model", (), {"head": head})()
        assert training_loss(kind, model) == head.per_example_loss
    plain = training_loss(kind, type("Model", (), {"head": keras.layers.Dense(9)})())
    logits = RNG.normal(size=(3, 6, 9)).astype("float32")
    np.testing.assert_array_equal(plain(LABELLED, logits, FEATURES),
                                  kind.per_example_loss(LABELLED, logits))


def test_untrained_crf_loss_is_the_softmax_taggers():
    # Zero transitions and no constraint: the CRF factorises into per-position softmaxes,
    # the unlabelled pieces sum to 1, so the loss per label is the tagging kind's.
    kind = plugins.registry().kind(base.TAGGING)
    for head in _heads(constraints="none"):
        emissions = head(FEATURES, training=True)
        np.testing.assert_allclose(head.per_example_loss(LABELLED, emissions, FEATURES),
                                   kind.per_example_loss(LABELLED, emissions), atol=1e-5)


def test_flags_factory_and_config():
    values = flags.FlagValues()
    bilstm_crf.define_flags(values)
    values(["prog"])
    assert (values.bilstm_crf_layers, values.bilstm_crf_lstm_units,
            values.bilstm_crf_lstm_layers, values.bilstm_crf_frozen,
            values.bilstm_crf_constraints) == ("last", 256, 1, False, "iob2")
    registry = plugins.registry()
    context = HeadContext(kind=base.TAGGING, num_outputs=9, hidden_dim=16, dropout=0.1,
                          labels=LABELS, seed=3,
                          options={"bilstm_crf_frozen": True, "bilstm_crf_layers": "sum_all",
                                   "bilstm_crf_lstm_layers": 2,
                                   "bilstm_crf_constraints": "none"})
    head = registry.head("bilstm_crf").build(context)
    assert not head.trains_backbone and head.needs_all_layers and head.crf.allowed is None
    assert (len(head.bilstms), head.layers_choice, head.lstm_units) == (2, "sum_all", 256)
    clone = BiLSTMCRF.from_config(head.get_config())
    assert (clone.frozen, clone.labels, clone.lstm_layers) == (True, LABELS, 2)
    tagger = registry.head("tagger_crf").build(dataclasses.replace(context, options={}))
    assert tagger.crf.allowed is not None and tagger.crf.allowed_start.sum() == 5  # no I-
    assert registry.head("bilstm_crf").build(
        dataclasses.replace(context, options={})).trains_backbone


def test_bilstm_crf_trains_on_a_frozen_encoders_cached_layers(tmp_path, monkeypatch):
    from kerasbert.config import RunConfig
    from kerasbert.errors import InputError
    from kerasbert.heads import feature_bilstm
    from kerasbert.run import execute

    def config(name, **options):
        return RunConfig(task="conll2003", head="bilstm_crf", output_dir=str(tmp_path / name),
                         init_checkpoint="random", model_size="2/32/2", max_seq_length=32,
                         max_train_examples=8, max_eval_examples=4, train_batch_size=8,
                         num_train_epochs=1.0, learning_rate=1e-3, seed=7,
                         feature_cache_dir=str(tmp_path / "cache"),
                         head_options={"bilstm_crf_lstm_units": 8, **options})

    with pytest.raises(InputError, match="--bilstm_crf_frozen"):  # a fine-tuned encoder
        execute(config("fine_tuned"))
    first = execute(config("frozen", bilstm_crf_frozen=True))
    assert len(list((tmp_path / "cache").glob("last-*.npy"))) == 2  # train, valid

    def no_encoder(*args, **kwargs):
        raise AssertionError("the encoder ran although its layers were cached")

    monkeypatch.setattr(feature_bilstm, "_encoder", no_encoder)
    assert execute(config("again", bilstm_crf_frozen=True)) == first
