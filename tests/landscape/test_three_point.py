"""The three-point plane (kerasbert/landscape/three_point.py): θ0, θ_a, θ_b at their
coordinates against direct evaluation of those weights, the barrier of a path whose losses
are known by hand, the curvature at θ_b against the run's own, the files, and refusals."""

import json
import os
import shutil
import types

import numpy as np
import pytest

from kerasbert import run as run_lib
from kerasbert.config import RunConfig
from kerasbert.errors import InputError
from kerasbert.landscape import cli, directions, layers, surface, three_point
from kerasbert.landscape import run as landscape_run
from kerasbert.landscape.config import LandscapeConfig
from kerasbert.training.trajectory import assign, weight_names

TINY = {"task": "sst2", "init_checkpoint": "random", "model_size": "2/32/2",
        "max_seq_length": 32, "train_batch_size": 8, "eval_batch_size": 16,
        "max_train_examples": 32, "max_eval_examples": 16, "seed": 3}


def _train(root, name, **settings):
    folder = str(root / name)
    run_lib.execute(RunConfig(**{**TINY, "learning_rate": 1e-3, **settings}, output_dir=folder,
                              num_train_epochs=1.0, save_trajectory_every=2))
    return folder


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """Two runs from one θ0 (the random encoder and the head are seeded by --seed) that
    move apart (other learning rates), and one from another encoder (another seed)."""
    root = tmp_path_factory.mktemp("three_point")
    return (_train(root, "a"), _train(root, "b", learning_rate=3e-3),
            _train(root, "other", seed=4))


def _direct(model, features):
    """Mean cross-entropy and accuracy of `model` on `features`, in numpy (not the
    evaluator under test)."""
    logits = np.asarray(model({k: np.asarray(v) for k, v in features.inputs.items()},
                              training=False), np.float64)
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    labels = features.labels
    return (-log_probs[np.arange(len(labels)), labels].mean(),
            float((logits.argmax(axis=1) == labels).mean()))


def test_basis_is_orthogonal_and_puts_the_points_at_their_coordinates():
    rng = np.random.default_rng(0)
    shapes = [(5, 3), (3,), (4, 2, 2)]
    theta0, theta_a, theta_b = ([rng.normal(0, 1, s).astype(np.float32) for s in shapes]
                                for _ in range(3))
    d1, d2, xy = three_point.basis(theta0, theta_a, theta_b)
    assert xy["theta0"] == (0.0, 0.0) and xy["theta_a"] == (1.0, 0.0) and xy["theta_b"][1] > 0
    assert abs(directions.dot(d1, d2)) < 1e-5 * directions.norm(d1) ** 2
    assert directions.norm(d2) == pytest.approx(directions.norm(d1), rel=1e-6)
    for name, point in (("theta_a", theta_a), ("theta_b", theta_b)):
        rebuilt = directions.combine(theta0, xy[name][0], d1, xy[name][1], d2)
        for x, y in zip(rebuilt, point):
            np.testing.assert_allclose(x, y, atol=1e-5)
    # distances are kept: |θ_b − θ_a| in plane units times ‖d1‖
    (xa, ya), (xb, yb) = xy["theta_a"], xy["theta_b"]
    assert np.hypot(xb - xa, yb - ya) * directions.norm(d1) == pytest.approx(
        directions.norm(directions.subtract(theta_b, theta_a)), rel=1e-5)
    # θ_b on the line through θ0 and θ_a spans no plane
    on_line = directions.combine(theta0, -0.5, directions.subtract(theta_a, theta0))
    assert three_point.basis(theta0, theta_a, on_line)[1] is None
    assert three_point.axis_ranges(xy, 0.0) == ((min(0.0, xb), max(1.0, xb)), (0.0, yb))


