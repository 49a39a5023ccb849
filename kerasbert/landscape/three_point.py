"""The plane through three points of weight space: θ0 (the pre-trained start), θ_a (the
fine-tuned end of --run_dir) and θ_b (that of --compare_run_dir), e.g. a failed and a
successful seed of one task (Mosbach et al. 2021, whose figure shows the failed run in a
valley of its own behind a barrier); the straight path θ_a → θ_b and its barrier; with
--mode=hessian / sharpness, the curvature at both minima (curvature.py's estimators).

Choices (written into three_point.json and .md, so a reader of the numbers sees them):
- The basis is orthogonal, so the picture keeps distances and angles: d1 = θ_a − θ0 and d2
  the part of θ_b − θ0 orthogonal to d1, rescaled to ‖d1‖. A point (α, β) is
  θ0 + α·d1 + β·d2; θ0 sits at (0, 0), θ_a at (1, 0) and θ_b at
  (⟨θ_b − θ0, d1⟩ / ‖d1‖², ‖d2 before rescaling‖ / ‖d1‖), both axes in units of ‖θ_a − θ0‖.
- θ0's head: runs of different seeds start from the same pre-trained encoder but from
  different random heads. θ0 is --run_dir's own start (encoder and its initial head), so
  θ0 → θ_a is exactly run a's fine-tuning; how far run b's initial head lies from it is
  reported (initial_heads; with the pooler when a checkpoint without one left it random,
  so that it differs too). The runs must agree everywhere else at step 0.
- Every point is evaluated on --run_dir's fixed samples (same_samples says whether
  --compare_run_dir's settings draw the same rows), on run a's model.
"""

import os
import time
import types

import numpy as np

from kerasbert.errors import InputError
from kerasbert.landscape import curvature, directions, hessian, layers, surface
from kerasbert.landscape import run as run_lib
from kerasbert.training.trajectory import snapshot

POINTS = ("theta0", "theta_a", "theta_b")
BARRIER_KEYS = ("train_loss", "dev_loss")
# θ_b closer than this (relative) to the line through θ0 and θ_a spans no plane.
COLLINEAR = 1e-6
THETA0_HEAD = "--run_dir's initial head (its step-0 checkpoint)"
# Groups two runs of one pre-trained encoder may start from differently: the new head, and
# the pooler of a checkpoint that has none (it is initialised at random, like the head).
NEW_GROUPS = ("head", "pooler")


def basis(theta0, theta_a, theta_b):
    """(d1, d2, coordinates {point: (α, β)}) of the module docstring's orthogonal basis;
    None for d2 when θ_b is on the line through θ0 and θ_a."""
    d1 = directions.subtract(theta_a, theta0)
    length = directions.norm(d1)
    offset = directions.subtract(theta_b, theta0)
    along = directions.dot(offset, d1) / length ** 2
    # the orthogonal part in float64, cast once
    rest = [o.astype(np.float64) - along * x.astype(np.float64) for o, x in zip(offset, d1)]
    height = directions.norm(rest)
    coordinates = {"theta0": (0.0, 0.0), "theta_a": (1.0, 0.0),
                   "theta_b": (float(along), float(height / length))}
    if height <= COLLINEAR * max(directions.norm(offset), 1e-30):
        return d1, None, coordinates
    d2 = [(r * (length / height)).astype(np.float32) for r in rest]
    return d1, d2, coordinates


def axis_ranges(coordinates, margin):
    """(α range, β range) of the box around the points, widened on every side by
    `margin` × its larger side."""
    xy = np.array(list(coordinates.values()))
    low, high = xy.min(axis=0), xy.max(axis=0)
    pad = margin * float(np.max(high - low))
    return (float(low[0] - pad), float(high[0] + pad)), (float(low[1] - pad), float(high[1] + pad))


def barrier(alphas, values):
    """The barrier of one metric along θ(α) = (1 − α)θ_a + αθ_b, from its values at
    `alphas` (0 first, 1 last): the largest height above the straight line between the
    end values (`barrier`, at `alpha`) and the largest value above the higher end
    (`above_endpoints`, at `alpha_of_max`); both are 0 or more, the ends being points."""
    alphas, values = np.asarray(alphas, np.float64), np.asarray(values, np.float64)
    if alphas[0] != 0.0 or alphas[-1] != 1.0:
        raise ValueError("the path's α must run from 0 to 1")
    start, end = values[0], values[-1]
    excess = values - ((1.0 - alphas) * start + alphas * end)
    i, j = int(np.argmax(excess)), int(np.argmax(values))
    return {"barrier": float(excess[i]), "alpha": float(alphas[i]),
            "above_endpoints": float(values[j] - max(start, end)),
            "alpha_of_max": float(alphas[j]), "start": float(start), "end": float(end),
            "max": float(values[j])}


