"""`python -m kerasbert.landscape --run_dir=<run> [--compare_run_dir=<run>]`: the loss
landscape, trajectory and layer analysis of finished runs, as PNGs with CSV/NPZ beside.

    --mode=1d,2d,trajectory,layers,rollback (the default), hessian, sharpness
    1d        θ(α) = θ0 + α(θ1 − θ0): 1d.csv, 1d.png
    2d        θ1 + α·d1 + β·d2 on a grid × grid lattice, trajectory projected, and how far
              off the plane each checkpoint lies: 2d_<run>.npz, 2d.csv, 2d.png (contours),
              2d_surface.png (3D), 2d_trajectory.csv, agreement.csv
              --direction=random: d1 = δ1 = θ1 − θ0, d2 random ⟂ δ1 (see directions.py)
              --direction=random_pair: d1, d2 both random (Li et al.'s plots), d2 ⟂ d1
              --direction=pca: the trajectory's top two principal directions, ‖d‖ = ‖δ1‖
              --normalization=matrix|filter, --biasbn=ignore|keep: how random
              directions are normalised; --direction_scale=delta|weights|loss_rise
    trajectory  loss and error at every saved checkpoint (convergence by step):
              trajectory.csv, trajectory.png
    layers    ‖θ1ˡ − θ0ˡ‖ / ‖θ0ˡ‖ per layer: layers.csv, layers.png
    rollback  dev metrics with layers reset to θ0: rollback.csv, rollback.png
    hessian   the training loss's Hessian at θ1: top-k eigenvalues (Lanczos), trace
              (Hutchinson), per layer group, λ_max at every checkpoint (see hessian.py):
              hessian.json, hessian.md, hessian.png
    sharpness ε-sharpness at θ1 (largest loss rise in a filter-normalised ball):
              sharpness.json, sharpness.md, sharpness.png

The runs must have been trained with --save_trajectory_every=N. A compared run (e.g. the
same task from --init_checkpoint=random) is drawn beside the first on the same scales.
"""

import contextlib
import os
import sys
import time

import numpy as np
from absl import flags
from scipy import stats

from kerasbert import run_folder
from kerasbert.errors import InputError, at
from kerasbert.io_utils import (
    atomic_write_csv,
    atomic_write_json,
    atomic_write_text,
    read_json_object,
    replaced_whole,
)
from kerasbert.landscape import directions, hessian, layers, plots, surface
from kerasbert.landscape import run as run_lib
from kerasbert.training.trajectory import model_weights, snapshot, weight_names

DEFAULT_MODES = ("1d", "2d", "trajectory", "layers", "rollback")
MODES = DEFAULT_MODES + ("hessian", "sharpness")  # the curvature modes cost HVPs: opt in
FLAGS = flags.FlagValues()  # its own: the training flags (--data_dir, --seed …) stay apart

flags.DEFINE_string("run_dir", None, "The finished run to analyse (trained with "
                    "--save_trajectory_every).", flag_values=FLAGS)
flags.DEFINE_string("compare_run_dir", None, "A second run of the same task (e.g. from "
                    "--init_checkpoint=random) drawn beside the first on the same scales.",
                    flag_values=FLAGS)
flags.DEFINE_string("output_dir", None, "Where the PNG/CSV/NPZ files go. Default: "
                    "<run_dir>/landscape.", flag_values=FLAGS)
flags.DEFINE_string("data_dir", None, "The task's data folder. Default: the run's own "
                    "--data_dir (else the bundled sample).", flag_values=FLAGS)
flags.DEFINE_list("mode", list(DEFAULT_MODES), "What to compute: any of 1d, 2d, trajectory, "
                  "layers, rollback, hessian, sharpness (default: all but the last two).",
                  flag_values=FLAGS)
flags.DEFINE_integer("train_sample", 256, "Training examples the losses are measured on "
                     "(a fixed random subset of the run's training data; 0 = all).",
                     flag_values=FLAGS)
flags.DEFINE_integer("dev_sample", 256, "Dev examples the errors are measured on (0 = all).",
                     flag_values=FLAGS)
flags.DEFINE_integer("batch_size", 128, "Evaluation batch size.", flag_values=FLAGS)
flags.DEFINE_integer("points_1d", 21, "Points along α in 1D.", flag_values=FLAGS)
flags.DEFINE_list("range_1d", ["-0.5", "1.5"], "α range of the 1D interpolation (θ0 at 0, "
                  "θ1 at 1).", flag_values=FLAGS)
flags.DEFINE_integer("grid", 11, "Points per axis of the 2D grid (grid² evaluations).",
                     flag_values=FLAGS)
