"""Every registered task kind (kerasbert's and installed plugins'), against the TaskKind
contract (kerasbert/kinds/base.py): the loss, the accuracy count, the input layout, label
padding, serving and, where the kind has one, decoding.

The outputs are a real model's: a tiny random encoder with the head of the kind's first
registered task (or the first head declaring the kind) on the first rows of that task's
bundled sample, featurized at 32 tokens; the labels are that sample's.
"""

import copy
import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from kerasbert import plugins
from kerasbert.config import RunConfig, configure_task
from kerasbert.data.tokenization import WordPieceTokenizer
from kerasbert.kinds.base import Serving, TaskKind
from kerasbert.model import builder, encoders
from tests import harness

ROWS, SEQ = 4, 32
KINDS = sorted(plugins.registry().kinds)
PER_TOKEN_KINDS = [name for name in KINDS if plugins.registry().kind(name).labels_per_token]
INPUT_NAMES = {"token_ids", "segment_ids", "padding_mask"}


@dataclasses.dataclass
class KindBatch:
    """A kind's first task (configured), its first ROWS feature rows, a model's outputs."""

    kind: TaskKind
    task: object
    inputs: dict
    labels: np.ndarray
    outputs: tf.Tensor


@pytest.fixture(scope="module")
def encoder():
    return encoders.random_encoder("2/32/2", max_position=64, dropout=0.0, seed=0)


@pytest.fixture(scope="module")
def batches(encoder):
    """kind name -> its KindBatch, made on first use (None: no task or head of the kind)."""
    tokenizer = WordPieceTokenizer(encoder.vocab_file, do_lower_case=encoder.do_lower_case)
    made = {}

    def batch_of(name):
        if name not in made:
            made[name] = _make_batch(name, encoder, tokenizer)
        if made[name] is None:
            pytest.skip(f"no registered task or head is of kind {name!r}")
        return made[name]

    return batch_of


def _make_batch(name, encoder, tokenizer):
    registry = plugins.registry()
    task = harness.first_task(name, registry)
    heads = [h for h, k in harness.head_kind_pairs(registry) if k == name]
    if task is None or not heads:
        return None
    task = copy.copy(task)  # configure() must not touch the registry's instance
    configure_task(task, RunConfig(task=task.name, output_dir="unused", max_seq_length=SEQ,
                                   max_query_length=16, doc_stride=16))
    examples = task.read_examples(task.sample_dir(), "train")[:ROWS]
    features = task.featurize(examples, tokenizer, SEQ)
    inputs = {k: v[:ROWS] for k, v in features.inputs.items()}
    head = task.default_head if task.default_head in heads else heads[0]
    model = builder.build_task_model(task, registry.head(head), encoder.backbone,
                                     head_options=harness.TINY_OPTIONS.get(head), seed=0,
                                     sample_inputs=inputs)
    return KindBatch(registry.kind(name), task, inputs, np.asarray(features.labels)[:ROWS],
                     model(inputs, training=False))


@pytest.mark.parametrize("name", KINDS)
def test_a_kind_is_a_named_task_kind(name):
    kind = plugins.registry().kind(name)
    assert isinstance(kind, TaskKind) and kind.name == name
    assert kind.description, f"kind {name!r} has no description"
    assert kind.inputs_rank in (2, 3)
    for flag in ("labels_per_token", "has_accuracy", "row_metrics"):
        assert isinstance(getattr(kind, flag), bool), flag
    # The main metric's direction where a task does not declare it (None: from its name).
    assert getattr(kind, "greater_is_better", None) in (True, False, None)


@pytest.mark.parametrize("name", KINDS)
def test_dummy_inputs_follow_inputs_rank(name):
    kind = plugins.registry().kind(name)
    inputs = kind.dummy_inputs(seq_length=5, batch_size=3, num_choices=4)
    assert set(inputs) == INPUT_NAMES
    shape = (3, 4, 5) if kind.inputs_rank == 3 else (3, 5)
    for key, value in inputs.items():
        assert value.dtype == np.int32 and value.shape == shape, (key, value.dtype, value.shape)
    assert (inputs["padding_mask"].sum(-1) > 0).all(), "a row without a real position"


