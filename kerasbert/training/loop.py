"""One custom training loop for every tf.distribute strategy.

Keras 3's `model.fit` fails under MultiWorkerMirroredStrategy (keras#20585), so training
is a `tf.function` step run with `strategy.run`: the same code for one device, mirrored
GPUs and multi-worker.
"""

import math
import sys
import time

import keras
import numpy as np
import tensorflow as tf

from kerasbert.errors import TrainingError
from kerasbert.training import losses


class NonFiniteLossError(TrainingError):
    """The loss became NaN or infinite; the run stops before saving anything."""


class Trainer:
    def __init__(self, model, kind, strategy, optimizer, clip_norm=1.0):
        self.model = model
        self.kind = kind
        self.strategy = strategy
        self.optimizer = optimizer
        self.clip_norm = clip_norm
        self._train_step = tf.function(self._distributed_step, reduce_retracing=True)
        self._predict_step = tf.function(
            lambda inputs: self.model(inputs, training=False), reduce_retracing=True)

    def _clip(self, grads):
        """Clips the *global* gradient (summed over replicas) to norm `clip_norm`.

        Each replica holds a partial gradient; scaling every part by the factor computed
        from their sum clips the sum, which the optimizer then all-reduces.
        """
        if not self.clip_norm:
            return grads
        total = grads
        context = tf.distribute.get_replica_context()
        if self.strategy.num_replicas_in_sync > 1:
            total = context.all_reduce(tf.distribute.ReduceOp.SUM, grads)
        norm = tf.linalg.global_norm(total)
        scale = self.clip_norm / tf.maximum(norm, self.clip_norm)
        return [g * scale for g in grads]

    def _replica_step(self, inputs, labels):
        variables = self.model.trainable_variables
        with tf.GradientTape() as tape:
            outputs = self.model(inputs, training=True)
            per_example = losses.per_example_loss(self.kind, labels, outputs)
            loss = tf.nn.compute_average_loss(per_example)
        grads = tape.gradient(loss, variables)
        # Variables that do not reach the output (e.g. the pooler when a head reads the
        # raw [CLS] state) have no gradient; they are left alone.
        pairs = [(g, v) for g, v in zip(grads, variables) if g is not None]
        grads = self._clip([g for g, _ in pairs])
        self.optimizer.apply(grads, [v for _, v in pairs])
        count = tf.cast(tf.shape(labels)[0], tf.float32)
        return loss, losses.correct_count(self.kind, labels, outputs), count

    def _distributed_step(self, inputs, labels):
        """(global mean loss, correctly classified examples, examples) of one step."""
        per_replica = self.strategy.run(self._replica_step, args=(inputs, labels))
        return tuple(self.strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None)
                     for value in per_replica)

    def train_epoch(self, dataset, num_steps, on_step=None, show_progress=None):
        """Runs up to `num_steps` steps of `dataset`.

        Returns the mean training loss and, for classification-like kinds, the accuracy
        on the training batches as they were seen (with dropout on), else None.
        """
        if show_progress is None:
            show_progress = sys.stderr.isatty()
        bar = keras.utils.Progbar(num_steps, stateful_metrics=["lr"]) if show_progress else None
        total, steps, correct, seen = 0.0, 0, 0.0, 0
        for inputs, labels in self.strategy.experimental_distribute_dataset(dataset):
            if steps >= num_steps:
                break
            loss, batch_correct, batch_count = (float(x) for x in self._train_step(inputs, labels))
            correct += batch_correct
            seen += batch_count
            step = int(self.optimizer.iterations.numpy())
            if not math.isfinite(loss):
                raise NonFiniteLossError(f"the training loss became {loss} at step {step}")
            total += loss
            steps += 1
            if on_step is not None:
                on_step(step, loss)
            if bar is not None:
                bar.update(steps, [("loss", loss), ("lr", self.learning_rate())])
        accuracy = correct / max(seen, 1) if losses.has_accuracy(self.kind) else None
        return total / max(steps, 1), accuracy

    def learning_rate(self):
        return float(self.optimizer.learning_rate)

    def predict(self, dataset, padding_value=-10000.0):
        """Raw model outputs (logits or values) for every example, in order.

        Per-token outputs ([batch, seq, ...]) of batches trimmed to different lengths are
        right-padded to the longest with `padding_value`, a logit no decoder will pick.
        """
        outputs = [self._predict_step(inputs).numpy() for inputs, _ in dataset]
        if not outputs:
            return np.zeros([0])
        if outputs[0].ndim >= 3:
            width = max(o.shape[1] for o in outputs)
            outputs = [np.pad(o, [(0, 0), (0, width - o.shape[1])] + [(0, 0)] * (o.ndim - 2),
                              constant_values=padding_value) for o in outputs]
        return np.concatenate(outputs, axis=0)


def count_steps(num_examples, batch_size, num_epochs):
    """Steps per epoch (a partial last batch counts) and total steps for the run."""
    per_epoch = math.ceil(num_examples / batch_size)
    return per_epoch, int(math.ceil(per_epoch * num_epochs))


class Timer:
    def __init__(self):
        self.start = time.perf_counter()

    def seconds(self):
        return time.perf_counter() - self.start
