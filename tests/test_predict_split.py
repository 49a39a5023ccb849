"""run.predict_split: rows predicted shortest first (less padding per trimmed batch), the
outputs given back in the split's order, as batches in that order give them."""

import types

import numpy as np
import pytest

from kerasbert import distribute, plugins, run
from kerasbert.data import pipeline
from kerasbert.model import builder, encoders
from kerasbert.tasks.base import Features
from kerasbert.training.loop import Trainer

SEQ = 16


def rows(count, seed=0, choices=None):
    rng = np.random.default_rng(seed)
    shape = [count] if choices is None else [count, choices]
    lengths = rng.integers(3, SEQ + 1, shape)
    lengths.flat[0] = SEQ  # the widest batch is SEQ wide
    mask = (np.arange(SEQ) < lengths[..., None]).astype(np.int32)
    tokens = rng.integers(1000, 2000, [*shape, SEQ]).astype(np.int32) * mask
    return {"token_ids": tokens, "segment_ids": np.zeros_like(tokens), "padding_mask": mask}


def test_length_order_is_shortest_first_ties_in_order():
    mask = np.array([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1], [1, 1, 0, 0]])
    assert pipeline.length_order({"padding_mask": mask}).tolist() == [1, 3, 0, 2]


def test_length_order_of_multiple_choice_rows_is_their_longest_choice():
    mask = np.array([[[1, 1, 0], [1, 0, 0]], [[1, 0, 0], [1, 1, 1]], [[1, 0, 0], [1, 0, 0]]])
    assert pipeline.length_order({"padding_mask": mask}).tolist() == [2, 0, 1]


def test_length_order_of_no_rows():
    assert pipeline.length_order({"padding_mask": np.zeros([0, SEQ])}).tolist() == []


@pytest.mark.parametrize("task_name, head_name", [("sst2", "cls_linear"),
                                                  ("conll2003", "tagger")])
def test_outputs_are_those_of_batches_in_split_order(task_name, head_name):
    registry = plugins.registry()
    task, head = registry.task(task_name), registry.head(head_name)
    strategy = distribute.make_strategy("one_device")
    with strategy.scope():
        encoder = encoders.random_encoder("2/32/2", max_position=64, dropout=0.0, seed=3)
        model = builder.build_task_model(task, head, encoder.backbone, seed=3)
    trainer = Trainer(model, task.kind, strategy, optimizer=None)
    inputs = rows(21)
    config = types.SimpleNamespace(eval_batch_size=4)
    outputs = run.predict_split(config, trainer, Features(inputs, None, [None] * 21))
    in_order = trainer.predict(pipeline.make_dataset(inputs, None, 4))
    if outputs.ndim == 3:  # per token: the rows' own positions (padding's depend on the batch)
        assert outputs.shape[:2] == (21, SEQ)
        keep = inputs["padding_mask"].astype(bool)
        outputs, in_order = outputs[keep], in_order[:, :SEQ][keep]
    # the same rows; only float32 summation order differs with the batch's trimmed length
    np.testing.assert_allclose(outputs, in_order, rtol=0, atol=1e-6)