@pytest.mark.parametrize("name", KINDS)
def test_its_tasks_features_have_the_kinds_layout(name, batches):
    b = batches(name)
    assert set(b.inputs) == INPUT_NAMES
    for key, value in b.inputs.items():
        assert value.dtype == np.int32 and value.ndim == b.kind.inputs_rank, (key, value.shape)
    assert b.labels.shape[0] == ROWS
    if b.kind.labels_per_token:
        mask = b.inputs["padding_mask"]
        assert b.labels.shape == mask.shape and np.issubdtype(b.labels.dtype, np.integer)
        assert (b.labels[mask == 0] == -1).all(), "a padding position has a label"
    np.testing.assert_array_equal(np.shape(b.outputs)[:1], [ROWS])


@pytest.mark.parametrize("name", KINDS)
def test_per_example_loss_is_float32_per_example_and_finite(name, batches):
    b = batches(name)
    loss = b.kind.per_example_loss(tf.constant(b.labels), b.outputs)
    assert loss.dtype == tf.float32 and tuple(loss.shape) == (ROWS,)
    assert np.isfinite(loss.numpy()).all()
    # Mixed precision: float16 outputs, a float32 loss.
    half = b.kind.per_example_loss(tf.constant(b.labels), tf.cast(b.outputs, tf.float16))
    assert half.dtype == tf.float32 and tuple(half.shape) == (ROWS,)
    np.testing.assert_allclose(half.numpy(), loss.numpy(), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("name", KINDS)
def test_correct_count_is_a_count_of_the_batch(name, batches):
    b = batches(name)
    count = b.kind.correct_count(tf.constant(b.labels), b.outputs)
    assert count.dtype == tf.float32 and tuple(count.shape) == ()
    value = float(count)
    assert 0 <= value <= ROWS and value == int(value)
    if not b.kind.has_accuracy:
        assert value == 0


@pytest.mark.parametrize("name", PER_TOKEN_KINDS)
def test_per_token_labels_padded_with_minus_one_change_nothing(name, batches):
    """A trimmed batch padded back (pipeline.batch_rows, loop.pad_to_multiple): labels
    with -1 columns, outputs with whatever the model gives there."""
    b = batches(name)
    extra = 3
    labels = np.pad(b.labels, [(0, 0)] * (b.labels.ndim - 1) + [(0, extra)],
                    constant_values=-1)
    outputs = np.asarray(b.outputs)
    garbage = 50.0 * np.random.default_rng(0).normal(
        size=outputs.shape[:1] + (extra,) + outputs.shape[2:])
    padded = tf.constant(np.concatenate([outputs, garbage.astype(outputs.dtype)], 1))
    np.testing.assert_allclose(b.kind.per_example_loss(labels, padded).numpy(),
                               b.kind.per_example_loss(b.labels, b.outputs).numpy(), atol=1e-6)
    assert float(b.kind.correct_count(labels, padded)) == float(
        b.kind.correct_count(b.labels, b.outputs))


@pytest.mark.parametrize("name", KINDS)
def test_serving_is_declared_or_none(name, batches):
    kind = plugins.registry().kind(name)
    if kind.serving is None:
        return  # the kind cannot be exported: `kerasbert.run` refuses --export_dir for it
    assert isinstance(kind.serving, Serving)
    assert kind.serving.encode is not None or kind.serving.answer is not None, (
        f"kind {name!r} serves raw text with neither encode nor answer")
    b = batches(name)
    text_inputs = kind.serving.text_inputs(b.task)
    assert text_inputs and all(isinstance(k, str) and list(v)[:1] == [None]
                               for k, v in text_inputs.items()), text_inputs
    served = kind.serving.outputs(b.task, b.outputs)
    assert served and all(isinstance(k, str) for k in served)
    for key, value in served.items():
        assert tf.convert_to_tensor(value).shape[0] == ROWS, (key, value.shape)


@pytest.mark.parametrize("name", KINDS)
def test_decode_gives_one_answer_per_row(name, batches):
    """TaskKind.decode(outputs), where the kind decodes (kerasbert/kinds/base.py): numpy
    outputs in, one decision per row out, the same every time."""
    kind = plugins.registry().kind(name)
    if not hasattr(kind, "decode"):
        pytest.skip(f"kind {name!r} has no decode")
    outputs = np.asarray(batches(name).outputs)
    try:
        decoded = np.asarray(kind.decode(outputs))
    except NotImplementedError:
        pytest.skip(f"kind {name!r} does not decode (its tasks implement Task.predictions)")
    assert decoded.shape[:1] == (ROWS,), decoded.shape
    np.testing.assert_array_equal(np.asarray(kind.decode(outputs)), decoded)
