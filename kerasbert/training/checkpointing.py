"""Run state for resuming (model, optimizer, finished epochs) and atomic weight files."""

import os
import tempfile

import tensorflow as tf


class RunState:
    """The latest complete state of a run in `<output_dir>/checkpoints`.

    tf.train.CheckpointManager writes the checkpoint files first and the index last, so
    a run killed while saving still restores the previous complete checkpoint.
    """

    def __init__(self, output_dir, model, optimizer):
        self.directory = os.path.join(output_dir, "checkpoints")
        self.epoch = tf.Variable(0, dtype=tf.int64, trainable=False)
        # tf.train.Checkpoint does not follow Keras 3 layers to their dropout seed-generator
        # states; saving them too makes a resumed run draw the same dropout masks.
        non_trainable = [v.value for v in model.non_trainable_variables]
        self.checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, epoch=self.epoch,
                                              non_trainable=non_trainable)
        self.manager = tf.train.CheckpointManager(self.checkpoint, self.directory, max_to_keep=1)

    def restore(self):
        """Restores the latest checkpoint if there is one; returns the finished epochs."""
        if self.manager.latest_checkpoint:
            self.checkpoint.restore(self.manager.latest_checkpoint).assert_existing_objects_matched()
        return int(self.epoch.numpy())

    def save(self, finished_epochs):
        self.epoch.assign(finished_epochs)
        self.manager.save()


def save_weights_atomically(model, path):
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, suffix=".weights.h5")
    os.close(fd)
    try:
        model.save_weights(tmp, overwrite=True)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
