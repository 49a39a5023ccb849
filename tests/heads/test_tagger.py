"""The fine-tuning token classifier: shape, the linear map, dropout, training on a tiny BERT."""

import keras
import keras_hub
import numpy as np
import tensorflow as tf

from kerasbert.heads.tagger import TokenTagger, build_tagger
from kerasbert.hookspecs import HeadContext
from kerasbert.model.task_model import TaskModel
from kerasbert.tasks import base
from kerasbert.plugins import resolve_kind

TINY = dict(vocabulary_size=40, num_layers=2, num_heads=2, hidden_dim=32, intermediate_dim=64,
            max_sequence_length=16)


def features(batch=3, seq=7, hidden=32, seed=0):
    rng = np.random.default_rng(seed)
    return {"sequence_output": rng.normal(size=(batch, seq, hidden)).astype("float32"),
            "pooled_output": rng.normal(size=(batch, hidden)).astype("float32"),
            "padding_mask": np.ones((batch, seq), "int32")}


def test_logits_per_token_are_the_linear_map_of_each_hidden():
    head = TokenTagger(9, dropout=0.1, seed=1)
    f = features()
    logits = np.asarray(head(f))
    assert logits.shape == (3, 7, 9)
    kernel, bias = (np.asarray(w) for w in head.output_dense.weights)
    assert kernel.shape == (32, 9)
    np.testing.assert_allclose(logits, f["sequence_output"] @ kernel + bias, atol=1e-5)
    np.testing.assert_array_equal(np.asarray(head(f)), logits)  # no dropout at inference
    assert not np.allclose(np.asarray(head(f, training=True)), logits)  # dropout in training


def test_build_tagger_from_context():
    context = HeadContext(kind=base.TAGGING, num_outputs=5, hidden_dim=32, dropout=0.25, seed=7)
    head = build_tagger(context)
    assert (head.name, head.num_outputs, head.dropout, head.seed) == ("tagger", 5, 0.25, 7)
    # Same seed, same initial weights: restarts differ only by their seed.
    a, b = build_tagger(context), build_tagger(context)
    a(features()), b(features())
    np.testing.assert_array_equal(np.asarray(a.output_dense.kernel), np.asarray(b.output_dense.kernel))
    clone = TokenTagger.from_config(head.get_config())
    assert (clone.num_outputs, clone.dropout, clone.seed) == (5, 0.25, 7)


def test_trains_with_the_tagging_loss_on_a_tiny_bert():
    # Learnable set: the label of a token is its id mod 3; position 0 ([CLS]) and padding
    # are ignored (-1), as the CoNLL task does for [CLS], [SEP] and non-first pieces.
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    token_ids = rng.integers(1, 40, size=(8, 10)).astype("int32")
    mask = (np.arange(10)[None] < rng.integers(4, 11, size=(8, 1))).astype("int32")
    token_ids *= mask
    labels = np.where(mask == 1, token_ids % 3, -1).astype("int32")
    labels[:, 0] = -1
    inputs = {"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids),
              "padding_mask": mask}
    model = TaskModel(keras_hub.models.BertBackbone(**TINY), TokenTagger(3, dropout=0.0, seed=0))
    assert model(inputs).shape == (8, 10, 3)
    optimizer = keras.optimizers.Adam(1e-3)
    # The pooler gets no gradient from a per-token loss; leave it out of the update.
    variables = [v for v in model.trainable_variables if "pooled_dense" not in v.path]

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(resolve_kind(base.TAGGING).per_example_loss(labels, model(inputs, training=True)))
        optimizer.apply(tape.gradient(loss, variables), variables)
        return loss

    first = float(step())
    for _ in range(30):
        last = float(step())
    assert first > 1.0 and last < 0.5 * first


def _cross_entropy(logits, label):
    return float(np.log(np.exp(logits).sum()) - logits[label])


def test_tagging_loss_sentence_mean_and_token_mean_by_hand():
    # Sentence 0 has two labelled words, sentence 1 one (-1: not scored): by hand,
    # sentence_mean = ((a + b) / 2 + c) / 2 and token_mean = (a + b + c) / 3.
    from kerasbert.training.loop import token_weighted

    logits = np.array([[[2.0, 0.0, 0.0], [0.0, 1.0, 0.0], [5.0, 5.0, 5.0]],
                       [[0.0, 0.0, 3.0], [1.0, 1.0, 1.0], [0.0, 9.0, 0.0]]], "float32")
    labels = np.array([[0, 2, -1], [1, -1, -1]], "int32")
    a, b, c = (_cross_entropy(logits[0, 0], 0), _cross_entropy(logits[0, 1], 2),
               _cross_entropy(logits[1, 0], 1))
    kind = resolve_kind(base.TAGGING)

    def sentence_loss(labels, outputs, inputs):
        return kind.per_example_loss(labels, outputs)

    batch_mean = {name: float(tf.nn.compute_average_loss(loss(labels, logits, None),
                                                          global_batch_size=2))
                  for name, loss in (("sentence", sentence_loss),
                                     ("token", token_weighted(sentence_loss)))}
    np.testing.assert_allclose(batch_mean["sentence"], ((a + b) / 2 + c) / 2, rtol=1e-6)
    np.testing.assert_allclose(batch_mean["token"], (a + b + c) / 3, rtol=1e-6)
    # A batch with no labelled word at all is a zero loss, not a division by zero.
    none = np.full_like(labels, -1)
    assert float(tf.reduce_sum(token_weighted(sentence_loss)(none, logits, None))) == 0.0
