"""Curvature of the training loss (kerasbert/landscape/hessian.py), filter normalisation and
the filter-normalised planes: against the exact Hessian of a BERT model small enough to
build it (`tape.jacobian`, numpy `eigh`), finite differences, hand-computed filters and a
quadratic whose maximum over a ball is known; then the CLI end to end."""

import json
import os
import re
import types

import numpy as np
import pytest
import tensorflow as tf

from kerasbert import plugins
from kerasbert import run as run_lib
from kerasbert.config import RunConfig
from kerasbert.heads.classifier import ClsClassifier
from kerasbert.landscape import cli, curvature, directions, hessian, layers, surface
from kerasbert.landscape.config import LandscapeConfig
from kerasbert.model.backbone import random_backbone
from kerasbert.model.task_model import TaskModel
from kerasbert.training.trajectory import model_weights, snapshot

ROWS, SEQ, VOCAB = 7, 6, 12


@pytest.fixture(scope="module")
def tiny():
    """A 1-layer BERT (H=4, 2 heads, 12-token vocabulary) with a classifier: 362 weights,
    re-drawn at unit scale so every block has curvature; 7 rows of varied length, in
    batches of 3 (so the sample mean is over uneven, differently trimmed batches)."""
    model = TaskModel(random_backbone("1/4/2", VOCAB, max_position=SEQ, dropout=0.1, seed=0),
                      ClsClassifier(2, seed=0))
    rng = np.random.default_rng(0)
    lengths = np.array([6, 3, 5, 2, 6, 4, 3])
    mask = (np.arange(SEQ)[None, :] < lengths[:, None]).astype(np.int32)
    inputs = {"token_ids": rng.integers(0, VOCAB, (ROWS, SEQ)).astype(np.int32) * mask,
              "segment_ids": (np.arange(SEQ)[None, :] >= 2).astype(np.int32) * mask,
              "padding_mask": mask}
    labels = np.array([0, 1, 1, 0, 1, 0, 0], np.int32)
    model(inputs)
    for w in model_weights(model):
        scale = 0.2 if w.path.endswith(("bias", "beta")) else 0.6
        base = 1.0 if w.path.endswith("gamma") else 0.0
        w.assign(base + rng.normal(0, scale, w.shape).astype(np.float32))
    kind = plugins.resolve_kind("classification")
    features = types.SimpleNamespace(inputs=inputs, labels=labels)
    batches = hessian.sample_batches(features, 3, kind)
    return model, kind, inputs, labels, batches


@pytest.fixture(scope="module")
def losses(tiny):
    """One TrainingLoss per HVP method, shared: tracing, not the products, is the cost."""
    model, kind, _, _, batches = tiny
    return {m: hessian.TrainingLoss(model, kind, batches, hvp=m) for m in hessian.HVP_METHODS}


def _fresh(loss):
    loss.hvps, loss.hvp_seconds = 0, 0.0
    return loss


def _flat(blocks):
    return np.concatenate([np.asarray(tf.convert_to_tensor(b), np.float64).ravel()
                           for b in blocks])


@pytest.fixture(scope="module")
def exact(tiny):
    """The full Hessian of the mean loss over all 7 rows, by tape.jacobian of the gradient."""
    model, _, inputs, labels, _ = tiny
    variables = [w.value for w in model_weights(model)]
    with hessian.exact_moments(), tf.GradientTape() as outer:
        with tf.GradientTape() as inner:
            logits = model(inputs, training=False)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
        grads = inner.gradient(loss, variables)
        flat = tf.concat([tf.reshape(tf.convert_to_tensor(g), [-1]) for g in grads], 0)
    rows = outer.jacobian(flat, variables)
    matrix = np.concatenate([np.asarray(r, np.float64).reshape(flat.shape[0], -1)
                             for r in rows], axis=1)
    return (matrix + matrix.T) / 2, float(loss), _flat(grads)


