"""Encoder + registered head → a built `TaskModel`, the same way for training and export.

`kerasbert.run` builds the model before training; `kerasbert.export.saved_model` rebuilds
it from a finished run and loads `model.weights.h5` into it. Weight files are matched by
layer structure, so both must build the head from the same `HeadContext`: one function.
"""

import keras
import numpy as np

from kerasbert import run_folder
from kerasbert.data.tokenization import WordPieceTokenizer
from kerasbert.errors import InputError, at
from kerasbert.hookspecs import HeadContext
from kerasbert.model import encoders
from kerasbert.model.task_model import TaskModel
from kerasbert.plugins import resolve_kind


def check_head_fits(task, head_spec, task_flag="--task"):
    if task.kind not in head_spec.kinds:
        raise InputError(
            f"--head={head_spec.name}: serves {', '.join(head_spec.kinds)} tasks, but "
            f"{task_flag}={task.name} is a {task.kind} task")


def head_context(task, backbone, head_options=None, seed=None):
    """What the head is told (a multiple-choice task has num_outputs 1: one score per
    [CLS] context [SEP] ending [SEP] sequence). `labels` names the outputs, so only a task
    with one label per output has them (not one that overrides num_outputs)."""
    labels = tuple(task.label_list or ())
    return HeadContext(
        kind=task.kind, num_outputs=task.num_outputs,
        hidden_dim=backbone.hidden_dim, dropout=backbone.dropout,
        options=dict(head_options or {}), seed=seed,
        labels=labels if len(labels) == task.num_outputs else (),
        num_layers=len(backbone.transformer_layers))


def dummy_inputs(kind, seq_length=8, batch_size=2, num_choices=2):
    """int32 zeros in the layout of `kind` (a TaskKind or its name)."""
    return resolve_kind(kind).dummy_inputs(seq_length, batch_size, num_choices)


def build_task_model(task, head_spec, backbone, head_options=None, seed=None,
                     sample_inputs=None, kind=None, dropout_seed=None):
    """A `TaskModel` with every weight created (built on `sample_inputs` or zeros). `seed`
    initialises the head; `dropout_seed` (default: `seed`) seeds its dropout.

    Call it inside `strategy.scope()` when training under a distribution strategy.
    """
    check_head_fits(task, head_spec)
    head = head_spec.build(head_context(task, backbone, head_options, seed))
    model = TaskModel(backbone, head)
    model(dummy_inputs(kind or task.kind) if sample_inputs is None else sample_inputs)
    if seed is not None and dropout_seed is not None and dropout_seed != seed:
        reseed_dropout(head, seed, dropout_seed)
    return model


def reseed_dropout(head, seed, dropout_seed):
    """Moves the head's dropout from `seed` to `dropout_seed`, so initialisation and
    dropout vary apart (--head_init_seed, --dropout_seed). A head seeds its dropout
    layers from `HeadContext.seed` (seed + k for its k-th, say): each such seed generator
    (Keras' SeedGenerator, state [seed + k, 0] before any draw) restarts at
    [dropout_seed + k, 0], as if built with that seed. Generators made unseeded already
    drew from Python's generator, which the run seeds with the dropout seed; left alone."""
    generators = {id(g): g for layer in head._flatten_layers(include_self=True)
                  for g in vars(layer).values() if isinstance(g, keras.random.SeedGenerator)}
    for generator in generators.values():
        initial = getattr(generator, "_initial_seed", None)  # None: made unseeded
        if isinstance(initial, int):
            generator.state.assign(np.array([initial - seed + dropout_seed, 0],
                                            generator.state.dtype))


def rebuild_trained_model(run_dir, config, task, registry):
    """(task model with the run's trained weights, its tokenizer), built as kerasbert.run
    built it: the run's encoder/, head, head options and seed, then model.weights.h5."""
    weights = run_folder.path(run_dir, run_folder.MODEL_WEIGHTS)
    head_spec = registry.head(config.head or task.default_head)
    encoder = encoders.load_encoder(run_dir)
    tokenizer = WordPieceTokenizer(encoder.vocab_file, do_lower_case=encoder.do_lower_case)
    model = build_task_model(task, head_spec, encoder.backbone, config.head_options,
                             config.seed_of("head_init"),
                             sample_inputs=dummy_inputs(registry.kind_of(task),
                                                        config.max_seq_length))
    try:
        model.load_weights(weights)
    except Exception as e:  # h5py / keras raise many types for a bad or mismatched file
        raise InputError(f"{at(weights)}cannot load the task model's weights: {e}") from None
    return model, tokenizer
