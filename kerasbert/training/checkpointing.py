"""Run state for resuming (model, optimizer, finished epochs) and atomic weight files."""

import os
import tempfile

import numpy as np
import tensorflow as tf


class RunState:
    """The latest complete state of a run in `<output_dir>/checkpoints`: weights, every
    phase's optimizer, and where training stands (phase index, finished epochs in it).

    tf.train.CheckpointManager writes the checkpoint files first and the index last, so
    a run killed while saving still restores the previous complete checkpoint.
    """

    def __init__(self, output_dir, model, optimizers):
        self.directory = os.path.join(output_dir, "checkpoints")
        self.phase = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.epoch = tf.Variable(0, dtype=tf.int64, trainable=False)
        # tf.train.Checkpoint does not follow Keras 3 layers to their dropout seed-generator
        # states; saving them too makes a resumed run draw the same dropout masks.
        non_trainable = [v.value for v in model.non_trainable_variables]
        self.checkpoint = tf.train.Checkpoint(
            model=model, phase=self.phase, epoch=self.epoch, non_trainable=non_trainable,
            **{f"optimizer_{name}": optimizer for name, optimizer in optimizers.items()})
        self.manager = tf.train.CheckpointManager(self.checkpoint, self.directory, max_to_keep=1)

    def restore(self):
        """Restores the latest checkpoint if any; returns (phase index, finished epochs)."""
        if self.manager.latest_checkpoint:
            self.checkpoint.restore(self.manager.latest_checkpoint).assert_existing_objects_matched()
        return int(self.phase.numpy()), int(self.epoch.numpy())

    def save(self, phase, finished_epochs):
        self.phase.assign(phase)
        self.epoch.assign(finished_epochs)
        self.manager.save()


def save_weights_atomically(model, path):
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, suffix=".weights.h5")
    os.close(fd)
    try:
        model.save_weights(tmp, overwrite=True)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def save_layer_weights(layer, path):
    """A layer's weights (in `layer.weights` order) as an .npz, written whole or not at all."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, suffix=".npz")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, *[w.numpy() for w in layer.weights])
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def load_layer_weights(layer, path):
    with np.load(path) as saved:
        for i, weight in enumerate(layer.weights):
            weight.assign(saved[f"arr_{i}"])