def test_the_exact_hessian_is_a_real_test_case(tiny, exact):
    matrix, _, _ = exact
    eigenvalues = np.linalg.eigvalsh(matrix)
    assert matrix.shape == (362, 362)
    assert eigenvalues[-1] > 1e-2 and eigenvalues[0] < -1e-3  # indefinite, not trivial
    assert eigenvalues[-1] - eigenvalues[-2] > 1e-3 * eigenvalues[-1]  # a top-1 to find
    model, _, _, _, _ = tiny
    groups = layers.weight_groups(model)
    loss = hessian.TrainingLoss(model, tiny[1], tiny[4])
    # every group's block carries curvature (the test is not decided by the head alone)
    for g in layers.group_order(groups):
        idx = np.concatenate([np.arange(a, b) for a, b, h in
                              zip(loss.offsets[:-1], loss.offsets[1:], groups) if h == g])
        assert np.abs(matrix[np.ix_(idx, idx)]).max() > 1e-4, g


def test_layer_norm_second_derivatives_need_exact_moments():
    """tf.nn.moments' stop_gradient(mean) leaves LayerNorm's gradient exact but its second
    derivative wrong; under `exact_moments` the Hessian of a LayerNorm matches finite
    differences. (If TensorFlow drops the stop_gradient, the first check fails: then
    `exact_moments` is no longer needed.)"""
    import keras

    norm = keras.layers.LayerNormalization()
    x0 = tf.constant(np.random.default_rng(9).normal(0, 1, (1, 5)), tf.float32)
    weights = tf.constant(np.linspace(-1, 2, 5)[None], tf.float32)

    def hessian_of(x):
        with tf.GradientTape() as outer:
            outer.watch(x)
            with tf.GradientTape() as inner:
                inner.watch(x)
                y = tf.reduce_sum(weights * norm(x) ** 3)
            g = inner.gradient(y, x)
        return outer.jacobian(g, x).numpy().reshape(5, 5)

    def gradient_at(x):
        with hessian.exact_moments(), tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.reduce_sum(weights * norm(x) ** 3)
        return tape.gradient(y, x).numpy().ravel()

    h = 1e-2
    columns = []
    for i in range(5):
        e = np.zeros((1, 5), np.float32)
        e[0, i] = h
        columns.append((gradient_at(x0 + e) - gradient_at(x0 - e)) / (2 * h))
    reference = np.array(columns).T
    plain = hessian_of(x0)
    with hessian.exact_moments():
        fixed = hessian_of(x0)
    scale = np.abs(reference).max()
    assert np.abs(plain - reference).max() > 1e-2 * scale
    assert np.abs(fixed - reference).max() < 1e-2 * scale


@pytest.mark.parametrize("method", hessian.HVP_METHODS)
def test_hvp_equals_the_exact_hessian_times_v(losses, exact, method):
    loss = _fresh(losses[method])
    value, gradient = loss.value_and_gradient()
    assert value == pytest.approx(exact[1], rel=1e-5)
    np.testing.assert_allclose(gradient, exact[2], rtol=1e-4, atol=1e-6)
    rng = np.random.default_rng(1)
    for _ in range(2):
        v = rng.standard_normal(loss.size)
        hv = loss.hvp(v)
        reference = exact[0] @ v
        assert np.linalg.norm(hv - reference) < 1e-4 * np.linalg.norm(reference)
    assert loss.hvps == 2


def test_hvp_matches_finite_differences_of_the_gradient(losses):
    loss = losses["forward_over_backward"]
    theta = loss.weights()
    v = np.random.default_rng(2).standard_normal(loss.size)
    v /= np.linalg.norm(v)
    hv = loss.hvp(v)
    h = 2e-3  # truncation O(h²) against float32 rounding O(1e-7 / h)
    try:
        loss.set_weights(loss.blocks(theta + h * v))
        _, plus = loss.value_and_gradient()
        loss.set_weights(loss.blocks(theta - h * v))
        _, minus = loss.value_and_gradient()
    finally:
        loss.set_weights(loss.blocks(theta))
    difference = (plus - minus) / (2 * h)
    assert np.linalg.norm(hv - difference) < 2e-3 * np.linalg.norm(hv)