flags.DEFINE_list("range_alpha", ["-1.5", "0.5"], "α range of the 2D grid around θ1, in "
                  "units of δ1 (θ0 lies at α = -1 with --direction=random); with "
                  "--direction=random_pair the default is -1,1.", flag_values=FLAGS)
flags.DEFINE_list("range_beta", ["-1", "1"], "β range of the 2D grid.", flag_values=FLAGS)
flags.DEFINE_enum("direction", "random", ["random", "random_pair", "pca"], "The 2D plane: "
                  "δ1 and a random direction (random), two random directions (random_pair, "
                  "Li et al.'s), or the trajectory's top two principal directions (pca).",
                  flag_values=FLAGS)
flags.DEFINE_enum("normalization", "matrix", ["matrix", "filter"], "How a random direction "
                  "is normalised: each weight matrix to the norm of the same matrix of θ1 "
                  "(matrix), or each filter (one output unit's weights, one embedding row) to "
                  "the norm of the same filter (filter, Li et al.'s).", flag_values=FLAGS)
flags.DEFINE_enum("biasbn", "ignore", ["ignore", "keep"], "Biases and LayerNorm parameters in "
                  "random directions: zero (ignore, loss-landscape's --xignore biasbn) or "
                  "perturbed, each vector normalised to its own norm (keep).",
                  flag_values=FLAGS)
flags.DEFINE_enum("direction_scale", "delta", ["delta", "weights", "loss_rise"], "Length of "
                  "the random directions: ‖δ1‖ (delta), the weights' own norm per matrix or "
                  "filter (weights, loss-landscape's), or so long that the training loss "
                  "rises by --loss_rise at the far edge of the axis' range (loss_rise).",
                  flag_values=FLAGS)
flags.DEFINE_float("loss_rise", 1.0, "With --direction_scale=loss_rise: the training-loss "
                   "rise above θ1 at the edge of each random axis.", flag_values=FLAGS)
flags.DEFINE_integer("top_k", 3, "--mode=hessian: how many of the largest Hessian "
                     "eigenvalues to estimate.", flag_values=FLAGS)
flags.DEFINE_integer("lanczos_steps", 20, "--mode=hessian: Lanczos steps (one Hessian-vector "
                     "product each) per spectrum; at least --top_k.", flag_values=FLAGS)
flags.DEFINE_integer("hutchinson_probes", 20, "--mode=hessian: Rademacher probes of the "
                     "trace estimate (one Hessian-vector product each; 0 = no trace).",
                     flag_values=FLAGS)
flags.DEFINE_boolean("hessian_groups", False, "--mode=hessian: also the top eigenvalues of "
                     "each layer group's own Hessian block (embeddings, each transformer "
                     "layer, pooler, head): --lanczos_steps products per group.",
                     flag_values=FLAGS)
flags.DEFINE_boolean("hessian_trajectory", False, "--mode=hessian: also λ_max at every saved "
                     "checkpoint: --lanczos_steps products per checkpoint.", flag_values=FLAGS)
flags.DEFINE_enum("hvp", "double_backward", list(hessian.HVP_METHODS), "--mode=hessian: "
                  "how Hessian-vector products are taken (both exact; see hessian.py).",
                  flag_values=FLAGS)
flags.DEFINE_integer("hessian_batch_size", 32, "Batch size of Hessian-vector products and "
                     "gradients (--mode=hessian, sharpness): their memory grows with it.",
                     flag_values=FLAGS)
flags.DEFINE_list("epsilon", ["0.001", "0.01"], "--mode=sharpness: ball radii ε, each filter "
                  "may move by ε times its own norm.", flag_values=FLAGS)
flags.DEFINE_integer("ascent_steps", 10, "--mode=sharpness: projected gradient-ascent steps "
                     "(one gradient each) per ε.", flag_values=FLAGS)
flags.DEFINE_integer("seed", 0, "Seed of the random direction and the samples.",
                     flag_values=FLAGS)


def _log(message):
    print(message, flush=True)


def _range(name):
    values = FLAGS[name].value
    try:
        low, high = (float(v) for v in values)
    except ValueError:
        raise InputError(f"--{name}={','.join(values)}: expected two numbers, low,high") from None
    if not low < high:
        raise InputError(f"--{name}={','.join(values)}: low must be below high")
    return low, high