def test_barrier_by_hand():
    b = three_point.barrier([0.0, 0.25, 0.5, 0.75, 1.0], [1.0, 2.0, 3.0, 1.5, 0.5])
    # the straight line 1 − α/2: 1, 0.875, 0.75, 0.625, 0.5
    assert b["barrier"] == pytest.approx(2.25) and b["alpha"] == 0.5
    assert b["above_endpoints"] == pytest.approx(2.0) and b["alpha_of_max"] == 0.5
    assert (b["start"], b["end"], b["max"]) == (1.0, 0.5, 3.0)
    convex = three_point.barrier([0.0, 0.5, 1.0], [1.0, 0.2, 0.5])
    assert convex["barrier"] == 0.0 and convex["above_endpoints"] == 0.0
    with pytest.raises(ValueError):
        three_point.barrier([0.0, 0.5], [1.0, 2.0])


def test_the_barrier_of_a_path_whose_losses_are_known_by_hand(pair):
    """θ_a: the head fitted so that every training row's logit gap is k·(±1), bias 0:
    loss softplus(−k). θ_b: pooler and head kernels negated (tanh is odd: the same logits,
    the same loss). Halfway, pooler and head are 0: logits 0, loss ln 2. So the barrier is
    ln 2 − softplus(−k) at α = 0.5."""
    run = landscape_run.load(pair[0], train_sample=16, dev_sample=4)
    names, groups = weight_names(run.model), layers.weight_groups(run.model)
    theta = run.trajectory.final()
    index = {(g, n.rsplit("/", 1)[-1]): i for i, (n, g) in enumerate(zip(names, groups))
             if g in ("head", "pooler")}
    features = run.samples["train"]
    pooled = np.asarray(run.model.backbone(
        {k: np.asarray(v) for k, v in features.inputs.items()}, training=False)
        ["pooled_output"], np.float64)
    assert np.linalg.matrix_rank(pooled) == len(features.labels)  # an exact fit exists
    w = np.linalg.lstsq(pooled, 2.0 * features.labels - 1.0, rcond=None)[0]
    k = 4.0
    theta_a = [x.copy() for x in theta]
    theta_a[index["head", "kernel"]] = (k / 2 * np.stack([-w, w], axis=1)).astype(np.float32)
    theta_a[index["head", "bias"]] = np.zeros_like(theta[index["head", "bias"]])
    theta_b = [x.copy() for x in theta_a]
    for key in (("pooler", "kernel"), ("pooler", "bias"), ("head", "kernel")):
        theta_b[index[key]] = -theta_a[index[key]]
    evaluator = surface.SurfaceEvaluator(run.model, run.task, run.samples, 5, kind=run.kind)
    path = surface.interpolate(evaluator, theta_a, theta_b, [0.0, 0.5, 1.0])
    ends = np.log1p(np.exp(-k))
    assert [r["train_loss"] for r in path] == pytest.approx([ends, np.log(2.0), ends], abs=2e-5)
    b = three_point.barrier([r["alpha"] for r in path], [r["train_loss"] for r in path])
    assert b["barrier"] == pytest.approx(np.log(2.0) - ends, abs=2e-5) and b["alpha"] == 0.5
    assert b["above_endpoints"] == pytest.approx(np.log(2.0) - ends, abs=2e-5)


def _perturbed_start(run_dir, folder, shift, moved_groups):
    """A copy of `run_dir` whose step-0 weights in `moved_groups` are moved by `shift`;
    returns the distance moved."""
    shutil.copytree(run_dir, folder)
    run = landscape_run.load(str(folder), train_sample=4, dev_sample=4)
    groups = layers.weight_groups(run.model)
    manifest = json.loads((folder / "trajectory" / "trajectory.json").read_text())
    path = folder / "trajectory" / manifest["checkpoints"][0]["file"]
    start = run.trajectory.start()
    moved = [x + np.float32(shift) if g in moved_groups else x for x, g in zip(start, groups)]
    np.savez(path, *moved)
    return float(np.sqrt(sum(x.size for x, g in zip(start, groups) if g in moved_groups))) * shift