def _labels(run_a, run_b):
    if run_a.label != run_b.label:
        return run_a.label, run_b.label
    return tuple(f"{r.label} ({os.path.basename(os.path.normpath(r.run_dir))})"
                 for r in (run_a, run_b))


def _check_final(run, flag):
    """θ1 of the trajectory must be the weights the run saved (as analyse checks)."""
    final = run.trajectory.final()
    gap = max(float(np.max(np.abs(a - b))) for a, b in zip(final, snapshot(run.model)))
    if gap > 1e-6:
        raise InputError(f"{flag}={run.run_dir}: the final checkpoint differs from "
                         f"model.weights.h5 (max |Δ| = {gap:.3g}): not the same run")
    return final


def check_pair(run_a, run_b):
    """Refuses a pair that spans no common plane: another task, other weight shapes, or
    another start outside the head. Returns (θ0, θ_a, θ_b, initial-heads dict)."""
    flag = f"--compare_run_dir={run_b.run_dir}"
    if run_a.task.name != run_b.task.name:
        raise InputError(f"{flag}: a {run_b.task.name} run; --run_dir is {run_a.task.name} "
                         "(the three-point plane needs two runs of one task)")
    if run_a.trajectory.shapes != run_b.trajectory.shapes:
        raise InputError(f"{flag}: its weights differ in number or shape from --run_dir's "
                         "(another --model_size or head); the three-point plane needs one model")
    theta_a = _check_final(run_a, "--run_dir")
    theta_b = _check_final(run_b, "--compare_run_dir")
    theta0, start_b = run_a.trajectory.start(), run_b.trajectory.start()
    groups = layers.weight_groups(run_a.model)
    gaps = {}
    for x, y, g in zip(theta0, start_b, groups):
        gaps[g] = max(gaps.get(g, 0.0), float(np.max(np.abs(x - y))))
    differ = [g for g, gap in gaps.items() if gap > 1e-6]
    if set(differ) - set(NEW_GROUPS):
        group = next(g for g in differ if g not in NEW_GROUPS)
        raise InputError(f"{flag}: starts from other weights than --run_dir outside the head "
                         f"(max |Δ| = {gaps[group]:.3g} in {group} at step 0: another "
                         "--init_checkpoint, or a random encoder of another --seed); the plane "
                         "needs one θ0")
    new = ["head"] + [g for g in differ if g != "head"]  # a checkpoint without a pooler
    start_a = [x for x, g in zip(theta0, groups) if g in new]
    distance = directions.norm(directions.subtract(
        [x for x, g in zip(start_b, groups) if g in new], start_a))
    heads = {"theta0_head": THETA0_HEAD, "groups": new, "distance": distance,
             "relative_distance": distance / max(directions.norm(start_a), 1e-30)}
    return theta0, theta_a, theta_b, heads


def _same_samples(a, b):
    return all(np.array_equal(a[s].labels, b[s].labels)
               and a[s].inputs.keys() == b[s].inputs.keys()
               and all(np.array_equal(a[s].inputs[k], b[s].inputs[k]) for k in a[s].inputs)
               for s in ("train", "dev"))


