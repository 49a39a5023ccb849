"""The 2D plane through θ1 that the surface is drawn on, as a LandscapeConfig chooses it:
δ1 and a random direction (random), two random directions (random_pair) or the
trajectory's top two principal directions (pca); random directions normalised and scaled as
its normalization, biasbn and direction_scale say (see directions.py); and the 2D surface
drawn on it."""

import time

import numpy as np
from scipy import stats

from kerasbert.errors import InputError, at
from kerasbert.landscape import directions, layers, surface


def _random(run, theta1, names, seed, config, orthogonal_to=None):
    """A random direction at the weights' own scale, as --normalization/--biasbn say."""
    filters = layers.filter_axes(run.model) if config.normalization == "filter" else None
    return directions.random_direction(theta1, names, seed, orthogonal_to=orthogonal_to,
                                       scale="weights", filters=filters,
                                       keep_biasbn=config.biasbn == "keep")


def _scaled(run, theta1, d, value_range, length, config):
    """`d` rescaled as --direction_scale says, and its axis-label suffix."""
    if config.direction_scale == "weights":
        unit = "‖θ‖ per filter" if config.normalization == "filter" else "‖θ‖ per matrix"
        return d, f"× {unit}"
    if config.direction_scale == "delta":
        factor = length / max(directions.norm(d), 1e-30)
        return [x * np.float32(factor) for x in d], "length ‖δ1‖"
    # loss_rise: the training loss rises by --loss_rise at the far edge of the range.
    edge = max(abs(v) for v in value_range)
    evaluator = surface.SurfaceEvaluator(run.model, run.task, {"train": run.samples["train"]},
                                         config.batch_size, kind=run.kind)
    evaluator.set_plane(theta1, [x * np.float32(edge) for x in d])
    base = evaluator.at(0.0)["train_loss"]

    def rise(c):
        return max(evaluator.at(c)["train_loss"], evaluator.at(-c)["train_loss"]) - base

    factor = surface.scale_to_rise(rise, config.loss_rise)
    if factor is None:
        raise InputError(f"--direction_scale=loss_rise: the training loss of {run.label} does "
                         f"not rise by --loss_rise={config.loss_rise} along a random direction "
                         "up to 2^20 × the weights' norm; choose a smaller --loss_rise")
    return [x * np.float32(factor) for x in d], f"× {factor:.3g} ‖θ‖ (rise {config.loss_rise:g})"


def plane(run, theta0, theta1, names, config):
    """(d1, d2, axis labels, explained variance or None) of `config.direction`'s plane
    around θ1 for the LandscapeRun `run`; `names` are its weights' names."""
    delta = directions.subtract(theta1, theta0)
    length = directions.norm(delta)
    kind = f"{config.normalization}-normalised"
    if config.direction == "random":
        d2 = _random(run, theta1, names, config.seed, config, orthogonal_to=delta)
        d2, suffix = _scaled(run, theta1, d2, config.range_beta, length, config)
        return delta, d2, ("α (δ1 = θ1 − θ0)", f"β (random ⊥ δ1, {kind}, {suffix})"), None
    if config.direction == "random_pair":
        d1 = _random(run, theta1, names, config.seed, config)
        d2 = _random(run, theta1, names, config.seed + 1, config, orthogonal_to=d1)
        d1, s1 = _scaled(run, theta1, d1, config.range_alpha, length, config)
        d2, s2 = _scaled(run, theta1, d2, config.range_beta, length, config)
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


def _agreement(surfaces):
    """Pearson and Spearman correlations between the training loss and the dev error and
    loss over the grid's points (NaN where one of them is constant)."""
    agreement = {}
    for a, b in (("train_loss", "dev_error"), ("train_loss", "dev_loss")):
        if a in surfaces and b in surfaces:
            x, y = surfaces[a].ravel(), surfaces[b].ravel()
            constant = np.ptp(x) == 0 or np.ptp(y) == 0  # no correlation is defined
            agreement[f"pearson_{a}_vs_{b}"] = (
                np.nan if constant else float(stats.pearsonr(x, y)[0]))
            agreement[f"spearman_{a}_vs_{b}"] = (
                np.nan if constant else float(stats.spearmanr(x, y)[0]))
    return agreement


def surface_on_plane(run, evaluator, theta0, theta1, names, config, log=print):
    """The "2d" result of one run: the config.grid × config.grid surfaces of
    `evaluator` (a surface.SurfaceEvaluator of the run) on `plane`'s plane around θ1, the
    trajectory projected on it and how far off the plane each checkpoint lies, how the
    training loss agrees with the dev metrics, and how flat the plane is at θ1."""
    d1, d2, axis_labels, explained = plane(run, theta0, theta1, names, config)
    alphas = np.linspace(*config.range_alpha, config.grid)
    betas = np.linspace(*config.range_beta, config.grid)
    start = time.perf_counter()
    surfaces = surface.grid(evaluator, theta1, d1, d2, alphas, betas)
    seconds = time.perf_counter() - start
    points = [run.trajectory.load(s) for s in run.trajectory.steps]
    path_xy = directions.project(points, theta1, d1, d2)
    off_plane, from_theta1 = directions.off_plane(points, theta1, d1, d2, path_xy)
    del points
    agreement = _agreement(surfaces)
    # Flatness: how much the training loss rises over the grid above its value at θ1.
    centre = evaluator.at(0.0, 0.0)["train_loss"]
    rise = surfaces["train_loss"] - centre
    moved = from_theta1 > 0
    flatness = {"train_loss_at_theta1": centre, "mean_train_loss_rise": float(rise.mean()),
                "max_train_loss_rise": float(rise.max()),
                # how far the drawn path is from the checkpoints it stands for
                "trajectory_max_relative_distance_from_plane": float(
                    np.max(off_plane[moved] / from_theta1[moved])) if moved.any() else 0.0}
    log(f"kerasbert: {run.label}: 2D {config.grid}×{config.grid} done in {seconds:.0f} s "
        f"({alphas.size * betas.size / seconds:.2f} points/s)")
    return {"alphas": alphas, "betas": betas, **surfaces, "trajectory": path_xy,
            "trajectory_distance_from_plane": off_plane,
            "trajectory_distance_from_theta1": from_theta1,
            "axis_labels": axis_labels, "explained_variance": explained,
            "agreement": agreement, "flatness": flatness, "seconds": seconds,
            "points_per_second": alphas.size * betas.size / seconds}
