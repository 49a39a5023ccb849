"""AdamW with BERT's recipe: linear warmup, linear decay to 0, no decay on LayerNorm/bias.

Keras 3 core has everything that used to come from tensorflow-addons / BERT's own
optimization.py: AdamW with `exclude_from_weight_decay`, and learning-rate schedules.
"""

import keras
import tensorflow as tf


class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """lr(step) = peak·step/warmup during warmup, then peak·(total−step)/(total−warmup).

    The peak is reached exactly at the end of warmup (HuggingFace's
    `get_linear_schedule_with_warmup`); the rate is 0 from `total_steps` on.
    """

    def __init__(self, peak_learning_rate, total_steps, warmup_steps):
        self.peak_learning_rate = float(peak_learning_rate)
        self.total_steps = int(total_steps)
        self.warmup_steps = int(warmup_steps)

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        peak = tf.constant(self.peak_learning_rate, tf.float32)
        warmup = tf.constant(float(self.warmup_steps), tf.float32)
        total = tf.constant(float(self.total_steps), tf.float32)
        warm = peak * step / tf.maximum(warmup, 1.0)
        decay = peak * tf.maximum(total - step, 0.0) / tf.maximum(total - warmup, 1.0)
        return tf.where(step < warmup, warm, decay)

    def get_config(self):
        return {"peak_learning_rate": self.peak_learning_rate,
                "total_steps": self.total_steps, "warmup_steps": self.warmup_steps}


def is_excluded_from_weight_decay(variable):
    """LayerNorm scales/offsets and all biases are not decayed (BERT's AdamWeightDecay).

    keras-hub names them .../embeddings_layer_norm/{gamma,beta},
    .../self_attention_layer_norm/..., .../feedforward_layer_norm/... and .../bias.
    """
    path = variable.path
    leaf = path.rsplit("/", 1)[-1]
    return leaf == "bias" or "layer_norm" in path or "layernorm" in path.lower()


def create_optimizer(variables, learning_rate, total_steps, warmup_steps, weight_decay=0.01):
    """AdamW over `variables` with BERT's hyper-parameters (β2 0.999, ε 1e-6).

    Gradient clipping (global norm 1.0) is done by the training loop, after the
    cross-replica sum, so it is the same clip for every tf.distribute strategy.
    """
    optimizer = keras.optimizers.AdamW(
        learning_rate=WarmupLinearDecay(learning_rate, total_steps, warmup_steps),
        weight_decay=weight_decay,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-6,
    )
    optimizer.exclude_from_weight_decay(
        var_list=[v for v in variables if is_excluded_from_weight_decay(v)])
    return optimizer