def test_the_plane_at_the_three_points_gives_their_own_losses(pair, tmp_path):
    b_folder = tmp_path / "b"
    # another initial head, and another pooler (as from a checkpoint without one)
    head_shift = _perturbed_start(pair[1], b_folder, 0.01, ("head", "pooler"))
    config = LandscapeConfig(run_dir=pair[0], compare_run_dir=str(b_folder),
                             mode=("three_point",), grid=3, points_1d=3, train_sample=12,
                             dev_sample=6, batch_size=5, plane_margin=0.25)
    run_a = landscape_run.load(pair[0], train_sample=12, dev_sample=6)
    run_b = landscape_run.load(str(b_folder), train_sample=12, dev_sample=6)
    lines = []
    result = three_point.three_point(run_a, run_b, config, log=lines.append)
    theta = {"theta0": run_a.trajectory.start(), "theta_a": run_a.trajectory.final(),
             "theta_b": run_b.trajectory.final()}
    for name, weights in theta.items():
        assign(run_a.model, weights)
        for split in ("train", "dev"):
            loss, accuracy = _direct(run_a.model, run_a.samples[split])
            point = result["points"][name]
            for measured in (point["metrics"], point["on_plane"]):
                assert measured[f"{split}_loss"] == pytest.approx(loss, abs=1e-5), (name, split)
                assert measured[f"{split}_accuracy"] == pytest.approx(accuracy)
    points = result["points"]
    assert (points["theta0"]["alpha"], points["theta0"]["beta"]) == (0.0, 0.0)
    assert (points["theta_a"]["alpha"], points["theta_a"]["beta"]) == (1.0, 0.0)
    assert points["theta_b"]["beta"] > 0
    # the ends of the path are θ_a and θ_b
    assert result["path"][0]["train_loss"] == pytest.approx(
        points["theta_a"]["metrics"]["train_loss"], abs=1e-5)
    assert result["path"][-1]["dev_loss"] == pytest.approx(
        points["theta_b"]["metrics"]["dev_loss"], abs=1e-5)
    # a grid corner is the weights θ0 + α·d1 + β·d2 built here
    d1, d2, _ = three_point.basis(*theta.values())
    corner = directions.combine(theta["theta0"], result["alphas"][0], d1, result["betas"][0], d2)
    assign(run_a.model, corner)
    assert result["train_loss"][0, 0] == pytest.approx(
        _direct(run_a.model, run_a.samples["train"])[0], abs=1e-5)
    # the box around the points, widened by a quarter of its larger side
    xs = [p["alpha"] for p in points.values()]
    pad = 0.25 * max(np.ptp(xs), points["theta_b"]["beta"])
    assert result["alphas"][0] == pytest.approx(min(xs) - pad)
    assert result["betas"][-1] == pytest.approx(points["theta_b"]["beta"] + pad)
    # θ0 is run a's start; run b's initial head lay elsewhere, and that is reported
    assert result["initial_heads"]["distance"] == pytest.approx(head_shift, rel=1e-4)
    assert result["initial_heads"]["groups"] == ["head", "pooler"]
    assert result["samples"]["same_samples"] and result["samples"]["train"] == 12
    assert result["barriers"]["train_loss"]["barrier"] >= 0.0 and "curvature" not in result


