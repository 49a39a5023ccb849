import keras
import keras_hub
import numpy as np
import pytest
import tensorflow as tf

from kerasbert.heads.classifier import ClsClassifier
from kerasbert.model.task_model import TaskModel
from kerasbert.training import optimization, phases


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
def test_fused_adamw_keeps_the_moments_of_keras_adamw(weight_decay):
    """Five steps of random gradients under the warmup/decay schedule, with the decay
    exclusions: the fused kernels keep Keras' AdamW's moments and step count (checkpoints
    are interchangeable), and the weights differ only by where ε sits, a few 1e-5 of an
    update at gradients of ~1 (test below). Not bit for bit: the kernel forms 1 − β2 from
    float32 β2 (0.00099998713, not 0.001), so v differs by 1.3e-5 relative."""
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
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-3, atol=1e-5, err_msg=a.path)
    for a, b in zip(fused.variables, plain.variables):  # iterations, m and v of each variable
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=5e-5, atol=1e-7)
    assert int(fused.iterations.numpy()) == 5


def _adam_algorithm_1(weights, grads_per_step, schedule, weight_decay, decayed, eps=1e-6,
                     factors=None):
    """NumPy AdamW as PyTorch's torch.optim.AdamW takes it (HuggingFace's optimizer):
    decoupled decay w ← w − lr·wd·w, then w ← w − lr·m̂/(√v̂ + ε), ε on the corrected v̂;
    `factors[i]` scales variable i's rate (a parameter group with its own lr)."""
    weights = [w.astype(np.float64) for w in weights]
    m = [np.zeros_like(w) for w in weights]
    v = [np.zeros_like(w) for w in weights]
    factors = factors or [1.0] * len(weights)
    for t, grads in enumerate(grads_per_step, start=1):
        for i, g in enumerate(grads):
            lr = float(schedule(t - 1)) * factors[i]
            if decayed[i]:
                weights[i] = weights[i] - lr * weight_decay * weights[i]
            m[i] = 0.9 * m[i] + 0.1 * g
            v[i] = 0.999 * v[i] + 0.001 * g * g
            m_hat, v_hat = m[i] / (1 - 0.9 ** t), v[i] / (1 - 0.999 ** t)
            weights[i] = weights[i] - lr * m_hat / (np.sqrt(v_hat) + eps)
    return weights


@pytest.mark.parametrize("path", ["fused", "keras"])
@pytest.mark.parametrize("scale", [1.0, 1e-6])
def test_adamw_puts_epsilon_on_the_bias_corrected_second_moment(path, scale):
    """Both update paths (the fused kernel; Keras' own, which a TPU strategy takes) take
    Adam's Algorithm 1 step, PyTorch's, for gradients of ~1 and of ~1e-6, the size where ε
    matters: there Keras' ε on the uncorrected √v moved the weights ~17× less at the first
    step."""
    rng = np.random.default_rng(1)
    model = _tiny_model(num_layers=1)
    variables = model.trainable_variables
    start = [v.numpy().copy() for v in variables]
    optimizer = optimization.create_optimizer(variables, 0.01, total_steps=6, warmup_steps=1,
                                              weight_decay=0.01)
    if path == "keras":
        optimizer._fused = lambda: False
    steps = [[(rng.normal(size=v.shape) * scale).astype(np.float32) for v in variables]
             for _ in range(4)]
    for grads in steps:
        optimizer.apply([tf.constant(g) for g in grads], variables)
    decayed = [not optimization.is_excluded_from_weight_decay(v) for v in variables]
    schedule = optimization.WarmupLinearDecay(0.01, total_steps=6, warmup_steps=1)
    expected = _adam_algorithm_1(start, steps, schedule, 0.01, decayed)
    for v, w0, w in zip(variables, start, expected):
        # The updates (~0.01 per step here), not the weights, to 1e-3 of themselves.
        np.testing.assert_allclose(v.numpy() - w0, w - w0, rtol=1e-3, atol=1e-7,
                                   err_msg=v.path)