def test_lanczos_finds_the_top_eigenvalues_and_lambda_min_of_the_exact_hessian(losses, exact):
    loss = _fresh(losses["double_backward"])
    truth = np.linalg.eigvalsh(exact[0])[::-1]
    ritz, bounds = hessian.lanczos(loss.hvp, loss.size, steps=60, seed=0)
    assert loss.hvps == 60 and len(ritz) == 60
    np.testing.assert_allclose(ritz[:3], truth[:3], rtol=1e-3)
    assert ritz[-1] == pytest.approx(truth[-1], rel=1e-3)
    # the residual bound holds: a Ritz value is within it of some eigenvalue (up to the
    # float32 rounding of the products, which the bound does not include)
    for value, bound in zip(ritz[:3], bounds[:3]):
        assert np.min(np.abs(truth - value)) <= bound + 1e-5 * abs(value)


def test_lanczos_on_a_known_matrix_is_exact_at_full_size_and_bounds_its_error():
    rng = np.random.default_rng(3)
    q, _ = np.linalg.qr(rng.standard_normal((50, 50)))
    spectrum = np.concatenate([[9.0, 5.0, 4.0], np.linspace(-1, 1, 47)])
    matrix = q @ np.diag(spectrum) @ q.T
    ritz, bounds = hessian.lanczos(lambda v: matrix @ v, 50, steps=80)
    assert len(ritz) == 50  # at most `size` steps
    np.testing.assert_allclose(ritz, np.sort(spectrum)[::-1], atol=1e-5)
    ritz, bounds = hessian.lanczos(lambda v: matrix @ v, 50, steps=12)
    for value, bound in zip(ritz[:3], bounds[:3]):  # + the float32 storage of the basis
        assert np.min(np.abs(spectrum - value)) <= bound + 1e-7 * abs(value)
    assert ritz[0] == pytest.approx(9.0, rel=1e-6)


def test_hutchinson_trace_and_its_standard_error_against_the_exact_hessian(losses, exact):
    loss = losses["double_backward"]
    matrix = exact[0]
    probes = 200
    mean, error, samples, per_block = hessian.hutchinson(loss.hvp, loss.size, probes, seed=4,
                                                         offsets=loss.offsets)
    # Rademacher probes: Var(zᵀHz) = 2 Σ_{i≠j} H_ij², so the standard error is known.
    sigma = np.sqrt(2 * (np.sum(matrix ** 2) - np.sum(np.diag(matrix) ** 2)) / probes)
    assert abs(mean - np.trace(matrix)) < 4 * sigma  # a 4σ tolerance, fixed seed
    assert error == pytest.approx(sigma, rel=0.25)
    assert samples.shape == (probes,) and per_block.shape == (probes, len(loss.shapes))
    np.testing.assert_allclose(per_block.sum(axis=1), samples, rtol=1e-9)
    # each weight's block trace, from the same probes: z_bᵀ(Hz)_b has variance
    # 2 Σ_{i≠j in b} H_ij² + Σ_{i in b, j not in b} H_ij²
    for b, (start, stop) in enumerate(zip(loss.offsets[:-1], loss.offsets[1:])):
        block, rows = matrix[start:stop, start:stop], matrix[start:stop]
        variance = (2 * (np.sum(block ** 2) - np.sum(np.diag(block) ** 2))
                    + np.sum(rows ** 2) - np.sum(block ** 2))
        block_sigma = np.sqrt(variance / probes)
        assert abs(per_block[:, b].mean() - np.trace(block)) <= 4 * block_sigma + 1e-9