def test_cli_writes_the_plane_path_and_curvature_at_both_minima(pair, tmp_path, capsys):
    a, b, _ = pair
    out = tmp_path / "out"
    curvature_flags = ["--train_sample=8", "--dev_sample=4", "--top_k=1", "--lanczos_steps=3",
                       "--hutchinson_probes=0", "--epsilon=0.01", "--ascent_steps=1"]
    code = cli.main(["landscape", f"--run_dir={a}", f"--compare_run_dir={b}",
                     f"--output_dir={out}", "--mode=three_point,hessian,sharpness", "--grid=3",
                     "--points_1d=3", *curvature_flags])
    assert code == 0, capsys.readouterr().err
    names = set(os.listdir(out))
    assert {"three_point.json", "three_point.md", "three_point.png", "three_point.csv",
            "three_point_path.csv", "three_point.npz", "hessian.json", "sharpness.json",
            "summary.json"} <= names
    assert (out / "three_point.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    saved = json.loads((out / "three_point.json").read_text())
    labels = ["random init (a)", "random init (b)"]
    assert [saved["points"][p]["label"] for p in ("theta_a", "theta_b")] == labels
    assert saved["initial_heads"]["distance"] == 0.0  # one seed: one initial head
    assert saved["initial_heads"]["groups"] == ["head"]
    assert saved["initial_heads"]["theta0_head"] == three_point.THETA0_HEAD
    assert len(saved["path"]) == 3 and set(saved["barriers"]) == {"train_loss", "dev_loss"}
    assert len((out / "three_point.csv").read_text().splitlines()) == 1 + 9
    grid = np.load(out / "three_point.npz")
    assert grid["train_loss"].shape == (3, 3)
    np.testing.assert_allclose(grid["points"][:2], [[0, 0], [1, 0]])
    hessians = json.loads((out / "hessian.json").read_text())
    assert list(hessians) == labels
    assert saved["curvature"][labels[1]]["lambda_max"] == hessians[labels[1]]["top_eigenvalues"][0]
    assert len(saved["curvature"][labels[0]]["sharpness"]) == 1
    table = (out / "three_point.md").read_text()
    assert "| theta_b | random init (b) |" in table and "| train_loss |" in table
    # λ_max at θ_b on run a's model is run b's own λ_max at its θ1 (same sample and seed)
    alone = tmp_path / "alone"
    assert cli.main(["landscape", f"--run_dir={b}", f"--output_dir={alone}", "--mode=hessian",
                     *curvature_flags]) == 0
    own = json.loads((alone / "hessian.json").read_text())["random init"]
    assert hessians[labels[1]]["top_eigenvalues"][0] == pytest.approx(
        own["top_eigenvalues"][0], rel=1e-4)


def test_mismatched_runs_and_bad_flags_are_refused_naming_the_flag(pair, tmp_path, capsys):
    a, b, other = pair
    cases = [
        ([f"--compare_run_dir={other}"], f"--compare_run_dir={other}: starts from other weights"),
        ([], "--mode=three_point: needs --compare_run_dir"),
        ([f"--compare_run_dir={b}", "--mode=three_point,1d"], "run 1d in a separate call"),
        ([f"--compare_run_dir={b}", "--plane_margin=-1"], "--plane_margin=-1"),
    ]
    # a start that differs in an encoder layer is another θ0
    moved = tmp_path / "moved_layer"
    _perturbed_start(b, moved, 0.01, ("layer_1",))
    cases.append(([f"--compare_run_dir={moved}"], "in layer_1 at step 0"))
    for argv, message in cases:
        argv = argv if any(x.startswith("--mode") for x in argv) else [*argv,
                                                                        "--mode=three_point"]
        assert cli.main(["landscape", f"--run_dir={a}", *argv]) == 2, argv
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1, err
    # another task, another shape: refused before any weights are read
    run = types.SimpleNamespace(run_dir="a", task=types.SimpleNamespace(name="sst2"),
                                trajectory=types.SimpleNamespace(shapes=[(3, 2)]))
    for changed, message in (({"task": types.SimpleNamespace(name="mnli")}, "a mnli run"),
                             ({"trajectory": types.SimpleNamespace(shapes=[(3, 3)])},
                              "its weights differ in number or shape")):
        with pytest.raises(InputError, match=f"--compare_run_dir=b: {message}"):
            three_point.check_pair(run, types.SimpleNamespace(**{**vars(run), "run_dir": "b",
                                                                 **changed}))
