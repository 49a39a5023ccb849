import keras
import keras_hub
import numpy as np
import pytest
import tensorflow as tf

from kerasbert.heads.classifier import ClsClassifier
from kerasbert.model.task_model import TaskModel
from kerasbert.training import optimization


def _tiny_model(num_layers=2):
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=50, num_layers=num_layers, num_heads=2, hidden_dim=8,
        intermediate_dim=16, max_sequence_length=16)
    model = TaskModel(backbone, ClsClassifier(3))
    ids = np.ones([2, 5], np.int32)
    model({"token_ids": ids, "segment_ids": ids * 0, "padding_mask": ids})
    return model


def test_schedule_warmup_then_linear_decay_to_zero():
    schedule = optimization.WarmupLinearDecay(1e-3, total_steps=100, warmup_steps=10)
    # warmup: 1e-3 * step / 10; decay: 1e-3 * (100 - step) / 90
    expected = {0: 0.0, 5: 5e-4, 10: 1e-3, 55: 5e-4, 100: 0.0, 120: 0.0}
    for step, lr in expected.items():
        assert float(schedule(step)) == pytest.approx(lr, abs=1e-9), step


def test_schedule_without_warmup_starts_at_peak():
    schedule = optimization.WarmupLinearDecay(2e-5, total_steps=4, warmup_steps=0)
    assert [float(schedule(s)) for s in range(5)] == pytest.approx(
        [2e-5, 1.5e-5, 1e-5, 0.5e-5, 0.0])


def test_decay_exclusion_matches_keras_hub_variable_names():
    model = _tiny_model(num_layers=2)
    excluded = sorted(v.path for v in model.trainable_variables
                      if optimization.is_excluded_from_weight_decay(v))
    decayed = sorted(v.path for v in model.trainable_variables
                     if not optimization.is_excluded_from_weight_decay(v))
    # Per transformer layer: q, k, v, output-projection and two feed-forward biases, and
    # two LayerNorms (gamma, beta) = 10; plus the embeddings LayerNorm (2), the pooler
    # bias and the head's bias = 2 * 10 + 4 = 24.
    assert len(excluded) == 24
    assert all(p.endswith("/bias") or p.endswith("/gamma") or p.endswith("/beta")
               for p in excluded)
    assert sum("layer_norm" in p for p in excluded) == 2 * 4 + 2
    # Decayed: 3 embedding tables, per layer 4 attention + 2 feed-forward kernels,
    # the pooler and head kernels = 3 + 2 * 6 + 2 = 17; none is a bias or a norm.
    assert len(decayed) == 17
    assert all(p.endswith("/kernel") or p.endswith("/embeddings") for p in decayed), decayed


def test_adamw_really_skips_decay_on_excluded_variables():
    model = _tiny_model(num_layers=1)
    variables = model.trainable_variables
    optimizer = optimization.create_optimizer(variables, 0.1, total_steps=10, warmup_steps=0,
                                              weight_decay=0.5)
    before = [v.numpy().copy() for v in variables]
    # Zero gradients: Adam's update is 0, so only weight decay can move a variable.
    optimizer.apply([tf.zeros_like(v) for v in variables], variables)
    for v, old in zip(variables, before):
        moved = not np.allclose(v.numpy(), old)
        if optimization.is_excluded_from_weight_decay(v):
            assert not moved, v.path
        elif np.any(old != 0):
            # decoupled decay: w ← w − lr·wd·w with lr = 0.1 at step 0, wd = 0.5
            np.testing.assert_allclose(v.numpy(), old * (1 - 0.1 * 0.5), rtol=1e-6)


@pytest.mark.parametrize("weight_decay", [0.01, 0.5])
def test_fused_adamw_takes_the_steps_of_keras_adamw(weight_decay):
    """Five steps of random gradients under the warmup/decay schedule, with the decay
    exclusions: the fused kernels give Keras' AdamW's weights and moments. Not bit for bit:
    the kernel forms 1 − β2 from float32 β2 (0.00099998713, not 0.001), so v differs by
    1.3e-5 relative and the weights by ~1e-5 of an update."""
    rng = np.random.default_rng(0)
    models = [_tiny_model(num_layers=1) for _ in range(2)]
    for v, w in zip(models[1].trainable_variables, models[0].trainable_variables):
        v.assign(w)
    variables = [m.trainable_variables for m in models]
    schedule = dict(learning_rate=optimization.WarmupLinearDecay(0.01, 8, 2),
                    weight_decay=weight_decay, beta_1=0.9, beta_2=0.999, epsilon=1e-6)
    fused = optimization.create_optimizer(variables[0], 0.01, total_steps=8, warmup_steps=2,
                                          weight_decay=weight_decay)
    plain = keras.optimizers.AdamW(**schedule)
    plain.exclude_from_weight_decay(var_list=[
        v for v in variables[1] if optimization.is_excluded_from_weight_decay(v)])
    assert isinstance(fused, optimization.FusedAdamW)
    for _ in range(5):
        grads = [rng.normal(size=v.shape).astype(np.float32) for v in variables[0]]
        fused.apply([tf.constant(g) for g in grads], variables[0])
        plain.apply([tf.constant(g) for g in grads], variables[1])
    for a, b in zip(*variables):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-6, err_msg=a.path)
    for a, b in zip(fused.variables, plain.variables):  # iterations, m and v of each variable
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=5e-5, atol=1e-7)
    assert int(fused.iterations.numpy()) == 5
