"""How curved the training loss is at θ1 of a LandscapeRun, as a LandscapeConfig asks:
the Hessian's top eigenvalues and trace (also per layer group and along the trajectory)
and ε-sharpness. The estimators themselves are hessian.py's; this module runs them on a
run and gathers the rows that hessian.json and sharpness.json hold."""

import time

import numpy as np

from kerasbert.landscape import hessian, layers
from kerasbert.training.trajectory import model_weights


def _spectrum(loss, k, seed, steps):
    ritz, bounds = hessian.lanczos(loss.hvp, loss.size, steps, seed)
    return {"top_eigenvalues": [float(v) for v in ritz[:k]],
            "residual_bounds": [float(b) for b in bounds[:k]],
            "lambda_min": float(ritz[-1]), "lambda_min_residual_bound": float(bounds[-1]),
            "lanczos_steps": int(len(ritz))}


def hessian_at_theta1(run, batches, config, log=print):
    """Top-k eigenvalues and trace of the training-loss Hessian at θ1 over `batches`
    (hessian.sample_batches), with config.hessian_groups per layer group and with
    config.hessian_trajectory λ_max at every checkpoint; the model must be at θ1 and is
    left there."""
    start = time.perf_counter()
    loss = hessian.TrainingLoss(run.model, run.kind, batches, hvp=config.hvp)
    out = {"sample": loss.count, "parameters": loss.size, "hvp": config.hvp,
           **_spectrum(loss, config.top_k, config.seed, config.lanczos_steps)}
    log(f"kerasbert: {run.label}: Hessian top-{config.top_k} "
        f"{', '.join(f'{v:.4g}' for v in out['top_eigenvalues'])} "
        f"({config.lanczos_steps} Lanczos steps, {loss.hvp_seconds / max(loss.hvps, 1):.1f} s "
        "per Hessian-vector product)")
    groups = layers.weight_groups(run.model)
    order = layers.group_order(groups)
    weights = model_weights(run.model)
    rows = {g: {"group": g, "parameters": int(sum(np.prod(w.shape) for w, h in
                                                  zip(weights, groups) if h == g))}
            for g in order}
    if config.hutchinson_probes:
        trace, error, _, per_block = hessian.hutchinson(
            loss.hvp, loss.size, config.hutchinson_probes, config.seed, loss.offsets)
        out.update(trace=float(trace), trace_standard_error=float(error),
                   probes=config.hutchinson_probes)
        for g in order:  # a block's trace: the same probes, summed over the block only
            columns = [i for i, h in enumerate(groups) if h == g]
            mean, err = hessian.mean_and_standard_error(per_block[:, columns].sum(axis=1))
            rows[g].update(trace=float(mean), trace_standard_error=float(err))
        log(f"kerasbert: {run.label}: Hessian trace {trace:.4g} ± {error:.2g} "
            f"({config.hutchinson_probes} probes)")
    if config.hessian_groups:
        for g in order:
            block = hessian.TrainingLoss(run.model, run.kind, batches,
                                         [w for w, h in zip(weights, groups) if h == g],
                                         hvp=config.hvp)
            spectrum = _spectrum(block, config.top_k, config.seed, config.lanczos_steps)
            rows[g].update({k: spectrum[k] for k in ("top_eigenvalues", "residual_bounds")})
            loss.hvps, loss.hvp_seconds = (loss.hvps + block.hvps,
                                           loss.hvp_seconds + block.hvp_seconds)
        log(f"kerasbert: {run.label}: Hessian blocks of {len(order)} groups done")
    out["groups"] = list(rows.values())
    if config.hessian_trajectory:
        out["trajectory"] = []
        for step in run.trajectory.steps:
            loss.set_weights(run.trajectory.load(step))
            spectrum = _spectrum(loss, 1, config.seed, config.lanczos_steps)
            out["trajectory"].append({"step": step, "lambda_max": spectrum["top_eigenvalues"][0],
                                      "residual_bound": spectrum["residual_bounds"][0],
                                      "lambda_min": spectrum["lambda_min"]})
        loss.set_weights(run.trajectory.final())
        log(f"kerasbert: {run.label}: λ_max at {len(run.trajectory.steps)} checkpoints done")
    out.update(hvps=loss.hvps, seconds=time.perf_counter() - start,
               hvps_per_second=loss.hvps / max(loss.hvp_seconds, 1e-9))
    return out


def sharpness_at_theta1(run, batches, theta1, config, log=print):
    """ε-sharpness at θ1 for every config.epsilon (one row each), over `batches`; the
    model is left at θ1."""
    loss = hessian.TrainingLoss(run.model, run.kind, batches)
    axes = layers.filter_axes(run.model)
    if config.biasbn == "keep":  # each bias / LayerNorm vector: one filter
        axes = [tuple(range(w.ndim)) if a is None else a for a, w in zip(axes, theta1)]

    def value_and_gradient(point):
        loss.set_weights(point)
        value, gradient = loss.value_and_gradient()
        return value, loss.blocks(gradient, np.float64)

    rows = []
    for epsilon in map(float, config.epsilon):
        start = time.perf_counter()
        row = hessian.epsilon_sharpness(value_and_gradient, theta1, axes, epsilon,
                                        config.ascent_steps, config.seed)
        rows.append({**row, "biasbn": config.biasbn, "sample": loss.count,
                     "seconds": time.perf_counter() - start})
        log(f"kerasbert: {run.label}: ε-sharpness at ε = {epsilon:g}: loss rise "
            f"{row['rise']:.4g} ({row['keskar']:.3g} %)")
    loss.set_weights(theta1)
    return rows
