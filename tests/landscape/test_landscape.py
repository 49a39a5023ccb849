"""Loss landscapes (Hao et al.): trajectory capture, directions, surfaces, layers, CLI —
on a tiny random model and the bundled SST-2 sample."""

import csv
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from kerasbert import run as run_lib
from kerasbert.config import RunConfig
from kerasbert.errors import InputError
from kerasbert.landscape import analyse, cli, directions, layers, plane, surface
from kerasbert.landscape import run as landscape_run
from kerasbert.landscape.config import LandscapeConfig
from kerasbert.model import encoders
from kerasbert.training.trajectory import Trajectory, assign, snapshot, weight_names

TINY = {"task": "sst2", "init_checkpoint": "random", "model_size": "2/32/2",
        "max_seq_length": 32, "train_batch_size": 8, "eval_batch_size": 16,
        "max_train_examples": 32, "max_eval_examples": 16, "learning_rate": 1e-3, "seed": 3}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A fine-tuned run (4 steps, checkpoints every 2) and a frozen-encoder run."""
    root = tmp_path_factory.mktemp("landscape")
    finetuned = str(root / "finetuned")
    run_lib.execute(RunConfig(**TINY, output_dir=finetuned, num_train_epochs=1.0,
                               save_trajectory_every=2))
    frozen = str(root / "frozen")
    run_lib.execute(RunConfig(**TINY, output_dir=frozen, num_train_epochs=0.0,
                               frozen_epochs=1.0, save_trajectory_every=3))
    return finetuned, frozen


def _backbone_count(model):
    return len(model.backbone.weights)


def test_trajectory_starts_before_the_first_step_and_ends_at_the_saved_model(runs):
    finetuned, _ = runs
    trajectory = Trajectory(finetuned)
    assert trajectory.steps == [0, 2, 4] and trajectory.final_step == 4
    run = landscape_run.load(finetuned, train_sample=0, dev_sample=0)
    # θ1 is what model.weights.h5 holds; θ0's encoder is the untrained random encoder.
    for saved, loaded in zip(trajectory.final(), snapshot(run.model), strict=True):
        np.testing.assert_array_equal(saved, loaded)
    fresh = encoders.random_encoder("2/32/2", seed=3).backbone.weights
    theta0 = trajectory.start()
    for saved, initial in zip(theta0[:_backbone_count(run.model)], fresh, strict=True):
        np.testing.assert_array_equal(saved, initial.numpy())
    assert not all(np.array_equal(a, b) for a, b in zip(theta0, trajectory.final()))


def _direct_loss_and_accuracy(model, features):
    logits = np.asarray(model({k: np.asarray(v) for k, v in features.inputs.items()},
                              training=False), np.float64)
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    labels = features.labels
    return (-log_probs[np.arange(len(labels)), labels].mean(),
            float((logits.argmax(axis=1) == labels).mean()))


def test_interpolation_endpoints_reproduce_the_losses_at_theta0_and_theta1(runs):
    finetuned, _ = runs
    run = landscape_run.load(finetuned, train_sample=24, dev_sample=0)
    theta0, theta1 = run.trajectory.start(), run.trajectory.final()
    direct = {}
    for name, weights in (("theta1", theta1), ("theta0", theta0)):
        assign(run.model, weights)
        direct[name] = {s: _direct_loss_and_accuracy(run.model, f)
                        for s, f in run.samples.items()}
    evaluator = surface.SurfaceEvaluator(run.model, run.task, run.samples, batch_size=7)
    rows = surface.interpolate(evaluator, theta0, theta1, [0.0, 0.5, 1.0])
    for row, name in ((rows[0], "theta0"), (rows[2], "theta1")):
        for split in ("train", "dev"):
            loss, accuracy = direct[name][split]
            assert row[f"{split}_loss"] == pytest.approx(loss, abs=1e-5)
            assert row[f"{split}_error"] == pytest.approx(1.0 - accuracy)
    assert rows[0]["train_loss"] != pytest.approx(rows[2]["train_loss"], abs=1e-4)
    # The 2D grid's centre is θ1 too, on the same compiled evaluator.
    zero = [np.zeros_like(w) for w in theta1]
    surfaces = surface.grid(evaluator, theta1, zero, zero, [0.0], [0.0])
    assert surfaces["train_loss"][0, 0] == pytest.approx(direct["theta1"]["train"][0], abs=1e-5)


def _toy_weights(rng):
    names = ["emb/embeddings", "layer/query/kernel", "layer/query/bias", "norm/gamma",
             "norm/beta", "head/kernel"]
    shapes = [(50, 8), (8, 2, 4), (2, 4), (8,), (8,), (8, 3)]
    return names, [rng.normal(0, s, shape).astype(np.float32)
                   for s, shape in zip((0.02, 0.5, 0.1, 1.0, 0.1, 3.0), shapes)]


@pytest.mark.parametrize("scale", ["delta", "weights"])
def test_random_direction_is_orthogonal_to_delta_and_normalised_per_matrix(scale):
    rng = np.random.default_rng(0)
    names, theta1 = _toy_weights(rng)
    delta = [rng.normal(0, 0.01, w.shape).astype(np.float32) for w in theta1]
    d = directions.random_direction(theta1, names, seed=5, orthogonal_to=delta, scale=scale)
    assert abs(directions.dot(d, delta)) < 1e-6 * directions.norm(d) * directions.norm(delta)
    ratios = []
    for name, w, block, a in zip(names, theta1, d, delta):
        if directions.is_matrix(name, w.shape):
            assert abs(np.vdot(block.astype(np.float64), a)) < 1e-5 * np.linalg.norm(block) * \
                np.linalg.norm(a)
            ratios.append(np.linalg.norm(block) / np.linalg.norm(w))
        else:  # biases (also the 2-D attention bias) and LayerNorm: not perturbed
            assert not block.any()
    # Every matrix gets the same multiple of its own norm: 1 (weights) or ‖δ1‖/‖d‖ (delta).
    np.testing.assert_allclose(ratios, ratios[0], rtol=1e-5)
    if scale == "weights":
        assert ratios[0] == pytest.approx(1.0, rel=1e-5)
    else:
        assert directions.norm(d) == pytest.approx(directions.norm(delta), rel=1e-5)
    again = directions.random_direction(theta1, names, seed=5, orthogonal_to=delta, scale=scale)
    assert all(np.array_equal(a, b) for a, b in zip(d, again))


def test_projection_recovers_a_known_trajectory_and_pca_finds_its_plane():
    rng = np.random.default_rng(1)
    shapes = [(40, 6), (6,), (6, 3)]
    origin = [rng.normal(size=s).astype(np.float32) for s in shapes]
    u = [rng.normal(size=s).astype(np.float32) for s in shapes]
    v = [rng.normal(size=s).astype(np.float32) for s in shapes]
    coordinates = np.array([[-1.0, 0.0], [-0.7, 0.4], [-0.4, 0.5], [-0.2, 0.2], [0.0, 0.0]])
    points = [directions.combine(origin, a, u, b, v) for a, b in coordinates]
    np.testing.assert_allclose(directions.project(points, origin, u, v), coordinates, atol=1e-5)
    (p1, p2), explained = directions.pca_directions(points, origin)
    assert directions.norm(p1) == pytest.approx(1.0) and directions.norm(p2) == pytest.approx(1.0)
    assert abs(directions.dot(p1, p2)) < 1e-6
    assert sum(explained) == pytest.approx(1.0, abs=1e-6)  # the trajectory is planar
    # The PCA plane holds the trajectory: projecting and re-composing gives it back.
    for point, (a, b) in zip(points, directions.project(points, origin, p1, p2)):
        rebuilt = directions.combine(origin, a, p1, b, p2)
        assert directions.norm(directions.subtract(point, rebuilt)) < 1e-4


def test_rollback_of_layer_k_changes_exactly_layer_k(runs):
    finetuned, _ = runs
    run = landscape_run.load(finetuned, train_sample=8, dev_sample=8)
    groups = layers.weight_groups(run.model)
    assert layers.group_order(groups) == ["embeddings", "layer_0", "layer_1", "pooler", "head"]
    theta0, theta1 = run.trajectory.start(), run.trajectory.final()
    evaluator = surface.SurfaceEvaluator(run.model, run.task, run.samples)
    evaluator.set_weights(layers.rolled_back(theta1, theta0, groups, ["layer_1"]))
    now = snapshot(run.model)
    for group, current, start, end in zip(groups, now, theta0, theta1):
        np.testing.assert_array_equal(current, start if group == "layer_1" else end)
    assert any(not np.array_equal(a, b) for g, a, b in zip(groups, theta0, theta1)
               if g == "layer_1")
    plan = dict(layers.rollback_plan(groups))
    assert plan["lowest_1"] == ("layer_0",) and plan["highest_1"] == ("layer_1",)
    assert plan["lowest_2"] == ("layer_0", "layer_1") and "head" not in plan
    rows = layers.rollback(evaluator, theta0, theta1, groups)
    assert [r["rollback"] for r in rows][:2] == ["none", "embeddings"]
    assert rows[0]["dev_loss"] == pytest.approx(evaluator.evaluate()["dev_loss"])  # back at θ1


def test_layer_change_is_zero_for_a_frozen_encoder_and_hand_computed_otherwise(runs):
    _, frozen = runs
    run = landscape_run.load(frozen, train_sample=8, dev_sample=8)
    groups = layers.weight_groups(run.model)
    rows = {r["group"]: r for r in layers.relative_change(
        run.trajectory.start(), run.trajectory.final(), groups)}
    for group in ("embeddings", "layer_0", "layer_1", "pooler"):
        assert rows[group]["relative_change"] == 0.0
    assert rows["head"]["relative_change"] > 0.0
    theta0 = [np.ones([2, 2], np.float32), np.ones([3], np.float32)]
    theta1 = [np.ones([2, 2], np.float32) * 1.5, np.ones([3], np.float32)]
    (row,) = layers.relative_change(theta0, theta1, ["layer_0", "layer_0"])
    assert row["relative_change"] == pytest.approx(np.sqrt(4 * 0.25) / np.sqrt(7))


def _rows(path, run):
    with open(path) as f:
        return [r for r in csv.DictReader(f) if r["run"] == run]


def test_cli_writes_pngs_and_csvs_for_two_runs(runs, tmp_path, capsys):
    finetuned, frozen = runs
    out = tmp_path / "landscape"
    code = cli.main(["landscape", f"--run_dir={finetuned}", f"--compare_run_dir={frozen}",
                     f"--output_dir={out}", "--grid=3", "--points_1d=3", "--range_1d=0,1",
                     "--train_sample=16",
                     "--dev_sample=16", "--direction=pca"])
    assert code == 0, capsys.readouterr().err
    names = set(os.listdir(out))
    for png in ("1d.png", "2d.png", "trajectory.png", "layers.png", "rollback.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert {"1d.csv", "2d.csv", "agreement.csv", "trajectory.csv", "layers.csv", "rollback.csv",
            "summary.json", "2d_random_init.npz"} <= names
    assert not [n for n in names if n.startswith(".")]
    lines = (out / "1d.csv").read_text().splitlines()
    assert len(lines) == 1 + 2 * 3 and lines[0].startswith("run,alpha,train_loss")
    assert len((out / "2d.csv").read_text().splitlines()) == 1 + 2 * 9
    steps = [line.split(",")[:2] for line in (out / "trajectory.csv").read_text().splitlines()]
    assert [s for run, s in steps[1:] if run == "random init"] == ["0", "2", "4"]
    # The same samples: the checkpoints at steps 0 and 4 are the 1D curve's α = 0 and α = 1.
    curve, path = (_rows(out / name, "random init") for name in ("1d.csv", "trajectory.csv"))
    assert [float(r["alpha"]) for r in curve] == [0.0, 0.5, 1.0]
    assert float(path[0]["train_loss"]) == pytest.approx(float(curve[0]["train_loss"]), abs=1e-5)
    assert float(path[-1]["dev_loss"]) == pytest.approx(float(curve[2]["dev_loss"]), abs=1e-5)
    saved = np.load(out / "2d_random_init.npz")
    assert saved["train_loss"].shape == (3, 3) and saved["trajectory"].shape == (3, 2)
    # θ1 is the origin of the plane: the trajectory ends at (0, 0).
    np.testing.assert_allclose(saved["trajectory"][-1], [0.0, 0.0], atol=1e-6)
    summary = json.loads((out / "summary.json").read_text())
    assert len(summary) == 2 and all("agreement" in v for v in summary.values())
    # where tools/landscape_findings.py finds each run's history and settings
    assert summary["random init"]["run_dir"] == os.path.abspath(finetuned)
    centre = summary["random init"]["flatness"]["train_loss_at_theta1"]
    assert centre == pytest.approx(float(path[-1]["train_loss"]), abs=1e-5)


def test_cli_rejects_bad_input_with_one_line(runs, tmp_path, capsys):
    finetuned, _ = runs
    no_trajectory = tmp_path / "plain"  # a finished run trained without the flag
    shutil.copytree(finetuned, no_trajectory, ignore=shutil.ignore_patterns("trajectory"))
    cases = [
        ([], "--run_dir: required"),
        ([f"--run_dir={tmp_path / 'nope'}"], "no such run folder"),
        ([f"--run_dir={no_trajectory}"], "--save_trajectory_every"),
        ([f"--run_dir={finetuned}", "--mode=1d,3d"], "--mode=1d,3d"),
        ([f"--run_dir={finetuned}", "--range_1d=1,0"], "--range_1d=1,0: low must be below"),
        ([f"--run_dir={finetuned}", "--grid=1"], "--grid=1: must be at least 2"),
        ([f"--run_dir={finetuned}", "--direction=sideways"], "--direction"),
    ]
    for argv, message in cases:
        assert cli.main(["landscape", *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1, err
    with pytest.raises(InputError, match="save_trajectory_every"):
        RunConfig(**TINY, output_dir=str(tmp_path / "x"), save_trajectory_every=-1)
    result = subprocess.run([sys.executable, "-m", "kerasbert.landscape",
                             f"--run_dir={no_trajectory}"], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("kerasbert: error: ")


def test_recorder_keeps_theta0_on_resume_and_lists_only_complete_files(tmp_path):
    import keras

    from kerasbert.training.trajectory import TrajectoryRecorder

    model = keras.Sequential([keras.Input([3]), keras.layers.Dense(2)])
    start = snapshot(model)
    recorder = TrajectoryRecorder(model, str(tmp_path), every=2)
    recorder.start()
    for step in (1, 2, 3):
        assign(model, [w + 1.0 for w in snapshot(model)])
        recorder.on_step(step)
    # A killed run: no finish(). The resumed run must keep θ0 and the step-2 checkpoint.
    recorder._wait()
    assign(model, [w + 10.0 for w in snapshot(model)])
    resumed = TrajectoryRecorder(model, str(tmp_path), every=2)
    resumed.start()
    resumed.on_step(4)
    resumed.on_step(5)
    resumed.finish()
    trajectory = Trajectory(str(tmp_path))
    assert trajectory.steps == [0, 2, 4, 5] and trajectory.final_step == 5
    for saved, initial in zip(trajectory.start(), start):
        np.testing.assert_array_equal(saved, initial)
    for saved, initial in zip(trajectory.load(2), start):
        np.testing.assert_array_equal(saved, initial + 2.0)
    for saved, now in zip(trajectory.final(), snapshot(model)):
        np.testing.assert_array_equal(saved, now)
    assert sorted(os.listdir(tmp_path / "trajectory")) == [
        "step_0000000.npz", "step_0000002.npz", "step_0000004.npz", "step_0000005.npz",
        "trajectory.json"]


# --- LandscapeConfig and the library without flags -----------------------------------------

def _config_from(argv):
    """The LandscapeConfig of `argv`, leaving cli.FLAGS at their defaults afterwards."""
    try:
        cli.FLAGS(["landscape", *argv])
        return LandscapeConfig.from_flags(cli.FLAGS)
    finally:
        cli.FLAGS.unparse_flags()


def test_landscape_config_from_flags_matches_its_defaults_and_round_trips(tmp_path):
    assert _config_from(["--run_dir=r"]) == LandscapeConfig(run_dir="r")  # same defaults
    config = _config_from(["--run_dir=r", "--compare_run_dir=c", "--mode=2d,hessian",
                           "--range_1d=0,1", "--range_beta=-2,2.5", "--epsilon=0.1,1e-3",
                           "--direction=random_pair", "--normalization=filter",
                           "--biasbn=keep", "--hessian_groups", "--top_k=2", "--seed=7"])
    assert config.mode == ("2d", "hessian") and config.range_1d == (0.0, 1.0)
    assert config.range_beta == (-2.0, 2.5) and config.epsilon == (0.1, 0.001)
    assert config.range_alpha == (-1.0, 1.0)  # random_pair's own default
    assert config.output_dir == os.path.join("r", "landscape")
    assert config.run_dirs == ["r", "c"] and config.hessian_groups and config.seed == 7
    config.save(str(tmp_path / "landscape_config.json"))
    saved = json.loads((tmp_path / "landscape_config.json").read_text())
    assert LandscapeConfig.from_dict(saved) == config
    # a --range_alpha given is kept whatever the direction; the default follows it
    assert _config_from(["--run_dir=r", "--direction=random_pair", "--range_alpha=-1.5,0.5"]
                        ).range_alpha == (-1.5, 0.5)
    assert LandscapeConfig(run_dir="r").range_alpha == (-1.5, 0.5)
    assert not cli.FLAGS.is_parsed()


@pytest.mark.parametrize("settings, message", [
    ({"run_dir": ""}, "--run_dir: required"),
    ({"mode": ("1d", "3d")}, "--mode=1d,3d: choose from"),
    ({"mode": ()}, "--mode=: choose from"),
    ({"grid": 1}, "--grid=1: must be at least 2"),
    ({"top_k": 4, "lanczos_steps": 3}, "--lanczos_steps=3: must be at least --top_k=4"),
    ({"hutchinson_probes": 1}, "--hutchinson_probes=1"),
    ({"loss_rise": 0.0}, "--loss_rise=0.0: must be positive"),
    ({"epsilon": (0.01, 0.0)}, "--epsilon=0.01,0: expected positive numbers"),
    ({"direction": "sideways"}, "--direction=sideways: must be one of random, random_pair"),
    ({"hvp": "symbolic"}, "--hvp=symbolic: must be one of double_backward"),
    ({"direction": "pca", "biasbn": "keep"}, "--biasbn=keep: applies to random directions"),
    ({"hessian_trajectory": True}, "--hessian_trajectory: needs --mode=hessian"),
    ({"range_beta": (1.0, -1.0)}, "--range_beta=1,-1: low must be below high"),
    ({"range_1d": (0.0,)}, "--range_1d=0: expected two numbers"),
])
def test_landscape_config_refuses_a_bad_value_naming_its_flag(settings, message):
    with pytest.raises(InputError, match=f"^{re.escape(message)}"):
        LandscapeConfig(**{"run_dir": "r", **settings})


@pytest.mark.parametrize("argv, message", [
    (["--range_alpha=a,b"], "--range_alpha=a,b: expected two numbers, low,high"),
    (["--range_1d=0,1,2"], "--range_1d=0,1,2: expected two numbers"),
    (["--range_1d=1.0,0"], "--range_1d=1.0,0: low must be below high"),  # as typed
    (["--epsilon=wide"], "--epsilon=wide: expected positive numbers"),
    (["--epsilon=0.0"], "--epsilon=0.0: expected positive numbers"),
])
def test_landscape_config_from_flags_refuses_list_text_as_typed(argv, message):
    with pytest.raises(InputError, match=f"^{re.escape(message)}"):
        _config_from(["--run_dir=r", *argv])


def test_the_library_runs_from_a_config_without_flags(runs, tmp_path):
    finetuned, _ = runs
    config = LandscapeConfig(run_dir=finetuned, output_dir=str(tmp_path / "out"),
                             mode=("1d", "2d", "layers"), train_sample=8, dev_sample=8,
                             points_1d=3, range_1d=(0.0, 1.0), grid=3, seed=5)
    lines = []
    written = analyse.analyse_runs(config, log=lines.append)
    assert not cli.FLAGS.is_parsed()
    assert {os.path.basename(p) for p in written} == {
        "1d.csv", "1d.png", "2d_random_init.npz", "2d.csv", "agreement.csv",
        "2d_trajectory.csv", "2d.png", "2d_surface.png", "layers.csv", "layers.png",
        "summary.json"}
    assert lines[-1].startswith(f"kerasbert: landscape files in {config.output_dir}: 1d.csv")
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())["random init"]
    assert summary["direction"] == "random" and summary["steps"] == [0, 2, 4]
    # The plane on its own: δ1 and a random direction ⟂ δ1 of the same length (delta scale).
    run = landscape_run.load(finetuned, train_sample=8, dev_sample=8)
    theta0, theta1 = run.trajectory.start(), run.trajectory.final()
    d1, d2, labels, explained = plane.plane(run, theta0, theta1, weight_names(run.model),
                                            config)
    delta = directions.subtract(theta1, theta0)
    assert all(np.array_equal(a, b) for a, b in zip(d1, delta)) and explained is None
    assert abs(directions.dot(d1, d2)) < 1e-4 * directions.norm(d1) * directions.norm(d2)
    assert directions.norm(d2) == pytest.approx(directions.norm(delta), rel=1e-4)
    assert labels[0] == "α (δ1 = θ1 − θ0)" and "matrix-normalised" in labels[1]
    # the same config, the same plane: analyse_runs projected the trajectory on this one
    points = [run.trajectory.load(s) for s in run.trajectory.steps]
    saved = np.load(tmp_path / "out" / "2d_random_init.npz")
    np.testing.assert_allclose(saved["trajectory"],
                               directions.project(points, theta1, d1, d2), atol=1e-5)


def test_a_second_cli_call_starts_from_the_default_flags_even_after_a_flag_error(
        tmp_path, capsys):
    # --mode=hessian was parsed before --grid=x failed; it must not reach the next call.
    assert cli.main(["landscape", f"--run_dir={tmp_path}", "--mode=hessian", "--grid=x"]) == 2
    assert capsys.readouterr().err.strip() == (
        "kerasbert: error: flag --grid=x: invalid literal for int() with base 10: 'x'")
    assert cli.main(["landscape", f"--run_dir={tmp_path}", "--hessian_groups"]) == 2
    assert capsys.readouterr().err.strip() == (
        "kerasbert: error: --hessian_groups: needs --mode=hessian")
    assert not cli.FLAGS.is_parsed()