def test_a_group_block_hessian_is_the_diagonal_block_of_the_full_one(tiny, exact):
    model, kind, _, _, batches = tiny
    groups = layers.weight_groups(model)
    weights = model_weights(model)
    full = hessian.TrainingLoss(model, kind, batches)
    idx = np.concatenate([np.arange(a, b) for a, b, g in
                          zip(full.offsets[:-1], full.offsets[1:], groups) if g == "layer_0"])
    block = hessian.TrainingLoss(model, kind, batches,
                                 [w for w, g in zip(weights, groups) if g == "layer_0"])
    assert block.size == len(idx)
    v = np.random.default_rng(5).standard_normal(block.size)
    np.testing.assert_allclose(block.hvp(v), exact[0][np.ix_(idx, idx)] @ v, rtol=1e-4,
                               atol=1e-6)


def test_curvature_at_theta1_from_a_config_without_flags(tiny, exact):
    """The library as another tool calls it: a LandscapeConfig, a run, no flags."""
    model, kind, _, _, batches = tiny
    matrix = exact[0]
    truth = np.linalg.eigvalsh(matrix)[::-1]
    run = types.SimpleNamespace(model=model, kind=kind, label="tiny", trajectory=None)
    config = LandscapeConfig(run_dir="unused", mode=("hessian", "sharpness"), top_k=2,
                             lanczos_steps=60, hutchinson_probes=2,
                             epsilon=(0.01, 0.1), ascent_steps=2, seed=0)
    lines = []
    h = curvature.hessian_at_theta1(run, batches, config, log=lines.append)
    assert not cli.FLAGS.is_parsed()
    np.testing.assert_allclose(h["top_eigenvalues"], truth[:2], rtol=1e-3)
    assert h["lambda_min"] == pytest.approx(truth[-1], rel=1e-3)
    assert h["sample"] == 7 and h["parameters"] == len(matrix) and h["probes"] == 2
    assert h["hvps"] == 60 + 2 and "trajectory" not in h
    # per layer group: the block traces from the same probes (their own λ1 needs
    # --hessian_groups, the large CLI test's)
    assert [g["group"] for g in h["groups"]] == layers.group_order(layers.weight_groups(model))
    assert sum(g["trace"] for g in h["groups"]) == pytest.approx(h["trace"], rel=1e-6)
    assert not any("top_eigenvalues" in g for g in h["groups"])
    assert lines[0].startswith("kerasbert: tiny: Hessian top-2 ")
    theta1 = snapshot(model)
    rows = curvature.sharpness_at_theta1(run, batches, theta1, config, log=lines.append)
    assert [r["epsilon"] for r in rows] == [0.01, 0.1]
    assert all(r["rise"] >= 0.0 and r["biasbn"] == "ignore" and r["sample"] == 7
               and r["steps"] == 2 for r in rows)
    assert rows[0]["loss"] == pytest.approx(rows[1]["loss"])
    assert all(np.array_equal(a, b) for a, b in zip(snapshot(model), theta1))  # left at θ1


def test_filter_axes_of_a_bert_model_by_hand(tiny):
    model = tiny[0]
    axes = dict(zip((w.path for w in model_weights(model)), layers.filter_axes(model)))
    layer = "transformer_layer_0/self_attention_layer/"
    assert axes[layer + "query/kernel"] == (0,)  # [H, heads, head_dim]: a filter per (head, dim)
    assert axes[layer + "attention_output/kernel"] == (0, 1)  # [heads, head_dim, H]
    assert axes["transformer_layer_0/feedforward_intermediate_dense/kernel"] == (0,)
    assert axes["token_embedding/embeddings"] == (1,)  # one filter per token's vector
    assert axes["position_embedding/embeddings"] == (1,)
    # The head's auto-generated name takes a suffix when other models were built first in
    # the process (cls_classifier_3): match either.
    head_kernel = re.compile(r"(^|/)cls_classifier(_\d+)?/output/kernel$")
    assert [a for p, a in axes.items() if head_kernel.search(p)] == [(0,)]
    assert axes[layer + "query/bias"] is None and axes["embeddings_layer_norm/gamma"] is None