@pytest.mark.parametrize("path", ["fused", "keras"])
def test_the_head_steps_and_decays_at_its_own_learning_rate(path):
    """--head_learning_rate: the head's variables follow the same warmup and decay to their
    own peak (20× here), in both the step and the decoupled decay, as a PyTorch parameter
    group with its own lr would; the encoder's keep the base rate."""
    rng = np.random.default_rng(2)
    model = _tiny_model(num_layers=1)
    variables = model.trainable_variables
    head = phases.head_variables(model)
    # the classifier's kernel and bias, nothing of the encoder (pooled_dense is the encoder's)
    assert [id(v) for v in head] == [id(v) for v in model.head.trainable_variables]
    assert len(head) == 2
    start = [v.numpy().copy() for v in variables]
    optimizer = optimization.create_optimizer(
        variables, 0.001, total_steps=6, warmup_steps=2, weight_decay=0.1,
        head_variables=head, head_learning_rate=0.02)
    if path == "keras":
        optimizer._fused = lambda: False
    steps = [[rng.normal(size=v.shape).astype(np.float32) for v in variables]
             for _ in range(4)]
    for grads in steps:
        optimizer.apply([tf.constant(g) for g in grads], variables)
    decayed = [not optimization.is_excluded_from_weight_decay(v) for v in variables]
    factors = [20.0 if any(v is h for h in head) else 1.0 for v in variables]
    schedule = optimization.WarmupLinearDecay(0.001, total_steps=6, warmup_steps=2)
    expected = _adam_algorithm_1(start, steps, schedule, 0.1, decayed, factors=factors)
    for v, w0, w in zip(variables, start, expected):
        np.testing.assert_allclose(v.numpy() - w0, w - w0, rtol=1e-3, atol=1e-7,
                                   err_msg=v.path)


@pytest.mark.parametrize("path", ["fused", "keras"])
def test_a_sparse_gradient_with_repeated_rows_takes_the_dense_step(path):
    """An embedding's gradient (IndexedSlices, one row per occurrence of an id) moves the
    table and the moments as its summed dense form does. Keras' own Adam applied it row
    by row: v of a row seen twice was g² + g² instead of (2g)², and the row moved ~1.4×
    too far."""
    tables, optimizers = [], []
    for _ in range(2):
        table = keras.Variable(np.ones([4, 2], np.float32), name="embeddings")
        optimizer = optimization.create_optimizer([table], 0.1, total_steps=10,
                                                  warmup_steps=0, weight_decay=0.0)
        if path == "keras":
            optimizer._fused = lambda: False
        tables.append(table)
        optimizers.append(optimizer)
    rows = tf.IndexedSlices(tf.constant([[1.0, 2.0], [1.0, 2.0], [3.0, -4.0]]),
                            tf.constant([0, 0, 2]), tf.constant([4, 2]))
    for _ in range(3):
        optimizers[0].apply([rows], [tables[0]])
        optimizers[1].apply([tf.convert_to_tensor(rows)], [tables[1]])
    np.testing.assert_allclose(tables[0].numpy(), tables[1].numpy(), rtol=1e-6)
    for a, b in zip(optimizers[0].variables, optimizers[1].variables):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)
    assert np.all(tables[0].numpy()[[1, 3]] == 1.0)  # rows without a gradient stay


def test_fused_adamw_makes_the_step_constants_once_not_per_variable():
    """β1, β2 and the step's ε are computed once per traced step (each variable's update
    is its decay and one ResourceApplyAdam): fewer graph ops to trace before the first
    step. The weights it gives are bit for bit those of the per-variable form."""
    model = _tiny_model(num_layers=1)
    variables = model.trainable_variables
    optimizer = optimization.create_optimizer(variables, 0.01, total_steps=8, warmup_steps=2)
    optimizer.build(variables)
    step = tf.function(lambda grads: optimizer.apply(grads, variables), autograph=False)
    graph = step.get_concrete_function([tf.TensorSpec(v.shape, v.dtype)
                                        for v in variables]).graph
    types = [op.type for op in graph.get_operations()]
    assert types.count("ResourceApplyAdam") == len(variables) > 2
    assert types.count("Sqrt") == 1  # the step's ε: ε·√(1 − β2ᵗ)
