"""Hao et al.'s findings over seeds: pre-trained vs random-init runs, paired by seed.

    python -m kerasbert.experiments landscape_findings --landscape_dirs=L42,L43,L44 \
        --output_dir=docs/figures/hao

Each --landscape_dirs folder is the output of `python -m kerasbert.landscape` for one seed,
with the pre-trained run as --run_dir and the random-init run (same task, same seed, same
number of steps) as --compare_run_dir, and these modes (one or several invocations; its
summary.json accumulates): trajectory, layers, rollback, 1d, hessian, sharpness. The runs'
own history.csv (dev metric after every epoch, on the whole dev set) is read from the
run folders summary.json names.

Writes landscape_findings.json (read by the findings report: one entry per claim, each a list
of measurements with n, effect, std, 95% Student-t interval and unit), hao.md (the
per-seed numbers behind every measurement) and convergence.png. Every effect is signed so
that a positive value is the paper's direction; kerasbert.experiments.findings turns the
intervals into verdicts. Nothing here trains or imports TensorFlow.
"""

import argparse
import csv
import json
import math
import os

from kerasbert.analysis import stats
from kerasbert import command as command_lib
from kerasbert import run_folder
from kerasbert.errors import InputError
from kerasbert.io_utils import atomic_write_json, atomic_write_text

PRE, RANDOM = "pre-trained", "random init"
NEEDED = ("summary.json", "trajectory.csv", "layers.csv", "rollback.csv", "1d.csv")


class FindingsError(InputError):
    """Landscape folders that cannot be compared (a mode missing, one seed, other budgets)."""


def _read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _rows(rows, label):
    return [r for r in rows if r["run"] == label]


def _metric(row):
    """The dev metric column of a history/trajectory row: dev_accuracy, else the first dev_."""
    if "dev_accuracy" in row:
        return "dev_accuracy"
    return next(k for k in row if k.startswith("dev_") and k not in ("dev_loss", "dev_error"))


def read_seed(folder):
    """Everything one landscape folder says about its two runs, as plain numbers."""
    missing = [n for n in NEEDED if not os.path.exists(os.path.join(folder, n))]
    if missing:
        raise FindingsError(f"{folder}: missing {', '.join(missing)} (run "
                            "kerasbert.landscape with --mode=1d,trajectory,layers,rollback,"
                            "hessian,sharpness)")
    with open(os.path.join(folder, "summary.json")) as f:
        summary = json.load(f)
    if set(summary) < {PRE, RANDOM}:
        raise FindingsError(f"{folder}/summary.json: needs a {PRE!r} and a {RANDOM!r} run "
                            f"(has {', '.join(map(repr, summary))})")
    tables = {n: _read_csv(os.path.join(folder, n)) for n in NEEDED[1:]}
    seed = {}
    for label in (PRE, RANDOM):
        entry = summary[label]
        for key in ("hessian", "sharpness", "run_dir"):
            if key not in entry:
                raise FindingsError(f"{folder}/summary.json: {label!r} has no {key!r}")
        config = run_folder.read_config(entry["run_dir"])
        history = _read_csv(run_folder.path(entry["run_dir"], run_folder.HISTORY))
        metric = _metric(history[0])
        trajectory = _rows(tables["trajectory.csv"], label)
        rollback = {r["rollback"]: float(r[_metric(r)]) for r in _rows(tables["rollback.csv"],
                                                                       label)}
        changes = {r["group"]: float(r["relative_change"])
                   for r in _rows(tables["layers.csv"], label)}
        path = _rows(tables["1d.csv"], label)
        seed[label] = {
            "run_dir": entry["run_dir"], "config": config, "seed": config["seed"],
            "learning_rate": config["learning_rate"], "metric": metric,
            "steps": [int(r["step"]) for r in history],
            "dev": [float(r[metric]) for r in history],
            "train_loss": [float(r["train_loss"]) for r in history],
            "checkpoint_dev_loss": [float(r["dev_loss"]) for r in trajectory],
            "lambda_max": entry["hessian"]["top_eigenvalues"][0],
            "trace": entry["hessian"]["trace"],
            "sharpness": {float(s["epsilon"]): s["keskar"] for s in entry["sharpness"]},
            "rollback": rollback, "changes": changes,
            "spearman_1d": _spearman([float(r["train_loss"]) for r in path],
                                     [float(r["dev_error"]) for r in path]),
        }
    return seed