def test_filter_normalised_direction_by_hand():
    rng = np.random.default_rng(6)
    names = ["emb/embeddings", "att/query/kernel", "att/query/bias", "out/kernel", "norm/gamma"]
    theta = [rng.normal(0, s, shape).astype(np.float32) for s, shape in
             ((0.1, (5, 3)), (1.0, (3, 2, 2)), (0.3, (2, 2)), (2.0, (4, 3)), (1.0, (3,)))]
    filters = [(1,), (0,), None, (0,), None]
    delta = [rng.normal(0, 0.01, w.shape).astype(np.float32) for w in theta]
    d = directions.random_direction(theta, names, seed=1, orthogonal_to=delta, scale="weights",
                                    filters=filters)
    for i in range(5):  # embeddings: each row
        assert np.linalg.norm(d[0][i]) == pytest.approx(np.linalg.norm(theta[0][i]), rel=1e-5)
        assert abs(np.dot(d[0][i], delta[0][i])) < 1e-6 * np.linalg.norm(d[0][i]) * \
            np.linalg.norm(delta[0][i])
    for h in range(2):  # query kernel: each (head, dim) column over the input axis
        for k in range(2):
            assert np.linalg.norm(d[1][:, h, k]) == pytest.approx(
                np.linalg.norm(theta[1][:, h, k]), rel=1e-5)
    for j in range(3):  # dense kernel [in, out]: each output unit's column
        assert np.linalg.norm(d[3][:, j]) == pytest.approx(np.linalg.norm(theta[3][:, j]),
                                                           rel=1e-5)
    assert not d[2].any() and not d[4].any()  # biases and LayerNorm: ignored by default
    assert abs(directions.dot(d, delta)) < 1e-5 * directions.norm(d) * directions.norm(delta)
    kept = directions.random_direction(theta, names, seed=1, scale="weights", filters=filters,
                                       keep_biasbn=True)
    for i in (2, 4):  # kept: one filter, the vector's own norm
        assert np.linalg.norm(kept[i]) == pytest.approx(np.linalg.norm(theta[i]), rel=1e-5)
    # per-matrix normalisation is not per-filter: rows of the embedding differ in ratio
    matrix = directions.random_direction(theta, names, seed=1, scale="weights")
    assert np.linalg.norm(matrix[0]) == pytest.approx(np.linalg.norm(theta[0]), rel=1e-5)
    ratios = [np.linalg.norm(matrix[0][i]) / np.linalg.norm(theta[0][i]) for i in range(5)]
    assert np.ptp(ratios) > 0.05


def _quadratic(a_matrix, centre, shapes):
    """L(w) = ½ (w − c)ᵀ A (w − c) over the concatenated blocks; (loss, gradient blocks)."""
    sizes = [int(np.prod(s)) for s in shapes]

    def value_and_gradient(blocks):
        w = np.concatenate([np.asarray(b, np.float64).ravel() for b in blocks]) - centre
        g = a_matrix @ w
        parts = np.split(g, np.cumsum(sizes)[:-1])
        return 0.5 * w @ g, [p.reshape(s) for p, s in zip(parts, shapes)]
    return value_and_gradient


