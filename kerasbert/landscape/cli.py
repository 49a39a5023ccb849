"""`python -m kerasbert.landscape --run_dir=<run> [--compare_run_dir=<run>]`: the loss
landscape, trajectory and layer analysis of finished runs, as PNGs with CSV/NPZ beside.

    --mode=1d,2d,trajectory,layers,rollback (default: all)
    1d        θ(α) = θ0 + α(θ1 − θ0): 1d.csv, 1d.png
    2d        θ1 + α·d1 + β·d2 on a grid × grid lattice, trajectory projected:
              2d_<run>.npz, 2d.csv, 2d.png, agreement.csv (train/dev surface correlation)
              --direction=random: d1 = δ1 = θ1 − θ0, d2 random ⟂ δ1 (see directions.py)
              --direction=pca: the trajectory's top two principal directions, ‖d‖ = ‖δ1‖
    trajectory  loss and error at every saved checkpoint (convergence by step):
              trajectory.csv, trajectory.png
    layers    ‖θ1ˡ − θ0ˡ‖ / ‖θ0ˡ‖ per layer: layers.csv, layers.png
    rollback  dev metrics with layers reset to θ0: rollback.csv, rollback.png

The runs must have been trained with --save_trajectory_every=N. A compared run (e.g. the
same task from --init_checkpoint=random) is drawn beside the first on the same scales.
"""

import contextlib
import os
import sys
import tempfile
import time

import numpy as np
from absl import flags
from scipy import stats

from kerasbert import run_folder
from kerasbert.errors import InputError, at
from kerasbert.io_utils import (
    atomic_write_csv,
    atomic_write_json,
    read_json_object,
)
from kerasbert.landscape import directions, layers, plots, surface
from kerasbert.landscape import run as run_lib
from kerasbert.training.trajectory import snapshot, weight_names

MODES = ("1d", "2d", "trajectory", "layers", "rollback")
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
flags.DEFINE_list("mode", list(MODES), "What to compute: any of 1d, 2d, trajectory, layers, "
                  "rollback.",
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
                  "units of δ1 (θ0 lies at α = -1 with --direction=random).", flag_values=FLAGS)
flags.DEFINE_list("range_beta", ["-1", "1"], "β range of the 2D grid.", flag_values=FLAGS)
flags.DEFINE_enum("direction", "random", ["random", "pca"], "The 2D plane: δ1 and a random "
                  "direction, or the trajectory's top two principal directions.",
                  flag_values=FLAGS)
flags.DEFINE_enum("direction_scale", "delta", ["delta", "weights"], "Norm of the random "
                  "direction: ‖δ1‖ (delta) or per matrix ‖θ1ˡ‖ (weights, loss-landscape's).",
                  flag_values=FLAGS)
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
                          ("train_sample", 0), ("dev_sample", 0)):
        if FLAGS[name].value < minimum:
            raise InputError(f"--{name}={FLAGS[name].value}: must be at least {minimum}")
    return {name: _range(name) for name in ("range_1d", "range_alpha", "range_beta")}


# --- Writing results ----------------------------------------------------------------------

def _slug(label):
    return "".join(c if c.isalnum() else "_" for c in label.lower()).strip("_")


def write_npz(path, **arrays):
    directory, name = os.path.split(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix="." + name, suffix=".npz")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


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
    result = {"label": run.label, "steps": run.trajectory.steps}
    log(f"kerasbert: {run.label}: {run.run_dir}, {len(run.trajectory.steps)} checkpoints, "
        f"train sample {len(run.samples['train'].labels)}, dev sample "
        f"{len(run.samples['dev'].labels)}")
    if "1d" in modes:
        alphas = np.linspace(*ranges["range_1d"], FLAGS.points_1d)
        result["1d"] = surface.interpolate(evaluator, theta0, theta1, alphas)
        log(f"kerasbert: {run.label}: 1D done ({len(alphas)} points)")
    if "2d" in modes:
        delta = directions.subtract(theta1, theta0)
        if FLAGS.direction == "random":
            d1 = delta
            d2 = directions.random_direction(theta1, names, FLAGS.seed, orthogonal_to=delta,
                                             scale=FLAGS.direction_scale)
            axis_labels, explained = ("α (δ1 = θ1 − θ0)", "β (random, orthogonal to δ1)"), None
        else:
            points = [run.trajectory.load(s) for s in run.trajectory.steps]
            if len(points) < 3:
                raise InputError(f"{at(run.trajectory.directory)}--direction=pca needs at "
                                 f"least 3 checkpoints, the run saved {len(points)}")
            (d1, d2), explained = directions.pca_directions(points, theta1)
            scale = np.float32(directions.norm(delta))  # axes in units of ‖δ1‖
            d1, d2 = [x * scale for x in d1], [x * scale for x in d2]
            axis_labels = (f"PC1 ({explained[0]:.0%}) × ‖δ1‖", f"PC2 ({explained[1]:.0%}) × ‖δ1‖")
            del points
        alphas = np.linspace(*ranges["range_alpha"], FLAGS.grid)
        betas = np.linspace(*ranges["range_beta"], FLAGS.grid)
        start = time.perf_counter()
        surfaces = surface.grid(evaluator, theta1, d1, d2, alphas, betas)
        seconds = time.perf_counter() - start
        points = [run.trajectory.load(s) for s in run.trajectory.steps]
        path_xy = directions.project(points, theta1, d1, d2)
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
        flatness = {"train_loss_at_theta1": centre, "mean_train_loss_rise": float(rise.mean()),
                    "max_train_loss_rise": float(rise.max())}
        result["2d"] = {"alphas": alphas, "betas": betas, **surfaces, "trajectory": path_xy,
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
    return result


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
        plots.plot_2d({r["label"]: r["2d"] for r in results}, out("2d.png"))
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
    # summary.json accumulates over invocations (e.g. 1D on a large sample, 2D on a small one)
    path = out("summary.json")
    summary = read_json_object(path) if os.path.exists(path) else {}
    for r in results:
        entry = summary.setdefault(r["label"], {})
        entry["steps"] = r["steps"]
        if "2d" in r:
            entry.update(agreement=r["2d"]["agreement"], flatness=r["2d"]["flatness"],
                         direction=FLAGS.direction,
                         points_per_second=r["2d"]["points_per_second"],
                         explained_variance=r["2d"]["explained_variance"])
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
