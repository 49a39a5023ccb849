"""Loss, error and task metrics of one model at many points of weight space.

One model and one compiled forward function serve every point: moving to a point assigns
θ = origin + α·d1 + β·d2 to the variables inside a `tf.function` (the directions live as
constants next to the weights), and the evaluation batches are materialised once. A 2D
grid therefore costs grid² forward passes over the fixed samples and nothing else.
"""

import time

import numpy as np
import tensorflow as tf

from kerasbert.data import pipeline
from kerasbert.plugins import resolve_kind
from kerasbert.kind_names import PADDING_LOGIT
from kerasbert.training.trajectory import model_weights


class SurfaceEvaluator:
    """Evaluates `model` on fixed samples ({name: Features}, e.g. train and dev)."""

    def __init__(self, model, task, samples, batch_size=128, kind=None):
        self.model, self.task = model, task
        self.kind = kind or resolve_kind(task.kind)  # the run's registry's, when it gives one
        self.variables = model_weights(model)
        self.samples = samples
        self.batches = {
            name: list(pipeline.make_dataset(f.inputs, f.labels, batch_size,
                                             labels_per_token=self.kind.labels_per_token))
            for name, f in samples.items()}
        self._forward = tf.function(self._forward_fn, reduce_retracing=True)
        self._move = tf.function(self._move_fn)
        self._plane = None
        self.points_evaluated = 0
        self.seconds = 0.0

    def _forward_fn(self, inputs, labels):
        outputs = self.model(inputs, training=False)
        return outputs, self.kind.per_example_loss(labels, outputs)

    def _move_fn(self, alpha, beta):
        origin, d1, d2 = self._plane
        for v, o, x, y in zip(self.variables, origin, d1, d2):
            v.assign(o + alpha * x + beta * y)

    def set_plane(self, origin, d1, d2=None):
        """Fixes the plane of later `at(α, β)` calls: origin + α·d1 + β·d2."""
        if d2 is None:
            d2 = [np.zeros_like(x) for x in d1]
        self._plane = tuple([tf.constant(a, tf.float32) for a in arrays]
                            for arrays in (origin, d1, d2))
        self._move = tf.function(self._move_fn)  # new constants: trace again, once

    def set_weights(self, arrays):
        for v, a in zip(self.variables, arrays, strict=True):
            v.assign(a)

    def at(self, alpha, beta=0.0):
        """The metrics at origin + α·d1 + β·d2 of the current plane."""
        self._move(tf.constant(alpha, tf.float32), tf.constant(beta, tf.float32))
        return self.evaluate()

    def evaluate(self):
        """{"<sample>_loss", "<sample>_error" (1 − accuracy), "<sample>_<metric>"} at the
        model's current weights."""
        start = time.perf_counter()
        result = {}
        for name, batches in self.batches.items():
            outputs, per_example = [], []
            for inputs, labels in batches:
                out, loss = self._forward(inputs, labels)
                outputs.append(out.numpy())
                per_example.append(loss.numpy())
            if outputs[0].ndim >= 3:  # per-token outputs of batches trimmed differently
                width = max(o.shape[1] for o in outputs)
                outputs = [np.pad(o, [(0, 0), (0, width - o.shape[1])] + [(0, 0)] * (o.ndim - 2),
                                  constant_values=PADDING_LOGIT) for o in outputs]
            outputs = np.concatenate(outputs)
            result[f"{name}_loss"] = float(np.mean(np.concatenate(per_example)))
            metrics = self.task.evaluate(outputs, self.samples[name], None, name)
            if "accuracy" in metrics:
                result[f"{name}_error"] = 1.0 - float(metrics["accuracy"])
            result.update({f"{name}_{k}": float(v) for k, v in metrics.items()})
        self.points_evaluated += 1
        self.seconds += time.perf_counter() - start
        return result


def interpolate(evaluator, theta0, theta1, alphas):
    """1D: θ(α) = θ0 + α(θ1 − θ0); one row of metrics per α."""
    delta = [b - a for a, b in zip(theta0, theta1, strict=True)]
    evaluator.set_plane(theta0, delta)
    return [{"alpha": float(a), **evaluator.at(a)} for a in alphas]


def grid(evaluator, origin, d1, d2, alphas, betas, log=None):
    """2D: {metric: array [len(betas), len(alphas)]} at origin + α·d1 + β·d2."""
    evaluator.set_plane(origin, d1, d2)
    surfaces = {}
    for j, b in enumerate(betas):
        for i, a in enumerate(alphas):
            for key, value in evaluator.at(a, b).items():
                surfaces.setdefault(key, np.full([len(betas), len(alphas)], np.nan))[j, i] = value
        if log is not None:
            log(f"  grid row {j + 1}/{len(betas)} done")
    return surfaces


def scale_to_rise(rise, target, iterations=10, limit=20):
    """The factor c at which rise(c) first reaches `target`, found by doubling or halving
    from c = 1 until the target is bracketed, then bisecting in log scale (`iterations`
    halvings of the bracket: c to within 2^(1/2^iterations)); None when the rise stays
    below the target up to 2^limit. For a rise that is not monotone in c this is one
    crossing, not necessarily the first."""
    low, high = None, None
    c = 1.0
    for _ in range(2 * limit + 1):
        if rise(c) >= target:
            high = c
            if low is not None:
                break
            c /= 2.0
            if c < 2.0 ** -limit:
                return high
        else:
            low = c
            if high is not None:
                break
            c *= 2.0
            if c > 2.0 ** limit:
                return None
    for _ in range(iterations):
        middle = np.sqrt(low * high)
        if rise(middle) >= target:
            high = middle
        else:
            low = middle
    return float(high)
