"""A finished run rebuilt for the landscape: its model, trajectory and fixed data samples.

The model is rebuilt the way `kerasbert.export.saved_model.load_run` rebuilds it (the run's
config, its `encoder/`, the registered head, `model.weights.h5`), but for every task kind.
"""

import dataclasses
import os

import numpy as np

from kerasbert.errors import InputError, at
from kerasbert.io_utils import read_json_object

SUPPORTED_KINDS = ("classification", "regression", "multiple_choice")


@dataclasses.dataclass
class LandscapeRun:
    run_dir: str
    label: str
    config: object
    task: object
    model: object
    trajectory: object  # kerasbert.landscape.trajectory.Trajectory
    samples: dict  # {"train": Features, "dev": Features}


def default_label(config):
    return "random init" if config.init_checkpoint == "random" else "pre-trained"


def _sample(features, size, seed):
    """A fixed subset of `size` feature rows (all when size is 0 or larger), in order."""
    from kerasbert.tasks.base import Features

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
    from kerasbert import main as main_lib
    from kerasbert import plugins
    from kerasbert.config import configure_task
    from kerasbert.export.saved_model import (
        MODEL_WEIGHTS,
        RUN_CONFIG,
        read_run_config,
        rebuild_trained_model,
    )
    from kerasbert.landscape.trajectory import Trajectory

    if not os.path.isdir(run_dir):
        raise InputError(f"{at(run_dir)}--run_dir: no such folder")
    config = read_run_config(run_dir)
    trajectory = Trajectory(run_dir)  # fails fast, before TensorFlow work
    weights = os.path.join(run_dir, MODEL_WEIGHTS)
    if not os.path.isfile(weights):
        raise InputError(f"{at(weights)}missing: the run did not finish training")
    if data_dir is None:
        data_dir = read_json_object(os.path.join(run_dir, RUN_CONFIG)).get("data_dir")
    if data_dir is not None and not os.path.isdir(data_dir):
        raise InputError(f"--data_dir={data_dir}: no such folder")
    config = dataclasses.replace(config, data_dir=data_dir)
    registry = registry or plugins.registry()
    task = registry.task(config.task)
    if task.kind not in SUPPORTED_KINDS:
        raise InputError(f"--run_dir={run_dir}: a {task.kind} task ({task.name}); the landscape "
                         f"evaluates fixed samples of {', '.join(SUPPORTED_KINDS)} tasks "
                         "(span and tagging metrics need whole examples, not sampled rows)")
    configure_task(task, config)
    model, tokenizer = rebuild_trained_model(run_dir, config, task, registry)
    trajectory.check_model(model)
    samples = {}
    for name, split, size in (("train", "train", train_sample),
                              ("dev", task.dev_splits[0], dev_sample)):
        examples = main_lib.read_split(config, task, split)
        features = task.featurize(examples, tokenizer, config.max_seq_length)
        if features.labels is None:
            raise InputError(f"--data_dir={data_dir}: the {split} split has no labels")
        samples[name] = _sample(features, size, seed)
    return LandscapeRun(run_dir, label or default_label(config), config, task, model,
                        trajectory, samples)