def _spearman(x, y):
    from scipy import stats as scipy_stats

    if len(set(x)) < 2 or len(set(y)) < 2:
        return float("nan")  # undefined on a constant curve
    return float(scipy_stats.spearmanr(x, y)[0])


def _layers(changes):
    return sorted((g for g in changes if g.startswith("layer_")), key=lambda g: int(g[6:]))


# --- The measurements ------------------------------------------------------------------------

def _at_step(run, step):
    return run["dev"][run["steps"].index(step)] if step in run["steps"] else float("nan")


def _drift_ratio(run):
    """Mean relative change of the upper half of the layers over the lower half's."""
    names = _layers(run["changes"])
    half = len(names) // 2
    low = sum(run["changes"][g] for g in names[:half]) / half
    high = sum(run["changes"][g] for g in names[-half:]) / half
    return high / low


def _rollback_gap(run):
    """Dev metric with the lowest half of the layers reset minus with the highest half reset."""
    half = len(_layers(run["changes"])) // 2
    return run["rollback"][f"lowest_{half}"] - run["rollback"][f"highest_{half}"]


def _overfit(run):
    """How far the dev loss rose from its lowest checkpoint to the last one."""
    losses = run["checkpoint_dev_loss"]
    return losses[-1] - min(losses)


def measurements(seeds):
    """[(claim, measure name, unit, points, values A, values B or None)], positive = paper."""
    pre = [s[PRE] for s in seeds]
    rnd = [s[RANDOM] for s in seeds]
    first, last = pre[0]["steps"][0], pre[0]["steps"][-1]
    metric = pre[0]["metric"].removeprefix("dev_")
    out = []

    def add(claim, name, unit, a, b=None):
        out.append((claim, name, unit, unit == "points", a, b))

    add("hao-starting-point", f"dev {metric} after the first epoch (step {first}), "
        "pre-trained − random", "points",
        [_at_step(r, first) for r in pre], [_at_step(r, first) for r in rnd])
    add("hao-starting-point", f"dev {metric} at the end (step {last}), pre-trained − random",
        "points", [r["dev"][-1] for r in pre], [r["dev"][-1] for r in rnd])
    add("hao-starting-point", f"best dev {metric} over the epochs, pre-trained − random",
        "points", [max(r["dev"]) for r in pre], [max(r["dev"]) for r in rnd])
    add("hao-flatter-optima", "λ_max of the training-loss Hessian at θ1, random − pre-trained",
        "λ", [r["lambda_max"] for r in rnd], [r["lambda_max"] for r in pre])
    add("hao-flatter-optima", "Hessian trace at θ1 (Hutchinson), random − pre-trained",
        "trace", [r["trace"] for r in rnd], [r["trace"] for r in pre])
    for e in sorted(pre[0]["sharpness"]):
        add("hao-flatter-optima", f"ε-sharpness at ε = {e:g} (filter-normalised ball; "
            "Keskar's 100·rise/(1+L)), random − pre-trained", "keskar",
            [r["sharpness"][e] for r in rnd], [r["sharpness"][e] for r in pre])
    add("hao-loss-vs-generalisation", "Spearman ρ of training loss vs dev error along the "
        "1D path θ0 → θ1 (pre-trained runs)", "ρ", [r["spearman_1d"] for r in pre])
    add("hao-overfitting", "dev-loss rise from its lowest checkpoint to θ1, random − "
        "pre-trained", "dev loss", [_overfit(r) for r in rnd], [_overfit(r) for r in pre])
    add("hao-overfitting", f"drop of dev {metric} from its best epoch to the end, random − "
        "pre-trained", "points", [max(r["dev"]) - r["dev"][-1] for r in rnd],
        [max(r["dev"]) - r["dev"][-1] for r in pre])
    add("hao-lower-layers", "relative change of the upper half of the layers ÷ the lower "
        "half's, minus 1 (pre-trained runs)", "ratio − 1", [_drift_ratio(r) - 1 for r in pre])
    add("hao-lower-layers", f"dev {metric} with the lowest half of the layers rolled back − "
        "with the highest half rolled back (pre-trained runs)", "points",
        [_rollback_gap(r) for r in pre])
    return out