def _check_flags():
    if not FLAGS.run_dir:
        raise InputError("--run_dir: required (a run trained with --save_trajectory_every)")
    unknown = [m for m in FLAGS.mode if m not in MODES]
    if unknown or not FLAGS.mode:
        raise InputError(f"--mode={','.join(FLAGS.mode)}: choose from {', '.join(MODES)}")
    for name, minimum in (("points_1d", 2), ("grid", 2), ("batch_size", 1),
                          ("train_sample", 0), ("dev_sample", 0), ("top_k", 1),
                          ("lanczos_steps", 1), ("hutchinson_probes", 0),
                          ("hessian_batch_size", 1), ("ascent_steps", 1)):
        if FLAGS[name].value < minimum:
            raise InputError(f"--{name}={FLAGS[name].value}: must be at least {minimum}")
    if FLAGS.lanczos_steps < FLAGS.top_k:
        raise InputError(f"--lanczos_steps={FLAGS.lanczos_steps}: must be at least --top_k="
                         f"{FLAGS.top_k} (each step gives one Ritz value)")
    if FLAGS.hutchinson_probes == 1:
        raise InputError("--hutchinson_probes=1: use 0 (no trace) or at least 2 (one probe "
                         "has no standard error)")
    if not FLAGS.loss_rise > 0:
        raise InputError(f"--loss_rise={FLAGS.loss_rise}: must be positive")
    try:
        epsilons = [float(e) for e in FLAGS.epsilon]
    except ValueError:
        epsilons = []
    if not epsilons or not all(0 < e < np.inf for e in epsilons):
        raise InputError(f"--epsilon={','.join(FLAGS.epsilon)}: expected positive numbers")
    if FLAGS.direction == "pca":
        for name, default in (("normalization", "matrix"), ("biasbn", "ignore"),
                              ("direction_scale", "delta")):
            if FLAGS[name].value != default:
                raise InputError(f"--{name}={FLAGS[name].value}: applies to random directions, "
                                 "not --direction=pca")
    for name, mode in (("hessian_groups", "hessian"), ("hessian_trajectory", "hessian")):
        if FLAGS[name].value and mode not in FLAGS.mode:
            raise InputError(f"--{name}: needs --mode={mode}")
    if FLAGS.direction == "random_pair" and not FLAGS["range_alpha"].present:
        FLAGS.range_alpha = ["-1", "1"]  # two random axes: centred on θ1
    return {name: _range(name) for name in ("range_1d", "range_alpha", "range_beta")}


# --- Writing results ----------------------------------------------------------------------

def _slug(label):
    return "".join(c if c.isalnum() else "_" for c in label.lower()).strip("_")


def write_npz(path, **arrays):
    with replaced_whole(path, suffix=".npz") as tmp:
        np.savez(tmp, **arrays)


# --- One run ------------------------------------------------------------------------------

