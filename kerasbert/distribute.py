"""The tf.distribute strategy from the flags; virtual CPU devices for tests."""

import tensorflow as tf

from kerasbert.errors import InputError


def make_strategy(name="one_device"):
    if name == "one_device":
        gpus = tf.config.list_logical_devices("GPU")
        return tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else "/cpu:0")
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    raise InputError(f"--distribution_strategy={name}: unknown strategy")


def split_cpu(count):
    """Splits the CPU into `count` logical devices (must run before TF initialises them)."""
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(count)])