def summarise(seeds):
    """{claim: [measurement]} with n, effect, std, interval; and the per-seed values."""
    claims = {}
    for claim, name, unit, points, a, b in measurements(seeds):
        values = a if b is None else [x - y for x, y in zip(a, b)]
        finite = [v for v in values if math.isfinite(v)]
        if not finite:
            continue
        spread, interval = stats.describe(finite), stats.t_interval(finite)
        claims.setdefault(claim, []).append({
            "measure": name, "unit": "points" if points else unit, "points": points,
            "n": spread["n"], "effect": interval["mean"], "std": spread["std"],
            "low": interval["low"], "high": interval["high"], "values": values, "a": a,
            "b": b})
    return claims


def _fmt(value, points):
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    return f"{100 * value:.1f}" if points else f"{value:.4g}"


def _spread(values, points):
    """mean ± sample std of one side's per-seed values."""
    d = stats.describe([v for v in values if math.isfinite(v)])
    return f"{_fmt(d['mean'], points)} ± {_fmt(d['std'], points)}"


def markdown(seeds, claims, command):
    pre0 = seeds[0][PRE]
    about = (f"Generated by `{command}`. Seeds "
             f"{', '.join(str(s[PRE]['seed']) for s in seeds)}; pre-trained lr "
             f"{pre0['learning_rate']:g}, random init lr {seeds[0][RANDOM]['learning_rate']:g}; "
             f"dev metric after the epochs ending at steps {', '.join(map(str, pre0['steps']))}. "
             "Effect: mean over seeds of the per-seed value (or of the per-seed difference "
             "A − B), positive = the paper's direction, with its 95% Student-t interval.")
    lines = ["# Hao et al. 2019 over seeds: pre-trained vs random init", "", about, "",
             "![convergence](convergence.png)", "",
             "| claim | measure | per seed | effect [95% interval] |", "|---|---|---|---|"]
    for claim, rows in claims.items():
        for m in rows:
            per_seed = ", ".join(_fmt(v, m["points"]) for v in m["values"])
            if m["b"] is not None:
                per_seed += " (A: " + ", ".join(_fmt(v, m["points"]) for v in m["a"]) + \
                            "; B: " + ", ".join(_fmt(v, m["points"]) for v in m["b"]) + ")"
                per_seed += f"; A {_spread(m['a'], m['points'])}, B {_spread(m['b'], m['points'])}"
            interval = ("" if m["low"] is None else
                        f" [{_fmt(m['low'], m['points'])}, {_fmt(m['high'], m['points'])}]")
            lines.append(f"| `{claim}` | {m['measure']} | {per_seed} | "
                         f"{_fmt(m['effect'], m['points'])}{interval} {m['unit']} |")
    header = ("| run | seed | dev metric per epoch | train loss per epoch | λ_max | trace | "
              "ε-sharpness | 1D Spearman |")
    lines += ["", header, "|---|---|---|---|---|---|---|---|"]
    for s in seeds:
        for label in (PRE, RANDOM):
            r = s[label]
            lines.append(
                f"| {label} | {r['seed']} | {' / '.join(f'{100 * v:.1f}' for v in r['dev'])} | "
                f"{' / '.join(f'{v:.3f}' for v in r['train_loss'])} | {r['lambda_max']:.4g} | "
                f"{r['trace']:.4g} | "
                + ", ".join(f"{e:g}: {v:.3g}" for e, v in sorted(r["sharpness"].items()))
                + f" | {r['spearman_1d']:.2f} |")
    return "\n".join(lines) + "\n"