def analyse(run, modes, ranges, log=_log):
    """Everything `modes` asks for about one LandscapeRun; returns a dict of results."""
    names = weight_names(run.model)
    theta1 = run.trajectory.final()
    loaded = snapshot(run.model)
    gap = max(float(np.max(np.abs(a - b))) for a, b in zip(theta1, loaded))
    if gap > 1e-6:
        raise InputError(f"{at(run.trajectory.directory)}the final checkpoint differs from "
                         f"model.weights.h5 (max |Δ| = {gap:.3g}): not the same run")
    theta0 = run.trajectory.start()
    evaluator = surface.SurfaceEvaluator(run.model, run.task, run.samples, FLAGS.batch_size,
                                         kind=run.kind)
    result = {"label": run.label, "steps": run.trajectory.steps, "run_dir": run.run_dir}
    log(f"kerasbert: {run.label}: {run.run_dir}, {len(run.trajectory.steps)} checkpoints, "
        f"train sample {len(run.samples['train'].labels)}, dev sample "
        f"{len(run.samples['dev'].labels)}")
    if "1d" in modes:
        alphas = np.linspace(*ranges["range_1d"], FLAGS.points_1d)
        result["1d"] = surface.interpolate(evaluator, theta0, theta1, alphas)
        log(f"kerasbert: {run.label}: 1D done ({len(alphas)} points)")
    if "2d" in modes:
        d1, d2, axis_labels, explained = _plane(run, theta0, theta1, names, ranges)
        alphas = np.linspace(*ranges["range_alpha"], FLAGS.grid)
        betas = np.linspace(*ranges["range_beta"], FLAGS.grid)
        start = time.perf_counter()
        surfaces = surface.grid(evaluator, theta1, d1, d2, alphas, betas)
        seconds = time.perf_counter() - start
        points = [run.trajectory.load(s) for s in run.trajectory.steps]
        path_xy = directions.project(points, theta1, d1, d2)
        off_plane, from_theta1 = directions.off_plane(points, theta1, d1, d2, path_xy)
        del points
        agreement = {}
        for a, b in (("train_loss", "dev_error"), ("train_loss", "dev_loss")):
            if a in surfaces and b in surfaces:
                x, y = surfaces[a].ravel(), surfaces[b].ravel()
                constant = np.ptp(x) == 0 or np.ptp(y) == 0  # no correlation is defined
                agreement[f"pearson_{a}_vs_{b}"] = (
                    np.nan if constant else float(stats.pearsonr(x, y)[0]))
                agreement[f"spearman_{a}_vs_{b}"] = (
                    np.nan if constant else float(stats.spearmanr(x, y)[0]))
        # Flatness: how much the training loss rises over the grid above its value at θ1.
        centre = evaluator.at(0.0, 0.0)["train_loss"]
        rise = surfaces["train_loss"] - centre
        moved = from_theta1 > 0
        flatness = {"train_loss_at_theta1": centre, "mean_train_loss_rise": float(rise.mean()),
                    "max_train_loss_rise": float(rise.max()),
                    # how far the drawn path is from the checkpoints it stands for
                    "trajectory_max_relative_distance_from_plane": float(
                        np.max(off_plane[moved] / from_theta1[moved])) if moved.any() else 0.0}
        result["2d"] = {"alphas": alphas, "betas": betas, **surfaces, "trajectory": path_xy,
                        "trajectory_distance_from_plane": off_plane,
                        "trajectory_distance_from_theta1": from_theta1,
                        "axis_labels": axis_labels, "explained_variance": explained,
                        "agreement": agreement, "flatness": flatness, "seconds": seconds,
                        "points_per_second": alphas.size * betas.size / seconds}
        log(f"kerasbert: {run.label}: 2D {FLAGS.grid}×{FLAGS.grid} done in {seconds:.0f} s "
            f"({alphas.size * betas.size / seconds:.2f} points/s)")
    if "trajectory" in modes:
        result["trajectory"] = []
        for step in run.trajectory.steps:
            evaluator.set_weights(run.trajectory.load(step))
            result["trajectory"].append({"step": step, **evaluator.evaluate()})
        evaluator.set_weights(theta1)
        log(f"kerasbert: {run.label}: trajectory done ({len(run.trajectory.steps)} checkpoints)")
    if "layers" in modes or "rollback" in modes:
        groups = layers.weight_groups(run.model)
        if "layers" in modes:
            result["layers"] = layers.relative_change(theta0, theta1, groups)
        if "rollback" in modes:
            result["rollback"] = layers.rollback(evaluator, theta0, theta1, groups)
            log(f"kerasbert: {run.label}: rollback done ({len(result['rollback'])} variants)")
    if "hessian" in modes or "sharpness" in modes:
        evaluator.set_weights(theta1)  # the grids leave the model where they ended
        batches = hessian.sample_batches(run.samples["train"], FLAGS.hessian_batch_size,
                                         run.kind)
        if "hessian" in modes:
            result["hessian"] = _hessian(run, batches, log)
        if "sharpness" in modes:
            result["sharpness"] = _sharpness(run, batches, theta1, log)
        evaluator.set_weights(theta1)
    return result


# --- The 2D plane ----------------------------------------------------------------------------

def _random(run, theta1, names, seed, orthogonal_to=None):
    """A random direction at the weights' own scale, as --normalization/--biasbn say."""
    filters = layers.filter_axes(run.model) if FLAGS.normalization == "filter" else None
    return directions.random_direction(theta1, names, seed, orthogonal_to=orthogonal_to,
                                       scale="weights", filters=filters,
                                       keep_biasbn=FLAGS.biasbn == "keep")


def _scaled(run, theta1, d, value_range, length):
    """`d` rescaled as --direction_scale says, and its axis-label suffix."""
    if FLAGS.direction_scale == "weights":
        unit = "‖θ‖ per filter" if FLAGS.normalization == "filter" else "‖θ‖ per matrix"
        return d, f"× {unit}"
    if FLAGS.direction_scale == "delta":
        factor = length / max(directions.norm(d), 1e-30)
        return [x * np.float32(factor) for x in d], "length ‖δ1‖"
    # loss_rise: the training loss rises by --loss_rise at the far edge of the range.
    edge = max(abs(v) for v in value_range)
    evaluator = surface.SurfaceEvaluator(run.model, run.task, {"train": run.samples["train"]},
                                         FLAGS.batch_size, kind=run.kind)
    evaluator.set_plane(theta1, [x * np.float32(edge) for x in d])
    base = evaluator.at(0.0)["train_loss"]

    def rise(c):
        return max(evaluator.at(c)["train_loss"], evaluator.at(-c)["train_loss"]) - base

    factor = surface.scale_to_rise(rise, FLAGS.loss_rise)
    if factor is None:
        raise InputError(f"--direction_scale=loss_rise: the training loss of {run.label} does "
                         f"not rise by --loss_rise={FLAGS.loss_rise} along a random direction "
                         "up to 2^20 × the weights' norm; choose a smaller --loss_rise")
    return [x * np.float32(factor) for x in d], f"× {factor:.3g} ‖θ‖ (rise {FLAGS.loss_rise:g})"