def test_epsilon_sharpness_on_quadratics_is_between_zero_and_the_exact_bounds():
    rng = np.random.default_rng(7)
    shapes = [(3, 4), (4,)]  # a kernel of 4 filters (columns of 3) and a bias, not perturbed
    axes = [(0,), None]
    q, _ = np.linalg.qr(rng.standard_normal((16, 16)))
    a_matrix = q @ np.diag(np.linspace(0.1, 3.0, 16)) @ q.T  # convex
    theta = [rng.normal(0, 1, s) for s in shapes]
    flat_theta = np.concatenate([t.ravel() for t in theta])
    epsilon = 0.05
    radii = np.linalg.norm(theta[0], axis=0) * epsilon  # per filter
    # At the minimum (θ = c), with one block, the best y is the top eigenvector: ½ λ r².
    one = _quadratic(a_matrix[:12, :12], flat_theta[:12], [(3, 4)])
    result = hessian.epsilon_sharpness(one, [theta[0]], [(0,)], epsilon, steps=40, seed=0)
    product_ball = 0.5 * np.linalg.eigvalsh(a_matrix[:12, :12])[-1] * np.sum(radii ** 2)
    assert 0.0 < result["rise"] <= product_ball + 1e-12  # the ball ⊂ the sphere of radius ‖r‖
    # Away from the minimum: rise ≤ ‖g‖R + ½ λ_max R² (Cauchy–Schwarz), and at least what
    # brute force finds among 20,000 points on the filters' spheres.
    f = _quadratic(a_matrix, flat_theta + rng.normal(0, 0.5, 16), shapes)
    result = hessian.epsilon_sharpness(f, theta, axes, epsilon, steps=20, seed=0)
    base, gradient = f(theta)
    radius = np.sqrt(np.sum(radii ** 2))
    bound = np.linalg.norm(gradient[0]) * radius + 0.5 * 3.0 * radius ** 2
    samples = rng.standard_normal((20000, 3, 4))
    samples *= radii / np.linalg.norm(samples, axis=1, keepdims=True)
    brute = max(f([theta[0] + y, theta[1]])[0] - base for y in samples)
    assert 0.0 <= brute <= result["rise"] <= bound
    assert result["loss"] == pytest.approx(base)
    assert result["keskar"] == pytest.approx(100 * result["rise"] / (1 + base))
    assert len(result["rises"]) == 21 and max(result["rises"]) == pytest.approx(result["rise"])


def test_scale_to_rise_bisects_to_the_target():
    calls = []

    def rise(c):
        calls.append(c)
        return c ** 2

    assert surface.scale_to_rise(rise, 4.0, iterations=12) == pytest.approx(2.0, rel=1e-3)
    assert surface.scale_to_rise(lambda c: c ** 2, 1e-4) == pytest.approx(1e-2, rel=1e-2)
    assert surface.scale_to_rise(lambda c: 0.0, 1.0) is None
    assert len(calls) < 20


def test_distance_from_the_plane():
    rng = np.random.default_rng(8)
    shapes = [(6, 2), (3,)]
    origin, d1, d2 = ([rng.normal(size=s) for s in shapes] for _ in range(3))
    on = directions.combine(origin, 0.5, d1, -0.25, d2)
    # an offset of length 0.3 orthogonal to the (non-orthogonal) plane's directions
    basis = np.stack([np.concatenate([x.ravel() for x in d]) for d in (d1, d2)])
    e = rng.normal(size=15)
    e -= basis.T @ np.linalg.lstsq(basis.T, e, rcond=None)[0]
    e *= 0.3 / np.linalg.norm(e)
    off = [on[0] + e[:12].reshape(6, 2), on[1] + e[12:]]
    points = [on, off]
    xy = directions.project(points, origin, d1, d2)
    distance, length = directions.off_plane(points, origin, d1, d2, xy)
    np.testing.assert_allclose(xy, [[0.5, -0.25], [0.5, -0.25]], atol=1e-9)
    np.testing.assert_allclose(distance, [0.0, 0.3], atol=1e-9)
    on_length = directions.norm(directions.subtract(on, origin))
    assert length[1] == pytest.approx(np.sqrt(on_length ** 2 + 0.09))


# --- The CLI ----------------------------------------------------------------------------------

TINY = {"task": "sst2", "init_checkpoint": "random", "model_size": "2/32/2",
        "max_seq_length": 32, "train_batch_size": 8, "eval_batch_size": 16,
        "max_train_examples": 32, "max_eval_examples": 16, "learning_rate": 1e-3, "seed": 3}


