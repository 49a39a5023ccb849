"""A finished run rebuilt for the landscape: its model, trajectory and fixed data samples.

The model is rebuilt the way the export rebuilds it (`model.builder.rebuild_trained_model`:
the run's config, its `encoder/`, the registered head, `model.weights.h5`), and the samples
are read the way the run read them (`kerasbert.run.read_split`).
"""

import copy
import dataclasses
import os

import numpy as np

from kerasbert import plugins, run_folder
from kerasbert.config import configure_task
from kerasbert.errors import InputError, at
from kerasbert.model.builder import rebuild_trained_model
from kerasbert.run import read_split
from kerasbert.tasks.base import Features
from kerasbert.training.trajectory import Trajectory

@dataclasses.dataclass
class LandscapeRun:
    run_dir: str
    label: str
    config: object
    task: object
    model: object
    trajectory: Trajectory
    samples: dict  # {"train": Features, "dev": Features}
    kind: object = None  # the task's TaskKind, from the registry the run was loaded with


def default_label(config):
    return "random init" if config.init_checkpoint == "random" else "pre-trained"


def _sample(features, size, seed):
    """A fixed subset of `size` feature rows (all when size is 0 or larger), in order."""
    count = len(features.labels)
    if not size or size >= count:
        return features
    keep = np.sort(np.random.default_rng(seed).choice(count, size, replace=False))
    return Features({k: v[keep] for k, v in features.inputs.items()}, features.labels[keep],
                    [features.examples[i] for i in keep] if len(features.examples) == count
                    else features.examples, dict(features.extra))


def load(run_dir, data_dir=None, train_sample=256, dev_sample=256, seed=0, label=None,
         registry=None):
    """Rebuilds the run in `run_dir` with θ1 loaded; samples of its train and first dev
    split, read from `data_dir` (default: the run's own --data_dir, else the sample)."""
    if not os.path.isdir(run_dir):
        raise InputError(f"{at(run_dir)}--run_dir: no such folder")
    config = run_folder.read_run_config(run_dir)
    trajectory = Trajectory(run_dir)  # fails fast, before TensorFlow work
    weights = run_folder.path(run_dir, run_folder.MODEL_WEIGHTS)
    if not os.path.isfile(weights):
        raise InputError(f"{at(weights)}missing: the run did not finish training")
    files = {}
    if data_dir is None:  # the run's own data: its --data_dir, or its files where they still are
        saved = run_folder.read_config(run_dir)
        data_dir = saved.get("data_dir")
        files = {flag: saved[flag] for flag in ("train_file", "validation_file", "predict_file")
                 if saved.get(flag) and os.path.isfile(saved[flag])}
    if data_dir is not None and not os.path.isdir(data_dir):
        raise InputError(f"--data_dir={data_dir}: no such folder")
    config = dataclasses.replace(config, data_dir=data_dir, **files)
    registry = registry or plugins.registry()
    task = copy.copy(registry.task(config.task))  # the run's options, not the shared task's
    if not registry.kind_of(task).row_metrics:
        supported = sorted(name for name, (kind, _) in registry.kinds.items() if kind.row_metrics)
        raise InputError(f"--run_dir={run_dir}: a {task.kind} task ({task.name}); the landscape "
                         f"evaluates fixed samples of {', '.join(supported)} tasks "
                         f"({task.kind} metrics need whole examples, not sampled rows)")
    configure_task(task, config)
    model, tokenizer = rebuild_trained_model(run_dir, config, task, registry)
    trajectory.check_model(model)
    samples = {}
    for name, split, size in (("train", "train", train_sample),
                              ("dev", task.dev_splits[0], dev_sample)):
        examples = read_split(config, task, split)
        features = task.featurize(examples, tokenizer, config.max_seq_length)
        if features.labels is None:
            raise InputError(f"--data_dir={data_dir}: the {split} split has no labels")
        samples[name] = _sample(features, size, seed)
    return LandscapeRun(run_dir, label or default_label(config), config, task, model,
                        trajectory, samples, registry.kind_of(task))