def _plane(run, theta0, theta1, names, ranges):
    """(d1, d2, axis labels, explained variance or None) of the --direction plane."""
    delta = directions.subtract(theta1, theta0)
    length = directions.norm(delta)
    kind = f"{FLAGS.normalization}-normalised"
    if FLAGS.direction == "random":
        d2 = _random(run, theta1, names, FLAGS.seed, orthogonal_to=delta)
        d2, suffix = _scaled(run, theta1, d2, ranges["range_beta"], length)
        return delta, d2, ("α (δ1 = θ1 − θ0)", f"β (random ⊥ δ1, {kind}, {suffix})"), None
    if FLAGS.direction == "random_pair":
        d1 = _random(run, theta1, names, FLAGS.seed)
        d2 = _random(run, theta1, names, FLAGS.seed + 1, orthogonal_to=d1)
        d1, s1 = _scaled(run, theta1, d1, ranges["range_alpha"], length)
        d2, s2 = _scaled(run, theta1, d2, ranges["range_beta"], length)
        return d1, d2, (f"α (random, {kind}, {s1})", f"β (random ⊥ d1, {kind}, {s2})"), None
    points = [run.trajectory.load(s) for s in run.trajectory.steps]
    if len(points) < 3:
        raise InputError(f"{at(run.trajectory.directory)}--direction=pca needs at "
                         f"least 3 checkpoints, the run saved {len(points)}")
    (d1, d2), explained = directions.pca_directions(points, theta1)
    scale = np.float32(length)  # axes in units of ‖δ1‖
    d1, d2 = [x * scale for x in d1], [x * scale for x in d2]
    return d1, d2, (f"PC1 ({explained[0]:.0%}) × ‖δ1‖", f"PC2 ({explained[1]:.0%}) × ‖δ1‖"), \
        explained


# --- Curvature -------------------------------------------------------------------------------

def _spectrum(loss, k, seed):
    ritz, bounds = hessian.lanczos(loss.hvp, loss.size, FLAGS.lanczos_steps, seed)
    return {"top_eigenvalues": [float(v) for v in ritz[:k]],
            "residual_bounds": [float(b) for b in bounds[:k]],
            "lambda_min": float(ritz[-1]), "lambda_min_residual_bound": float(bounds[-1]),
            "lanczos_steps": int(len(ritz))}


def _hessian(run, batches, log):
    """Top-k eigenvalues and trace of the training-loss Hessian at θ1 (optionally per layer
    group and λ_max at every checkpoint); the model is left at θ1."""
    start = time.perf_counter()
    loss = hessian.TrainingLoss(run.model, run.kind, batches, hvp=FLAGS.hvp)
    out = {"sample": loss.count, "parameters": loss.size, "hvp": FLAGS.hvp,
           **_spectrum(loss, FLAGS.top_k, FLAGS.seed)}
    log(f"kerasbert: {run.label}: Hessian top-{FLAGS.top_k} "
        f"{', '.join(f'{v:.4g}' for v in out['top_eigenvalues'])} "
        f"({FLAGS.lanczos_steps} Lanczos steps, {loss.hvp_seconds / max(loss.hvps, 1):.1f} s "
        "per Hessian-vector product)")
    groups = layers.weight_groups(run.model)
    order = layers.group_order(groups)
    weights = model_weights(run.model)
    rows = {g: {"group": g, "parameters": int(sum(np.prod(w.shape) for w, h in
                                                  zip(weights, groups) if h == g))}
            for g in order}
    if FLAGS.hutchinson_probes:
        trace, error, _, per_block = hessian.hutchinson(
            loss.hvp, loss.size, FLAGS.hutchinson_probes, FLAGS.seed, loss.offsets)
        out.update(trace=float(trace), trace_standard_error=float(error),
                   probes=FLAGS.hutchinson_probes)
        for g in order:  # a block's trace: the same probes, summed over the block only
            columns = [i for i, h in enumerate(groups) if h == g]
            mean, err = hessian.mean_and_standard_error(per_block[:, columns].sum(axis=1))
            rows[g].update(trace=float(mean), trace_standard_error=float(err))
        log(f"kerasbert: {run.label}: Hessian trace {trace:.4g} ± {error:.2g} "
            f"({FLAGS.hutchinson_probes} probes)")
    if FLAGS.hessian_groups:
        for g in order:
            block = hessian.TrainingLoss(run.model, run.kind, batches,
                                         [w for w, h in zip(weights, groups) if h == g],
                                         hvp=FLAGS.hvp)
            spectrum = _spectrum(block, FLAGS.top_k, FLAGS.seed)
            rows[g].update({k: spectrum[k] for k in ("top_eigenvalues", "residual_bounds")})
            loss.hvps, loss.hvp_seconds = (loss.hvps + block.hvps,
                                           loss.hvp_seconds + block.hvp_seconds)
        log(f"kerasbert: {run.label}: Hessian blocks of {len(order)} groups done")
    out["groups"] = list(rows.values())
    if FLAGS.hessian_trajectory:
        out["trajectory"] = []
        for step in run.trajectory.steps:
            loss.set_weights(run.trajectory.load(step))
            spectrum = _spectrum(loss, 1, FLAGS.seed)
            out["trajectory"].append({"step": step, "lambda_max": spectrum["top_eigenvalues"][0],
                                      "residual_bound": spectrum["residual_bounds"][0],
                                      "lambda_min": spectrum["lambda_min"]})
        loss.set_weights(run.trajectory.final())
        log(f"kerasbert: {run.label}: λ_max at {len(run.trajectory.steps)} checkpoints done")
    out.update(hvps=loss.hvps, seconds=time.perf_counter() - start,
               hvps_per_second=loss.hvps / max(loss.hvp_seconds, 1e-9))
    return out