def _tiny_run(root, name, seed):
    folder = str(root / name)
    run_lib.execute(RunConfig(**{**TINY, "seed": seed}, output_dir=folder, num_train_epochs=1.0,
                               save_trajectory_every=2))
    return folder


@pytest.fixture(scope="module")
def one_run(tmp_path_factory):
    """4 steps, checkpoints at 0, 2, 4."""
    return _tiny_run(tmp_path_factory.mktemp("sharpness"), "a", 3)


@pytest.fixture(scope="module")
def two_runs(one_run, tmp_path_factory):
    return one_run, _tiny_run(tmp_path_factory.mktemp("sharpness"), "b", 4)


def test_cli_hessian_and_sharpness_write_their_files(one_run, tmp_path, capsys):
    first = one_run
    out = tmp_path / "out"
    code = cli.main(["landscape", f"--run_dir={first}", f"--output_dir={out}",
                     "--mode=hessian,sharpness", "--train_sample=8", "--dev_sample=4",
                     "--top_k=1", "--lanczos_steps=3", "--hutchinson_probes=2",
                     "--hvp=double_backward", "--epsilon=0.01,0.1", "--ascent_steps=1"])
    assert code == 0, capsys.readouterr().err
    assert {"hessian.json", "hessian.md", "hessian.png", "sharpness.json", "sharpness.md",
            "sharpness.png", "summary.json"} == set(os.listdir(out))
    h = json.loads((out / "hessian.json").read_text())["random init"]
    assert h["sample"] == 8 and h["hvps"] == 3 + 2 and h["hvp"] == "double_backward"
    assert h["top_eigenvalues"][0] >= h["lambda_min"] and h["trace_standard_error"] > 0
    assert "| random init |" in (out / "hessian.md").read_text()
    rows = json.loads((out / "sharpness.json").read_text())["random init"]
    assert [r["epsilon"] for r in rows] == [0.01, 0.1]
    assert 0.0 <= rows[0]["rise"] and rows[0]["loss"] == pytest.approx(rows[1]["loss"])
    summary = json.loads((out / "summary.json").read_text())["random init"]
    assert summary["hessian"]["top_eigenvalues"] == h["top_eigenvalues"]


@pytest.mark.large
def test_cli_hessian_sharpness_and_filter_normalised_planes_end_to_end(two_runs, tmp_path,
                                                                        capsys):
    first, second = two_runs
    out = tmp_path / "out"
    code = cli.main(["landscape", f"--run_dir={first}", f"--compare_run_dir={second}",
                     f"--output_dir={out}", "--mode=hessian,sharpness,2d", "--grid=3",
                     "--train_sample=12", "--dev_sample=8", "--top_k=2", "--lanczos_steps=4",
                     "--hutchinson_probes=3", "--hessian_groups", "--hessian_trajectory",
                     "--epsilon=0.01", "--ascent_steps=2", "--direction=random_pair",
                     "--normalization=filter", "--direction_scale=loss_rise",
                     "--loss_rise=0.5"])
    assert code == 0, capsys.readouterr().err
    names = set(os.listdir(out))
    for png in ("hessian.png", "sharpness.png", "2d.png", "2d_surface.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert {"hessian.json", "hessian.md", "sharpness.json", "sharpness.md",
            "2d_trajectory.csv", "summary.json"} <= names
    assert not [n for n in names if n.startswith(".")]
    result = json.loads((out / "hessian.json").read_text())
    assert list(result) == ["random init", "random init (b)"]
    h = result["random init"]
    assert h["sample"] == 12 and len(h["top_eigenvalues"]) == 2
    assert h["top_eigenvalues"][0] >= h["top_eigenvalues"][1] >= h["lambda_min"]
    assert [g["group"] for g in h["groups"]] == ["embeddings", "layer_0", "layer_1", "pooler",
                                                  "head"]
    assert sum(g["trace"] for g in h["groups"]) == pytest.approx(h["trace"], rel=1e-6)
    assert all(len(g["top_eigenvalues"]) == 2 for g in h["groups"])
    assert [r["step"] for r in h["trajectory"]] == [0, 2, 4]
    # λ_max at the last checkpoint (θ1) is the top eigenvalue found at θ1 (same seed/steps)
    assert h["trajectory"][-1]["lambda_max"] == pytest.approx(h["top_eigenvalues"][0],
                                                              rel=1e-4)
    assert h["hvps"] == 4 + 3 + 5 * 4 + 3 * 4
    table = (out / "hessian.md").read_text()
    assert "| random init | " in table and "λ_max along the trajectory" in table
    sharp = json.loads((out / "sharpness.json").read_text())["random init"]
    assert sharp[0]["epsilon"] == 0.01 and sharp[0]["rise"] >= 0.0
    trajectory = (out / "2d_trajectory.csv").read_text().splitlines()
    assert trajectory[0].startswith("run,step,alpha,beta,distance_from_theta1")
    assert len(trajectory) == 1 + 2 * 3
    summary = json.loads((out / "summary.json").read_text())["random init"]
    assert {"hessian", "sharpness", "flatness"} <= set(summary)
    # a random plane does not hold the path: its checkpoints lie off the plane
    assert summary["flatness"]["trajectory_max_relative_distance_from_plane"] > 0.5
    # the loss_rise scale: at the far edge of the range the training loss rose by ~0.5
    saved = np.load(out / "2d_random_init.npz")
    centre = saved["train_loss"][1, 1]
    edges = [saved["train_loss"][1, 0], saved["train_loss"][1, 2]]
    assert max(edges) - centre == pytest.approx(0.5, rel=0.05)


