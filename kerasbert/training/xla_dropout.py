"""Dropout masks inside XLA-compiled steps on the CPU: ThreeFry instead of the default.

Keras' TensorFlow backend draws dropout masks with `tf.nn.experimental.stateless_dropout`
and TF's default algorithm ("auto_select"). Inside an XLA cluster on the CPU that lowers to
a slow generic path: one [32, 12, 128, 128] attention-dropout mask took 3.2 s there, 94 ms
with Philox and 11 ms with ThreeFry (2 cores, 2026-11-30, /tmp micro-benchmark noted in
docs/experiments/speed-and-memory.md). In a MiniLM-L6 step (batch 32 × 128) ThreeFry cut the
step's CPU time by ~18%.

`threefry_dropout()` is a context under which Keras' dropout passes rng_alg="threefry";
the Trainer traces its XLA-compiled gradient function inside it when the replicas are
CPUs. Outside the context (graph-mode steps, prediction, GPUs) Keras' own function runs
unchanged: ThreeFry has no CPU kernel outside XLA, and GPUs already use Philox.
Masks stay a pure function of Keras' seed-generator state, so runs remain reproducible.
"""

import contextlib
import threading

import tensorflow as tf
from keras.src.backend.tensorflow import random as keras_tf_random
from keras.src.random.seed_generator import draw_seed

_state = threading.local()
_keras_dropout = keras_tf_random.dropout


def _dropout(inputs, rate, noise_shape=None, seed=None):
    if not getattr(_state, "threefry", False) or rate in (0.0, 1.0):
        return _keras_dropout(inputs, rate, noise_shape=noise_shape, seed=seed)
    seed = keras_tf_random._cast_seed(draw_seed(seed))
    noise_shape = keras_tf_random._get_concrete_noise_shape(inputs, noise_shape)
    return tf.nn.experimental.stateless_dropout(inputs, rate=rate, seed=seed,
                                                noise_shape=noise_shape, rng_alg="threefry")


# Layers reach dropout as `keras.src.backend.random.dropout`, i.e. this module attribute.
keras_tf_random.dropout = _dropout


@contextlib.contextmanager
def threefry_dropout(enabled=True):
    """While tracing inside this context, Keras dropout draws its masks with ThreeFry."""
    previous = getattr(_state, "threefry", False)
    _state.threefry = bool(enabled)
    try:
        yield
    finally:
        _state.threefry = previous