def _sharpness(run, batches, theta1, log):
    """ε-sharpness at θ1 for every --epsilon; the model is left at θ1."""
    loss = hessian.TrainingLoss(run.model, run.kind, batches)
    axes = layers.filter_axes(run.model)
    if FLAGS.biasbn == "keep":  # each bias / LayerNorm vector: one filter
        axes = [tuple(range(w.ndim)) if a is None else a for a, w in zip(axes, theta1)]

    def value_and_gradient(point):
        loss.set_weights(point)
        value, gradient = loss.value_and_gradient()
        return value, loss.blocks(gradient, np.float64)

    rows = []
    for epsilon in (float(e) for e in FLAGS.epsilon):
        start = time.perf_counter()
        row = hessian.epsilon_sharpness(value_and_gradient, theta1, axes, epsilon,
                                        FLAGS.ascent_steps, FLAGS.seed)
        rows.append({**row, "biasbn": FLAGS.biasbn, "sample": loss.count,
                     "seconds": time.perf_counter() - start})
        log(f"kerasbert: {run.label}: ε-sharpness at ε = {epsilon:g}: loss rise "
            f"{row['rise']:.4g} ({row['keskar']:.3g} %)")
    loss.set_weights(theta1)
    return rows


def _number(value, error=None):
    if value is None or not np.isfinite(value):
        return "—"
    return f"{value:.4g}" if error is None else f"{value:.4g} ± {error:.2g}"


def hessian_markdown(hessians):
    """hessian.md: the numbers of hessian.json as tables."""
    first = next(iter(hessians.values()))
    k = len(first["top_eigenvalues"])
    lines = ["# Hessian of the training loss at θ1", "",
             f"Mean training loss over {first['sample']} training rows, inference mode (no "
             f"dropout); {first['lanczos_steps']} Lanczos steps, Hessian-vector products by "
             f"{first['hvp']}. ± after an eigenvalue: its Lanczos residual bound ‖Hy − λy‖; "
             "after the trace: the standard error over the Rademacher probes.", "",
             "| run | " + " | ".join(f"λ{i + 1}" for i in range(k))
             + " | λ_min | trace (probes) | HVPs/s |",
             "|---|" + "---|" * (k + 3)]
    for label, h in hessians.items():
        eigen = [_number(v, b) for v, b in zip(h["top_eigenvalues"], h["residual_bounds"])]
        trace = (f"{_number(h['trace'], h['trace_standard_error'])} ({h['probes']})"
                 if "trace" in h else "—")
        lines.append(f"| {label} | " + " | ".join(eigen)
                     + f" | {_number(h['lambda_min'], h['lambda_min_residual_bound'])} | "
                     f"{trace} | {h['hvps_per_second']:.3g} |")
    lines += ["", "## Per layer group", "",
              "Block Hessians H_gg (the other weights fixed): trace from the same probes, "
              "λ1 from its own Lanczos run (--hessian_groups).", "",
              "| run | group | parameters | trace | λ1 of the block |", "|---|---|---|---|---|"]
    for label, h in hessians.items():
        for g in h["groups"]:
            top = g.get("top_eigenvalues")
            lines.append(f"| {label} | {g['group']} | {g['parameters']} | "
                         f"{_number(g.get('trace'), g.get('trace_standard_error'))} | "
                         f"{_number(top[0], g['residual_bounds'][0]) if top else '—'} |")
    if all("trajectory" in h for h in hessians.values()):
        lines += ["", "## λ_max along the trajectory", "", "| run | step | λ_max | λ_min |",
                  "|---|---|---|---|"]
        for label, h in hessians.items():
            lines += [f"| {label} | {row['step']} | "
                      f"{_number(row['lambda_max'], row['residual_bound'])} | "
                      f"{_number(row['lambda_min'])} |" for row in h["trajectory"]]
    return "\n".join(lines) + "\n"