def plot_convergence(seeds, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for label, color in ((PRE, "tab:blue"), (RANDOM, "tab:red")):
        steps = seeds[0][label]["steps"]
        for ax, key, name in ((axes[0], "dev", "dev metric"),
                              (axes[1], "train_loss", "train loss (epoch mean)")):
            values = np.array([s[label][key] for s in seeds])
            mean, std = values.mean(0), values.std(0, ddof=1) if len(seeds) > 1 else 0 * values[0]
            ax.plot(steps, mean, "o-", color=color, label=f"{label} (n = {len(seeds)})")
            ax.fill_between(steps, mean - std, mean + std, color=color, alpha=0.2)
            ax.set_xlabel("step")
            ax.set_title(f"{name}: mean ± std over seeds")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parser(argv):
    """The options (argv[0]: the program's name), parsed as absl flags (command.py)."""
    p = argparse.ArgumentParser(prog=argv[0], description=__doc__.splitlines()[0])
    p.add_argument("--landscape_dirs", required=True,
                   help="comma-separated landscape output folders, one per seed")
    p.add_argument("--output_dir", required=True)
    return p


def parse_args(argv):
    """The flags of argv (argv[0]: the program's name)."""
    return command_lib.parse_with_flags(parser(argv), argv)


def run(argv):
    """The landscape findings (argv[0]: the program's name); returns the exit status. Bad
    folders are one line `kerasbert: error: ...` and status 2 (errors.guarded)."""
    command = "python -m kerasbert.experiments landscape_findings " + " ".join(argv[1:])
    return command_lib.run_parser(parser(argv), lambda args: main(args, command), argv)


def _read_seeds(folders):
    """read_seed of every folder, checked to be comparable; unreadable files are the
    user's to fix, so they are InputErrors too."""
    try:
        seeds = [read_seed(f) for f in folders]
    except (OSError, KeyError) as e:
        raise InputError(str(e)) from None
    if len(seeds) < 2:
        raise FindingsError("--landscape_dirs: at least two seeds are needed for an interval")
    runs = [s[label]["run_dir"] for s in seeds for label in (PRE, RANDOM)]
    if len({os.path.realpath(r) for r in runs}) != len(runs):
        raise FindingsError("--landscape_dirs: a run appears twice; each folder must pair "
                            "runs of its own seed")
    steps = {tuple(s[label]["steps"]) for s in seeds for label in (PRE, RANDOM)}
    if len(steps) != 1:
        raise FindingsError("--landscape_dirs: the runs were evaluated at different steps "
                            f"({sorted(steps)}): compare runs of the same budget")
    return seeds


def main(args, command):
    """Reads the folders, writes landscape_findings.json, hao.md and convergence.png;
    `command` is how it was called, recorded in both files."""
    seeds = _read_seeds([f for f in args.landscape_dirs.split(",") if f])
    claims = summarise(seeds)
    pre0 = seeds[0][PRE]
    config = pre0["config"]
    experiment = {"task": config["task"], "train_examples": config.get("max_train_examples"),
                  "steps": pre0["steps"][-1], "max_seq_length": config.get("max_seq_length"),
                  "seeds": [s[PRE]["seed"] for s in seeds]}
    os.makedirs(args.output_dir, exist_ok=True)
    atomic_write_json(os.path.join(args.output_dir, "landscape_findings.json"),
                      {"command": command, "experiment": experiment, "claims": claims})
    atomic_write_text(os.path.join(args.output_dir, "hao.md"), markdown(seeds, claims, command))
    plot_convergence(seeds, os.path.join(args.output_dir, "convergence.png"))
    print(f"landscape_findings: {args.output_dir}: {sum(map(len, claims.values()))} "
          f"measurements of {len(claims)} claims over {len(seeds)} seeds")
    return 0
