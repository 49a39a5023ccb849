"""--adam_bias_correction=false: google-research/bert's AdamWeightDecay, on hand values.

BERT (optimization.py, AdamWeightDecayOptimizer), per variable w with gradient g:
    m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²
    update = m/(√v + ε) + wd·w   (wd·w only for variables not excluded: not biases, norms)
    w ← w − lr·update
"""

import keras
import numpy as np
import pytest

from kerasbert.training import optimization

LR, TOTAL, WD, B1, B2, EPS = 1e-2, 100, 0.5, 0.9, 0.999, 1e-6
KERNEL, BIAS = np.array([0.5, -1.0]), np.array([0.2])
GRADS = [([0.1, -0.2], [0.5]), ([0.3, 0.05], [-0.25]), ([-0.1, 0.4], [0.1])]


def bert_steps(weight_decay, steps=len(GRADS)):
    """BERT's rule in NumPy, the learning rate of each step from the linear decay
    (no warmup): LR·(TOTAL − t)/TOTAL at step t = 0, 1, ..."""
    weights, moments = [KERNEL.copy(), BIAS.copy()], [[0.0, 0.0], [0.0, 0.0]]
    for t, grads in enumerate(GRADS[:steps]):
        lr = LR * (TOTAL - t) / TOTAL
        for i, (g, decays) in enumerate(zip(map(np.array, grads), (True, False))):
            m, v = moments[i]
            m = B1 * m + (1 - B1) * g
            v = B2 * v + (1 - B2) * g * g
            moments[i] = [m, v]
            update = m / (np.sqrt(v) + EPS) + (weight_decay * weights[i] if decays else 0)
            weights[i] = weights[i] - lr * update
    return weights


def optimizer_steps(weight_decay, bias_correction, fused=True, steps=len(GRADS)):
    kernel = keras.Variable(KERNEL.astype("float32"), name="kernel")
    bias = keras.Variable(BIAS.astype("float32"), name="bias")  # excluded from decay
    optimizer = optimization.create_optimizer([kernel, bias], LR, TOTAL, warmup_steps=0,
                                              weight_decay=weight_decay,
                                              bias_correction=bias_correction)
    if not fused:  # Keras' own path (a TPU strategy's)
        optimizer._fused = lambda: False
    for grads in GRADS[:steps]:
        optimizer.apply_gradients(zip([np.float32(grads[0]), np.float32(grads[1])],
                                      [kernel, bias]))
    return [kernel.numpy(), bias.numpy()]


def test_the_reference_first_step_by_hand():
    # Step 1, kernel[0]: g 0.1 → m 0.01, v 1e-5, √v 0.00316228; update 0.01/0.00316328 +
    # 0.5·0.5 = 3.16128 + 0.25; w = 0.5 − 0.01·3.41128 = 0.4658872.
    assert bert_steps(WD, steps=1)[0][0] == pytest.approx(0.4658872, abs=1e-7)
    # bias: g 0.5 → m 0.05, v 2.5e-4, √v 0.0158114; no decay: 0.2 − 0.01·3.16208 = 0.1683792
    assert bert_steps(WD, steps=1)[1][0] == pytest.approx(0.1683792, abs=1e-7)


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "keras_path"])
@pytest.mark.parametrize("weight_decay", [WD, 0.0], ids=["decay", "no_decay"])
def test_without_bias_correction_it_is_berts_adam_weight_decay(weight_decay, fused):
    for steps in (1, len(GRADS)):
        got = optimizer_steps(weight_decay, bias_correction=False, fused=fused, steps=steps)
        for ours, bert in zip(got, bert_steps(weight_decay, steps)):
            np.testing.assert_allclose(ours, bert, rtol=0, atol=1e-6)


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "keras_path"])
def test_with_bias_correction_the_first_step_is_adams(fused):
    # Adam's first step: m̂ = g, v̂ = g², w ← w − lr·g/(|g| + ε) (ε on √v̂), about lr·sign(g);
    # without the correction the step is (1 − β1)/√(1 − β2) ≈ 3.16 times as large.
    got = optimizer_steps(0.0, bias_correction=True, fused=fused, steps=1)
    g = np.array(GRADS[0][0])
    adam = KERNEL - LR * g / (np.abs(g) + EPS)
    np.testing.assert_allclose(got[0], adam, rtol=0, atol=1e-6)
    bert = optimizer_steps(0.0, bias_correction=False, fused=fused, steps=1)
    np.testing.assert_allclose((bert[0] - KERNEL) / (got[0] - KERNEL),
                               (1 - B1) / np.sqrt(1 - B2), rtol=1e-3)


def test_the_flag_reaches_the_optimizer_and_its_config():
    kernel = keras.Variable(KERNEL.astype("float32"), name="kernel")
    optimizer = optimization.create_optimizer([kernel], LR, TOTAL, 0, bias_correction=False)
    assert optimizer.bias_correction is False
    assert optimizer.get_config()["bias_correction"] is False