def sharpness_markdown(tables):
    """sharpness.md: ε-sharpness per run and ε."""
    lines = ["# ε-sharpness at θ1", "",
             "The largest rise of the mean training loss found by projected gradient ascent "
             "within the filter-normalised ball ‖y_f‖ ≤ ε‖θ1_f‖ (every filter moves by at most "
             "ε times its own norm); a lower bound of the true maximum. Keskar = "
             "100 · rise / (1 + L(θ1)).", "",
             "| run | ε | biases/LayerNorm | sample | L(θ1) | max rise | Keskar (%) | ascent steps |",
             "|---|---|---|---|---|---|---|---|"]
    for label, rows in tables.items():
        lines += [f"| {label} | {r['epsilon']:g} | {r['biasbn']} | {r['sample']} | "
                  f"{r['loss']:.4g} | {r['rise']:.4g} | {r['keskar']:.4g} | {r['steps']} |"
                  for r in rows]
    return "\n".join(lines) + "\n"


def write_results(results, output_dir):
    """The CSV/NPZ/PNG files of one or two analysed runs; returns the files written."""
    os.makedirs(output_dir, exist_ok=True)
    written = []

    def out(name):
        written.append(os.path.join(output_dir, name))
        return written[-1]

    if all("1d" in r for r in results):
        atomic_write_csv(out("1d.csv"), [{"run": r["label"], **row} for r in results for row in r["1d"]])
        plots.plot_1d({r["label"]: r["1d"] for r in results}, out("1d.png"))
    if all("2d" in r for r in results):
        rows, agreement = [], []
        for r in results:
            s = r["2d"]
            arrays = {k: np.asarray(v) for k, v in s.items()
                      if isinstance(v, np.ndarray)}
            write_npz(out(f"2d_{_slug(r['label'])}.npz"), steps=np.asarray(r["steps"]), **arrays)
            metric_keys = [k for k, v in arrays.items()
                           if v.ndim == 2 and k != "trajectory"]
            for j, b in enumerate(s["betas"]):
                for i, a in enumerate(s["alphas"]):
                    rows.append({"run": r["label"], "alpha": float(a), "beta": float(b),
                                 **{k: float(arrays[k][j, i]) for k in metric_keys}})
            agreement.append({"run": r["label"], **s["agreement"], **s["flatness"],
                              "points_per_second": round(s["points_per_second"], 4)})
        atomic_write_csv(out("2d.csv"), rows)
        atomic_write_csv(out("agreement.csv"), agreement)
        atomic_write_csv(out("2d_trajectory.csv"), [
            {"run": r["label"], "step": step, "alpha": float(a), "beta": float(b),
             "distance_from_theta1": float(length), "distance_from_plane": float(distance),
             "relative_distance_from_plane": float(distance / length) if length > 0 else 0.0}
            for r in results for step, (a, b), distance, length in zip(
                r["steps"], r["2d"]["trajectory"], r["2d"]["trajectory_distance_from_plane"],
                r["2d"]["trajectory_distance_from_theta1"])])
        plots.plot_2d({r["label"]: r["2d"] for r in results}, out("2d.png"))
        plots.plot_surface_3d({r["label"]: r["2d"] for r in results}, out("2d_surface.png"))
    if all("trajectory" in r for r in results):
        atomic_write_csv(out("trajectory.csv"), [{"run": r["label"], **row} for r in results
                                          for row in r["trajectory"]])
        plots.plot_trajectory({r["label"]: r["trajectory"] for r in results},
                              out("trajectory.png"))
    if all("layers" in r for r in results):
        atomic_write_csv(out("layers.csv"), [{"run": r["label"], **row} for r in results
                                      for row in r["layers"]])
        plots.plot_layers({r["label"]: r["layers"] for r in results}, out("layers.png"))
    if all("rollback" in r for r in results):
        atomic_write_csv(out("rollback.csv"), [{"run": r["label"], **row} for r in results
                                        for row in r["rollback"]])
        first = results[0]["rollback"][0]
        metric = "dev_accuracy" if "dev_accuracy" in first else next(
            k for k in first if k.startswith("dev_") and k != "dev_loss")
        plots.plot_rollback({r["label"]: r["rollback"] for r in results}, out("rollback.png"),
                            metric)
    if all("hessian" in r for r in results):
        hessians = {r["label"]: r["hessian"] for r in results}
        atomic_write_json(out("hessian.json"), hessians)
        atomic_write_text(out("hessian.md"), hessian_markdown(hessians))
        plots.plot_hessian(hessians, out("hessian.png"))
    if all("sharpness" in r for r in results):
        tables = {r["label"]: r["sharpness"] for r in results}
        atomic_write_json(out("sharpness.json"), tables)
        atomic_write_text(out("sharpness.md"), sharpness_markdown(tables))
        plots.plot_sharpness(tables, out("sharpness.png"))
    # summary.json accumulates over invocations (e.g. 1D on a large sample, 2D on a small one)
    path = out("summary.json")
    summary = read_json_object(path) if os.path.exists(path) else {}
    for r in results:
        entry = summary.setdefault(r["label"], {})
        entry["steps"] = r["steps"]
        entry["run_dir"] = os.path.abspath(r["run_dir"])  # where tools/landscape_findings.py
        # finds the run's history and settings
        if "2d" in r:
            entry.update(agreement=r["2d"]["agreement"], flatness=r["2d"]["flatness"],
                         direction=FLAGS.direction,
                         points_per_second=r["2d"]["points_per_second"],
                         explained_variance=r["2d"]["explained_variance"])
        if "hessian" in r:
            entry["hessian"] = {k: r["hessian"].get(k) for k in (
                "sample", "top_eigenvalues", "residual_bounds", "lambda_min", "trace",
                "trace_standard_error", "hvps_per_second")}
        if "sharpness" in r:
            entry["sharpness"] = [{k: row[k] for k in ("epsilon", "loss", "rise", "keskar")}
                                  for row in r["sharpness"]]
    atomic_write_json(path, summary)
    return written


