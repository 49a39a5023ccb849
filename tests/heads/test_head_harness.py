"""The head harness (tests/harness.py) over every (head, kind) pair the registered heads
declare, installed plugins' heads included: output layout, get_config round trip,
padding invariance, gradients to every weight, determinism per seed."""

import sys

import keras
import pytest

from kerasbert import plugins
from kerasbert.hookspecs import HeadSpec, hookimpl
from tests import harness


@pytest.mark.parametrize(("head", "kind"), harness.head_kind_pairs())
def test_head_on_every_kind_it_declares(head, kind):
    harness.check_head(head, kind)


def test_the_harness_covers_every_kind_of_every_head():
    pairs = harness.head_kind_pairs()
    assert ("cls_linear", "multiple_choice") in pairs and ("top_bilstm", "span") in pairs
    assert len(pairs) == sum(len(spec.kinds) for spec, _ in
                             plugins.registry().heads.values())


class FlawedHead(keras.layers.Layer):
    """A masked mean of the final states and a dense layer, with one `flaw`."""

    def __init__(self, num_outputs=1, seed=None, flaw=None, **kwargs):
        super().__init__(**kwargs)
        self.num_outputs, self.seed, self.flaw = num_outputs, seed, flaw
        self.dense = keras.layers.Dense(num_outputs, kernel_initializer=(
            keras.initializers.GlorotUniform(seed=None if flaw == "unseeded" else seed)))

    def build(self, input_shape):
        if self.flaw == "unused_weight":
            self.unused = self.add_weight(shape=(2,), initializer="zeros", name="unused")

    def call(self, features, training=False):
        states = features["sequence_output"]
        mask = keras.ops.cast(features["padding_mask"], states.dtype)[..., None]
        if self.flaw == "reads_padding":
            mask = keras.ops.ones_like(mask)
        return self.dense(keras.ops.sum(states * mask, 1) / keras.ops.sum(mask, 1))

    def get_config(self):
        config = dict(super().get_config(), seed=self.seed, flaw=self.flaw)
        if self.flaw != "forgets_num_outputs":
            config["num_outputs"] = self.num_outputs
        return config


@hookimpl
def kerasbert_heads():
    return [HeadSpec(name=f"flawed_{flaw}", kinds=("classification",),
                     build=lambda context, flaw=flaw: FlawedHead(
                         context.num_outputs, seed=context.seed, flaw=flaw))
            for flaw in (None, "reads_padding", "forgets_num_outputs", "unseeded",
                         "unused_weight")]


@pytest.fixture(scope="module")
def flawed_registry():
    manager, _, _ = plugins.make_manager(autoload=False)
    manager.register(sys.modules[__name__], name="flawed_heads")
    return plugins.Registry(manager)


@pytest.mark.parametrize(("flaw", "check"), [
    ("reads_padding", "check_padding_invariance"),
    ("forgets_num_outputs", "check_config_round_trip"),
    ("unseeded", "check_determinism"),
    ("unused_weight", "check_gradients"),
])
def test_the_harness_finds_a_flawed_head(flawed_registry, flaw, check):
    harness.check_head("flawed_None", "classification", flawed_registry)
    with pytest.raises(AssertionError, match=f"harness check {check}: flawed_{flaw} on"):
        harness.check_head(f"flawed_{flaw}", "classification", flawed_registry)