def three_point(run_a, run_b, config, log=print):
    """The three-point plane of two loaded LandscapeRuns (analyse_pair loads them): the
    grid, the points, the path θ_a → θ_b and its barriers, as one dict (writers'
    write_three_point); with config.mode's hessian / sharpness, also `curvature` as
    [result of θ_a, result of θ_b] in analyse's per-run format. Run a's model does the
    work and is left at θ_a."""
    start = time.perf_counter()
    theta0, theta_a, theta_b, heads = check_pair(run_a, run_b)
    label_a, label_b = _labels(run_a, run_b)
    d1, d2, coordinates = basis(theta0, theta_a, theta_b)
    if directions.norm(d1) == 0.0:
        raise InputError(f"--run_dir={run_a.run_dir}: θ_a equals θ0 (the run never moved); "
                         "no plane")
    if d2 is None:
        raise InputError(f"--compare_run_dir={run_b.run_dir}: θ_b lies on the line through "
                         "θ0 and θ_a; the three points span no plane")
    evaluator = surface.SurfaceEvaluator(run_a.model, run_a.task, run_a.samples,
                                         config.batch_size, kind=run_a.kind)
    weights = dict(zip(POINTS, (theta0, theta_a, theta_b)))
    points = {}
    for name, label, run_dir in (("theta0", "θ0 (the start)", run_a.run_dir),
                                 ("theta_a", label_a, run_a.run_dir),
                                 ("theta_b", label_b, run_b.run_dir)):
        evaluator.set_weights(weights[name])
        points[name] = {"label": label, "run_dir": os.path.abspath(run_dir),
                        "alpha": coordinates[name][0], "beta": coordinates[name][1],
                        "metrics": evaluator.evaluate()}
    # The same points reached on the plane: what the grid shows there.
    evaluator.set_plane(theta0, d1, d2)
    for name in POINTS:
        points[name]["on_plane"] = evaluator.at(*coordinates[name])
    alpha_range, beta_range = axis_ranges(coordinates, config.plane_margin)
    alphas = np.linspace(*alpha_range, config.grid)
    betas = np.linspace(*beta_range, config.grid)
    surfaces = surface.grid(evaluator, theta0, d1, d2, alphas, betas)
    log(f"kerasbert: three-point plane {config.grid}×{config.grid} done")
    path = surface.interpolate(evaluator, theta_a, theta_b, np.linspace(0.0, 1.0,
                                                                          config.points_1d))
    barriers = {k: barrier([r["alpha"] for r in path], [r[k] for r in path])
                for k in BARRIER_KEYS if k in path[0]}
    log("kerasbert: path θ_a → θ_b: barrier of the training loss "
        f"{barriers['train_loss']['barrier']:.4g} at α = {barriers['train_loss']['alpha']:g}")
    lengths = {"theta_a_minus_theta0": directions.norm(d1),
               "theta_b_minus_theta0": directions.norm(directions.subtract(theta_b, theta0)),
               "theta_b_minus_theta_a": directions.norm(directions.subtract(theta_b, theta_a))}
    cosine = directions.dot(d1, directions.subtract(theta_b, theta0)) / (
        lengths["theta_a_minus_theta0"] * lengths["theta_b_minus_theta0"])
    result = {
        "points": points, "alphas": alphas, "betas": betas, **surfaces, "path": path,
        "barriers": barriers, "lengths": lengths,
        "angle_degrees": float(np.degrees(np.arccos(np.clip(cosine, -1.0, 1.0)))),
        "initial_heads": heads,
        "runs": [{"label": label, "steps": run.trajectory.steps,
                  "run_dir": os.path.abspath(run.run_dir)}
                 for label, run in ((label_a, run_a), (label_b, run_b))],
        "samples": {"from": os.path.abspath(run_a.run_dir),
                    "train": int(len(run_a.samples["train"].labels)),
                    "dev": int(len(run_a.samples["dev"].labels)),
                    "same_samples": _same_samples(run_a.samples, run_b.samples)},
        "axis_labels": ("α (d1 = θ_a − θ0)", "β (⊥ d1, unit ‖d1‖)")}
    modes = set(config.mode)
    if modes & {"hessian", "sharpness"}:
        result["curvature"] = _curvature(run_a, run_b, (label_a, label_b),
                                         (theta_a, theta_b), evaluator, config, modes, log)
    evaluator.set_weights(theta_a)
    result["seconds"] = time.perf_counter() - start
    return result


def _curvature(run_a, run_b, labels, minima, evaluator, config, modes, log):
    """Hessian / ε-sharpness at θ_a and θ_b on run a's model and training sample: one
    analyse-style result per minimum (label, steps, run_dir, hessian, sharpness)."""
    batches = hessian.sample_batches(run_a.samples["train"], config.hessian_batch_size,
                                     run_a.kind)
    results = []
    for run, label, theta in zip((run_a, run_b), labels, minima):
        # run a's model at this minimum; --hessian_trajectory walks this run's checkpoints
        at = types.SimpleNamespace(model=run_a.model, kind=run_a.kind, label=label,
                                   trajectory=run.trajectory)
        evaluator.set_weights(theta)
        result = {"label": label, "steps": run.trajectory.steps,
                  "run_dir": os.path.abspath(run.run_dir)}
        if "hessian" in modes:
            result["hessian"] = curvature.hessian_at_theta1(at, batches, config, log)
        if "sharpness" in modes:
            result["sharpness"] = curvature.sharpness_at_theta1(at, batches, theta, config, log)
        results.append(result)
    return results


def analyse_pair(config, log=print):
    """Loads --run_dir (θ_a) and --compare_run_dir (θ_b) and returns `three_point`'s
    result."""
    run_a = run_lib.load(config.run_dir, config.data_dir, config.train_sample,
                         config.dev_sample, config.seed)
    run_b = run_lib.load(config.compare_run_dir, config.data_dir, config.train_sample,
                         config.dev_sample, config.seed)
    log(f"kerasbert: three-point plane: θ_a {config.run_dir}, θ_b {config.compare_run_dir}, "
        f"train sample {len(run_a.samples['train'].labels)}, dev sample "
        f"{len(run_a.samples['dev'].labels)}")
    return three_point(run_a, run_b, config, log)
