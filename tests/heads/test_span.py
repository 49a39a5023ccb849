"""SpanHead: start/end logits over every token, padding masked, on a tiny BertBackbone."""

import keras
import keras_hub
import numpy as np
import pytest
import tensorflow as tf

from kerasbert import plugins
from kerasbert.heads.span import PADDING_LOGIT, SpanHead, build_span_head
from kerasbert.hookspecs import HeadContext
from kerasbert.model.task_model import TaskModel
from kerasbert.tasks import base
from kerasbert.plugins import resolve_kind

ARCH = dict(vocabulary_size=40, num_layers=2, num_heads=2, hidden_dim=32, intermediate_dim=64,
            max_sequence_length=16)


def inputs():
    return {
        "token_ids": np.array([[2, 7, 8, 3, 11, 12, 13, 3], [2, 5, 3, 6, 3, 0, 0, 0]], "int32"),
        "segment_ids": np.array([[0, 0, 0, 0, 1, 1, 1, 1], [0, 0, 0, 1, 1, 0, 0, 0]], "int32"),
        "padding_mask": np.array([[1] * 8, [1] * 5 + [0] * 3], "int32"),
    }


def context(seed=7):
    return HeadContext(kind=base.SPAN, num_outputs=1, hidden_dim=32, dropout=0.1, seed=seed)


@pytest.fixture(scope="module")
def model():
    keras.utils.set_random_seed(0)
    return TaskModel(keras_hub.models.BertBackbone(**ARCH), build_span_head(context()))


def test_output_shape_dtype_and_padding_mask(model):
    logits = np.asarray(model(inputs(), training=False))
    assert logits.shape == (2, 8, 2) and logits.dtype == np.float32
    padding = inputs()["padding_mask"] == 0
    assert np.all(logits[padding] == PADDING_LOGIT)
    assert np.all(np.abs(logits[~padding]) < 100)  # real tokens: ordinary logits
    # So padding is never the argmax and has no softmax mass.
    assert np.all(logits[1, :, 0].argmax() < 5)
    assert tf.nn.softmax(logits[1, :, 1]).numpy()[5:].max() == 0.0


def test_logits_are_s_and_e_dot_final_hidden_states(model):
    sequence = np.asarray(model.backbone(inputs(), training=False)["sequence_output"])
    kernel, bias = (np.asarray(w) for w in model.head.output_dense.weights)
    assert kernel.shape == (32, 2)  # column 0 is S, column 1 is E
    expected = sequence @ kernel + bias
    logits = np.asarray(model(inputs(), training=False))
    np.testing.assert_allclose(logits[0], expected[0], atol=1e-5)
    np.testing.assert_allclose(logits[1, :5], expected[1, :5], atol=1e-5)


def test_span_loss_trains_the_head(model):
    labels = tf.constant([[4, 6], [3, 3]], tf.int32)
    with tf.GradientTape() as tape:
        outputs = model(inputs(), training=True)
        loss = tf.reduce_mean(resolve_kind(base.SPAN).per_example_loss(labels, outputs))
    grads = tape.gradient(loss, model.head.trainable_variables)
    assert np.isfinite(float(loss)) and float(loss) < 10  # ~log(8) per side at init
    assert all(np.isfinite(g.numpy()).all() and np.abs(g.numpy()).max() > 0 for g in grads)


def test_seeded_init_and_config_round_trip():
    a, b = SpanHead(seed=3), SpanHead(seed=3)
    features = {"sequence_output": np.ones([1, 4, 32], "float32"),
                "padding_mask": np.ones([1, 4], "int32")}
    a(features), b(features)
    np.testing.assert_array_equal(a.output_dense.kernel.numpy(), b.output_dense.kernel.numpy())
    c = SpanHead.from_config(a.get_config())
    assert c.seed == 3 and c.name == a.name


def test_weights_save_and_load(model, tmp_path):
    path = str(tmp_path / "model.weights.h5")
    model.save_weights(path)
    keras.utils.set_random_seed(1)
    other = TaskModel(keras_hub.models.BertBackbone(**ARCH), build_span_head(context(seed=99)))
    other(inputs())
    other.load_weights(path)
    np.testing.assert_allclose(np.asarray(other(inputs())), np.asarray(model(inputs())), atol=1e-6)


def test_head_spec():
    spec = plugins.registry().head("span")
    assert spec.name == "span" and tuple(spec.kinds) == (base.SPAN,)
    assert isinstance(spec.build(context()), SpanHead)
