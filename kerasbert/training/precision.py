"""Mixed precision: the Keras dtype policy from --mixed_precision, and dynamic loss scaling.

mixed_float16 and mixed_bfloat16 compute in 16 bits and keep float32 variables; the
losses cast the outputs to float32 (kerasbert/training/losses.py). float16's narrow range
makes small gradients underflow, so its loss is multiplied by a large scale before
backprop and the gradients divided by it before clipping; a step whose gradients
overflowed is skipped and the scale halved (bfloat16 has float32's range: no scaling).
"""

import keras
import tensorflow as tf

from kerasbert import host

POLICIES = {"none": "float32", "mixed_float16": "mixed_float16",
            "mixed_bfloat16": "mixed_bfloat16"}


def set_policy(mixed_precision):
    """Sets the global Keras policy for the models built next (every run sets it, so
    one run's policy never leaks into the next in the same process)."""
    keras.mixed_precision.set_global_policy(POLICIES[mixed_precision])


def bf16_hint(mixed_precision, on_accelerator, cpuinfo=None):
    """One line suggesting --mixed_precision=mixed_bfloat16 when a float32 run trains on a
    CPU with AMX-BF16 (Intel Sapphire Rapids and later), where TensorFlow's bfloat16
    matmuls run on the AMX tiles; None otherwise. `cpuinfo`: /proc/cpuinfo's text (read
    when None)."""
    if mixed_precision != "none" or on_accelerator:
        return None
    if "amx_bf16" not in host.cpu(cpuinfo)["flags"]:
        return None
    return ("kerasbert: this CPU has AMX-BF16: --mixed_precision=mixed_bfloat16 made MiniLM's "
            "training step 1.4-1.5x faster on such a host, SST-2 accuracy within the seed spread "
            "(docs/experiments/speed-and-memory.md)")


def all_finite(grads):
    """1.0 when every gradient is finite, else 0.0 (a float, to sum over replicas)."""
    finite = [tf.reduce_all(tf.math.is_finite(g)) for g in grads if g is not None]
    return tf.cast(tf.reduce_all(tf.stack(finite)), tf.float32)


class DynamicLossScale(tf.Module):
    """Keras LossScaleOptimizer's rule, for a loop that clips between unscale and apply:
    start at 2**15, halve on overflow, double after `growth_steps` finite steps.
    A tf.Module, so a run's checkpoint holds the scale and a resumed run goes on with it
    (training/phases.py) instead of overflowing its way down from 2**15 again."""

    def __init__(self, initial_scale=2.0**15, growth_steps=2000):
        super().__init__(name="dynamic_loss_scale")
        self.growth_steps = growth_steps
        # Every replica computes the same update, so the first replica's is kept.
        first = tf.VariableAggregation.ONLY_FIRST_REPLICA
        self.scale = tf.Variable(initial_scale, dtype=tf.float32, trainable=False,
                                 aggregation=first)
        self.finite_steps = tf.Variable(0, dtype=tf.int64, trainable=False, aggregation=first)

    def value(self):
        return tf.identity(self.scale)

    def update(self, finite):
        """After a step (cross-replica context): grow, keep or shrink the scale."""
        grow = tf.logical_and(finite, self.finite_steps + 1 >= self.growth_steps)
        self.scale.assign(tf.where(grow, self.scale * 2.0,
                                   tf.where(finite, self.scale, self.scale * 0.5)))
        self.finite_steps.assign(tf.where(finite & ~grow, self.finite_steps + 1,
                                          tf.zeros_like(self.finite_steps)))
