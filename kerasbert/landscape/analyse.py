"""The landscape of finished runs as a LandscapeConfig asks: `analyse_runs` locks the
folders, rebuilds each run, `analyse`s it and writes the files; `analyse` is one run's
modes (1d, 2d, trajectory, layers, rollback, hessian, sharpness); three_point, of
two runs together, is three_point.py's."""

import contextlib
import os

import numpy as np

from kerasbert import run_folder
from kerasbert.errors import InputError, at
from kerasbert.landscape import curvature, hessian, layers, plane, surface, three_point, writers
from kerasbert.landscape import run as run_lib
from kerasbert.training.trajectory import snapshot, weight_names


def log_line(message):
    print(message, flush=True)


def analyse(run, config, log=log_line):
    """Everything config.mode asks for about one LandscapeRun; returns a dict of results."""
    modes = set(config.mode)
    names = weight_names(run.model)
    theta1 = run.trajectory.final()
    loaded = snapshot(run.model)
    gap = max(float(np.max(np.abs(a - b))) for a, b in zip(theta1, loaded))
    if gap > 1e-6:
        raise InputError(f"{at(run.trajectory.directory)}the final checkpoint differs from "
                         f"model.weights.h5 (max |Δ| = {gap:.3g}): not the same run")
    theta0 = run.trajectory.start()
    evaluator = surface.SurfaceEvaluator(run.model, run.task, run.samples, config.batch_size,
                                         kind=run.kind)
    result = {"label": run.label, "steps": run.trajectory.steps, "run_dir": run.run_dir}
    log(f"kerasbert: {run.label}: {run.run_dir}, {len(run.trajectory.steps)} checkpoints, "
        f"train sample {len(run.samples['train'].labels)}, dev sample "
        f"{len(run.samples['dev'].labels)}")
    if "1d" in modes:
        alphas = np.linspace(*config.range_1d, config.points_1d)
        result["1d"] = surface.interpolate(evaluator, theta0, theta1, alphas)
        log(f"kerasbert: {run.label}: 1D done ({len(alphas)} points)")
    if "2d" in modes:
        result["2d"] = plane.surface_on_plane(run, evaluator, theta0, theta1, names, config,
                                              log)
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
        batches = hessian.sample_batches(run.samples["train"], config.hessian_batch_size,
                                         run.kind)
        if "hessian" in modes:
            result["hessian"] = curvature.hessian_at_theta1(run, batches, config, log)
        if "sharpness" in modes:
            result["sharpness"] = curvature.sharpness_at_theta1(run, batches, theta1, config,
                                                                log)
        evaluator.set_weights(theta1)
    return result


def analyse_runs(config, log=log_line):
    """The landscape of config.run_dir (and config.compare_run_dir, beside it on the same
    scales) written to config.output_dir, with the folders locked against a training run
    or a second landscape; returns the files written."""
    for d in config.run_dirs:
        if not os.path.isdir(d):
            raise InputError(f"{at(d)}no such run folder")
    with contextlib.ExitStack() as held:
        seen = set()
        for flag, folder in (("--run_dir", config.run_dir),
                             ("--compare_run_dir", config.compare_run_dir),
                             ("--output_dir", config.output_dir)):
            if folder and os.path.realpath(folder) not in seen:
                seen.add(os.path.realpath(folder))
                # The runs are only read: one on read-only storage is read without a lock.
                held.enter_context(run_folder.lock(folder, flag,
                                                   optional=flag != "--output_dir"))
        return _analyse_locked(config, log)


def _analyse_locked(config, log):
    if "three_point" in config.mode:
        written = writers.write_three_point(three_point.analyse_pair(config, log),
                                            config.output_dir, config.direction)
        log(f"kerasbert: landscape files in {config.output_dir}: "
            + ", ".join(os.path.basename(p) for p in written))
        return written
    results, labels, task = [], [], None
    for d in config.run_dirs:
        run = run_lib.load(d, config.data_dir, config.train_sample, config.dev_sample,
                           config.seed)
        if task is not None and run.task.name != task:
            raise InputError(f"--compare_run_dir={d}: a {run.task.name} run; --run_dir is {task}")
        task = run.task.name
        label = run.label if run.label not in labels else f"{run.label} ({os.path.basename(d)})"
        run.label = label
        labels.append(label)
        results.append(analyse(run, config, log))
        del run
    written = writers.write_results(results, config.output_dir, config.direction)
    log(f"kerasbert: landscape files in {config.output_dir}: "
        + ", ".join(os.path.basename(p) for p in written))
    return written