def test_cli_rejects_bad_curvature_flags_with_one_line(one_run, capsys):
    first = one_run
    cases = [
        (["--mode=hessian", "--top_k=3", "--lanczos_steps=2"], "--lanczos_steps=2"),
        (["--mode=hessian", "--hutchinson_probes=1"], "--hutchinson_probes=1"),
        (["--mode=hessian", "--top_k=0"], "--top_k=0: must be at least 1"),
        (["--mode=sharpness", "--epsilon=0"], "--epsilon=0"),
        (["--mode=sharpness", "--epsilon=wide"], "--epsilon=wide"),
        (["--mode=sharpness", "--ascent_steps=0"], "--ascent_steps=0"),
        (["--direction=pca", "--normalization=filter"], "--normalization=filter"),
        (["--mode=2d", "--hessian_groups"], "--hessian_groups: needs --mode=hessian"),
        (["--mode=hessian", "--hvp=symbolic"], "--hvp"),
        (["--direction_scale=sideways"], "--direction_scale"),
        (["--loss_rise=0"], "--loss_rise=0"),
        (["--mode=curvature"], "--mode=curvature"),
    ]
    for argv, message in cases:
        assert cli.main(["landscape", f"--run_dir={first}", *argv]) == 2, argv
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1, err


def test_hessian_table_has_a_per_group_section_only_when_a_group_was_measured():
    """Without probes and --hessian_groups the groups carry no number: no table of dashes
    (the stability experiment's plane asks for λ_max alone)."""
    from kerasbert.landscape import writers

    def hessian(groups):
        return {"sample": 8, "parameters": 10, "hvp": "double_backward", "lanczos_steps": 4,
                "top_eigenvalues": [5.0], "residual_bounds": [1e-9], "lambda_min": -1.0,
                "lambda_min_residual_bound": 1e-3, "hvps_per_second": 2.0, "groups": groups}

    bare = [{"group": "head", "parameters": 10}]
    assert "Per layer group" not in writers.hessian_markdown({"run": hessian(bare)})
    measured = [{"group": "head", "parameters": 10, "top_eigenvalues": [4.0],
                 "residual_bounds": [1e-9]}]
    table = writers.hessian_markdown({"run": hessian(measured)})
    assert "## Per layer group" in table and "| run | head | 10 | — | 4 " in table