def run_cli():
    """Parses nothing itself: FLAGS must already hold the command line."""
    ranges = _check_flags()
    modes = set(FLAGS.mode)
    run_dirs = [FLAGS.run_dir] + ([FLAGS.compare_run_dir] if FLAGS.compare_run_dir else [])
    for d in run_dirs:
        if not os.path.isdir(d):
            raise InputError(f"{at(d)}no such run folder")
    output_dir = FLAGS.output_dir or os.path.join(FLAGS.run_dir, "landscape")
    with contextlib.ExitStack() as held:  # a training run or a second landscape refuses
        seen = set()
        for flag, folder in (("--run_dir", FLAGS.run_dir),
                             ("--compare_run_dir", FLAGS.compare_run_dir),
                             ("--output_dir", output_dir)):
            if folder and os.path.realpath(folder) not in seen:
                seen.add(os.path.realpath(folder))
                # The runs are only read: one on read-only storage is read without a lock.
                held.enter_context(run_folder.lock(folder, flag,
                                                   optional=flag != "--output_dir"))
        return _analyse_runs(run_dirs, output_dir, modes, ranges)


def _analyse_runs(run_dirs, output_dir, modes, ranges):
    results, labels, task = [], [], None
    for d in run_dirs:
        run = run_lib.load(d, FLAGS.data_dir, FLAGS.train_sample, FLAGS.dev_sample, FLAGS.seed)
        if task is not None and run.task.name != task:
            raise InputError(f"--compare_run_dir={d}: a {run.task.name} run; --run_dir is {task}")
        task = run.task.name
        label = run.label if run.label not in labels else f"{run.label} ({os.path.basename(d)})"
        run.label = label
        labels.append(label)
        results.append(analyse(run, modes, ranges))
        del run
    written = write_results(results, output_dir)
    _log(f"kerasbert: landscape files in {output_dir}: "
         + ", ".join(os.path.basename(p) for p in written))
    return 0


def main(argv=None):
    argv = sys.argv if argv is None else argv
    try:
        rest = FLAGS(argv)
    except flags.Error as e:
        print(f"kerasbert: error: {e}", file=sys.stderr)
        return 2
    try:
        if len(rest) > 1:
            raise InputError(f"unexpected arguments: {' '.join(rest[1:])}")
        return run_cli()
    except InputError as e:
        print(f"kerasbert: error: {e}", file=sys.stderr)
        return 2
    finally:
        FLAGS.unparse_flags()  # a second in-process call starts from the defaults
