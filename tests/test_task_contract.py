"""The parts of the Task / TaskKind contract a plugin author relies on: decoding on the
kind, the sample recipe's keys, the head's label names, a task's own serving answer."""

import types

import numpy as np
import pytest

from kerasbert import plugins
from kerasbert.config import RunConfig
from kerasbert.errors import InputError
from kerasbert.hookspecs import hookimpl
from kerasbert.kinds.base import TaskKind
from kerasbert.model.builder import head_context
from kerasbert.tasks import glue
from kerasbert.tasks.base import Task


def test_the_built_in_kinds_decode_their_outputs():
    registry = plugins.registry()
    logits = np.array([[0.1, 2.0, -1.0], [3.0, 0.0, 3.0]], np.float32)
    assert registry.kind("classification").decode(logits).tolist() == [1, 0]  # first on ties
    assert registry.kind("multiple_choice").decode(logits).tolist() == [1, 0]
    assert registry.kind("regression").decode(np.array([[0.5], [4.0]])).tolist() == [0.5, 4.0]
    tokens = np.stack([logits, logits[::-1]])  # [2 rows, 2 positions, 3 tags]
    assert registry.kind("tagging").decode(tokens).tolist() == [[1, 0], [0, 1]]
    spans = np.zeros([1, 4, 2], np.float32)
    spans[0, 2, 0], spans[0, 3, 1] = 5.0, 5.0
    assert registry.kind("span").decode(spans).tolist() == [[2, 3]]


class _Odd(TaskKind):
    name = "odd"

    def decode(self, outputs):
        return (np.asarray(outputs)[:, 0] > 0).astype(np.int32)


class _OddTask(Task):
    name, kind, label_list, test_splits = "odd_task", "odd", ("no", "yes"), ()

    def read_examples(self, data_dir, split):
        return []

    def sample_dir(self):
        return "unused"

    def compute_metrics(self, predictions, labels):
        return {"accuracy": float(np.mean(predictions == labels))}


def test_a_task_decodes_with_the_kind_its_registry_hands_it():
    manager, _, _ = plugins.make_manager(autoload=False)
    manager.register(types.SimpleNamespace(kerasbert_kinds=hookimpl(lambda: [_Odd()]),
                                           kerasbert_tasks=hookimpl(lambda: [_OddTask()])),
                     name="odd_plugin")
    task = plugins.Registry(manager).task("odd_task")
    outputs = np.array([[1.0, 9.0], [-1.0, 9.0]], np.float32)  # argmax would say 1, 1
    assert task.predictions(outputs).tolist() == [1, 0]
    assert task.evaluate(outputs, types.SimpleNamespace(labels=np.array([1, 0]))) == {
        "accuracy": 1.0}
    with pytest.raises(NotImplementedError, match="decodes through its kind"):
        _OddTask().predictions(outputs)  # outside any registry: no kind to decode with
    # Built-in sentence tasks outside a registry decode as their kinds do.
    assert glue.TASKS["sst2"].predictions(outputs).tolist() == [1, 1]


def test_an_unknown_sample_recipe_key_is_refused_in_one_line():
    class Recipe(Task):
        name, sample_recipe = "recipe", {"learning_rate": 1e-4, "warmup_proportion": 0.2}

    with pytest.raises(InputError) as e:
        RunConfig(task="recipe", output_dir="out").resolved(Recipe())
    assert str(e.value) == ("--task=recipe: its sample_recipe sets 'warmup_proportion'; a "
                            "sample recipe sets only learning_rate, train_batch_size, "
                            "num_train_epochs")


def test_head_labels_name_the_outputs_only_when_there_is_one_per_output():
    backbone = types.SimpleNamespace(hidden_dim=8, dropout=0.1, transformer_layers=[0, 1])

    class Ordinal(Task):
        name, kind, label_list = "ordinal", "classification", ("1", "2", "3", "4")

        @property
        def num_outputs(self):
            return len(self.label_list) - 1  # cumulative logits

    assert head_context(glue.TASKS["rte"], backbone).labels == tuple(
        glue.TASKS["rte"].label_list)
    context = head_context(Ordinal(), backbone)
    assert context.num_outputs == 3 and context.labels == ()


def test_a_span_task_without_its_own_serving_answer_cannot_be_exported():
    class PlainSpan(Task):
        name, kind = "plain_span", "span"

    run = types.SimpleNamespace(task=PlainSpan())
    with pytest.raises(InputError, match="--task=plain_span: a span task is served by its own "
                                         "decoding; implement Task.serving_answer"):
        plugins.registry().kind("span").serving.answer(run)
