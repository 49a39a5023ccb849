"""Fine-tuning stability (Dodge et al. 2020, Mosbach et al. 2021, Zhang et al. 2021): how
often runs fail, where the spread over seeds comes from, and the recipes that cure it.

    python -m kerasbert.experiments stability --task=rte --data_dir=../shared/data/glue/RTE \
        --max_train_examples=1000 --max_seq_length=64 --learning_rate=2e-5 \
        --seeds=1,2,3,4,5,6,7,8,9,10 --recipes=bert,mosbach,zhang --grid_seeds=1,2,3,4,5 \
        --stop_early_seeds=31,...,70 --stop_early_at=0.25 --continue_best=5 \
        --plane --output_dir=runs/stability-rte

Takes every `kerasbert.main` flag (the recipes change only what they name). Recipes, each a
row of runs over --seeds in `<output_dir>/<recipe>/seed-<n>/`:
- bert: google-research/bert's optimizer, no bias correction (--adam_bias_correction=false),
  --num_train_epochs (default the task's 3), warm-up --warmup_proportion;
- mosbach: bias correction on and --long_epochs (default twice --num_train_epochs), the
  same warm-up (Mosbach et al.'s recipe, its epochs scaled to the budget);
- zhang: bias correction on and the top --reinit_layers (default 2) layers and the pooler
  re-initialised (--reinit_top_layers), --num_train_epochs.
--grid_seeds: every (data order, head initialisation) pair of these seeds on the bert
recipe, dropout at --seed, in `<output_dir>/grid/order-<d>-init-<i>/` (Dodge et al.'s
split of the variance; 5 × 5 at least for a verdict). --stop_early_seeds with
--stop_early_at and --continue_best: start-many-stop-early on the bert recipe in
`<output_dir>/stop_early/` (kerasbert/stop_early.py). --plane: the three-point landscape
(`python -m kerasbert.landscape --mode=three_point,hessian,sharpness`) through the
pre-trained encoder, the bert recipe's lowest failed run and its median successful run,
both trained again with their trajectory (which the landscape reads) in `plane/runs/`.

Writes `stability.md` and `stability.json`: the recipes' table (kerasbert/restarts.py: n,
mean ± std, 95% interval, failure rate with its Clopper–Pearson interval, the paired
difference to bert) and `evp.*` beside it; per recipe the successful runs' mean ± std,
Levene's test (Brown–Forsythe) of its variance against bert's; the grid's variance split;
the gradient-norm signature (failed vs successful runs' last-epoch gradient norm, per
group); the stop-early campaign against bert's expected best of as many full runs' steps;
the plane's barrier; and each recipe's and the grid's wall time. Finished runs are
reused. Importing this module loads no TensorFlow.
"""

import dataclasses
import glob
import math
import os
import subprocess
import sys

import numpy as np

from kerasbert import restarts, run_folder
from kerasbert.errors import InputError
from kerasbert.experiments import runner
from kerasbert.experiments.claim_verdicts import NO_VERDICT
from kerasbert.io_utils import atomic_write_json, read_json_object

BERT, MOSBACH, ZHANG = "bert", "mosbach", "zhang"
RECIPES = (BERT, MOSBACH, ZHANG)
GRID = "grid"
STOP_EARLY = "stop_early"
PLANE = "plane"
TOTAL = "grad_norm/total"


def define_flags(flag_values):
    from absl import flags

    if "recipes" in flag_values:  # run twice in one process: defined once
        return
    flags.DEFINE_list("recipes", list(RECIPES), "Rows of runs over --seeds: "
                      + ", ".join(RECIPES) + " (see --helpfull of this module).",
                      flag_values=flag_values)
    flags.DEFINE_float("long_epochs", None, "The mosbach recipe's epochs (default: twice "
                       "--num_train_epochs).", flag_values=flag_values)
    flags.DEFINE_integer("reinit_layers", 2, "The zhang recipe's re-initialised top layers.",
                         flag_values=flag_values)
    flags.DEFINE_list("grid_seeds", [], "Seeds for the data order × head initialisation grid "
                      "on the bert recipe (every pair; none: no grid).", flag_values=flag_values)
    flags.DEFINE_list("stop_early_seeds", [], "Seeds of the start-many-stop-early campaign on "
                      "the bert recipe (with --stop_early_at and --continue_best).",
                      flag_values=flag_values)
    flags.DEFINE_boolean("plane", False, "Also the three-point landscape through the "
                         "pre-trained encoder, a failed and a successful bert run.",
                         flag_values=flag_values)


# --- The plan ------------------------------------------------------------------------------

def recipe_changes(name, base, long_epochs=None, reinit_layers=2):
    """The RunConfig fields a recipe sets (`base` resolved: its epochs are the task's)."""
    epochs = base.num_train_epochs
    if name == BERT:
        return {"adam_bias_correction": False}
    if name == MOSBACH:
        return {"adam_bias_correction": True,
                "num_train_epochs": long_epochs if long_epochs else 2 * epochs}
    if name == ZHANG:
        return {"adam_bias_correction": True, "reinit_top_layers": reinit_layers}
    raise InputError(f"--recipes: {name!r} is not a recipe; choose from {', '.join(RECIPES)}")


def plan_rows(base, task, seeds, recipes, long_epochs=None, reinit_layers=2):
    """(label, {seed: config}) per recipe, in `<output_dir>/<recipe>/`."""
    if not recipes:
        raise InputError("--recipes: give at least one of " + ", ".join(RECIPES))
    if len(set(recipes)) != len(recipes):
        raise InputError(f"--recipes: {','.join(recipes)} names a recipe twice")
    if long_epochs is not None and long_epochs <= 0:
        raise InputError(f"--long_epochs={long_epochs}: must be positive")
    resolved = base.resolved(task)
    return [(name, runner.seed_runs(base, task, os.path.join(base.output_dir, name), seeds,
                                    **recipe_changes(name, resolved, long_epochs,
                                                     reinit_layers)))
            for name in recipes]


def plan_grid(base, task, grid_seeds):
    """{(order seed, init seed): config} of the bert recipe, dropout at --seed."""
    if len(grid_seeds) == 1:
        raise InputError("--grid_seeds: give at least two seeds (a grid of one is no split)")
    return {(d, i): dataclasses.replace(
        base, seed=base.seed, data_order_seed=d, head_init_seed=i, dropout_seed=None,
        vary_seed="all", output_dir=os.path.join(base.output_dir, GRID,
                                                 f"order-{d}-init-{i}"),
        overwrite_output_dir=False, **recipe_changes(BERT, base)).resolved(task)
        for d in grid_seeds for i in grid_seeds}


# --- Reading the runs ----------------------------------------------------------------------

def last_grad_norms(run_dir):
    """The last epoch's mean gradient norm per group (history.csv's grad_norm/<group>), {}
    when the run recorded none."""
    history = run_folder.read_run_history(run_dir)
    for row in reversed(history):
        norms = {k.split("/", 1)[1]: float(v) for k, v in row.items()
                 if k.startswith("grad_norm/") and v not in ("", None)}
        if norms:
            return norms
    return {}


def finished_values(row):
    """A collected row's dev values of the runs that finished, in seed order."""
    return [v for v in row["values"].values() if v is not None]


def recipe_stability(row, bert_row, greater):
    """One recipe's failures, successful runs, Levene against bert and EVP points."""
    from kerasbert.analysis import evp, stability

    values = finished_values(row)
    failures = restarts.failure_summary(row)
    out = {"label": row["label"], "n": len(values), "failures": failures}
    if bert_row is not None and bert_row is not row:
        other = finished_values(bert_row)
        if len(values) >= 2 and len(other) >= 2:
            out["levene_vs_bert"] = stability.levene(values, other)
    if values:
        out["evp"] = {p["n"]: p["expected"] for p in evp.curve(values, greater, resamples=0)
                      if p["n"] in (1, 5, 10, 20, len(values))}
    return out


def grad_signature(collected):
    """Failed vs successful runs' last-epoch gradient norms (every recipe's runs pooled):
    per group the geometric-mean ratio failed / successful with its interval."""
    from kerasbert.analysis import stability

    failed, kept = [], []
    for row in collected:
        for seed, verdict in (row.get("failure_checks") or {}).items():
            norms = last_grad_norms(row["dirs"][seed])
            if norms and verdict is not None:
                (failed if verdict else kept).append(norms)
    out = {"failed_runs": len(failed), "successful_runs": len(kept), "groups": {},
           "total": {"failed": [n["total"] for n in failed if n.get("total", 0) > 0],
                     "successful": [n["total"] for n in kept if n.get("total", 0) > 0]}}
    if not failed or not kept:
        return out
    for group in failed[0]:
        a = [n[group] for n in failed if n.get(group, 0) > 0]
        b = [n[group] for n in kept if n.get(group, 0) > 0]
        if a and b:
            out["groups"][group] = stability.norm_ratio(a, b)
    return out


def wall_times(groups):
    """Per group of runs ({label: [run folder]}), the runs' wall time as their history.csv
    records it (training and dev evaluation, every process that trained the run, their
    starts not counted): {label:
    {"runs", "median", "min", "max", "total"}} in seconds, over the runs that recorded one."""
    from kerasbert import evp_report

    out = {}
    for label, dirs in groups.items():
        seconds = sorted(c for c in (evp_report.run_cost(d)["seconds"] for d in dirs)
                         if c is not None)
        if seconds:
            out[label] = {"runs": len(seconds), "median": float(np.median(seconds)),
                          "min": seconds[0], "max": seconds[-1], "total": float(sum(seconds))}
    return out


def grid_split(grid, metric):
    from kerasbert.analysis import stability

    seeds = sorted({d for d, _ in grid})
    values = [[run_folder.read_metrics(grid[(d, i)].output_dir).get(metric) for i in seeds]
              for d in seeds]
    if any(v is None for r in values for v in r):
        return None
    return {"seeds": seeds, "values": values, **stability.seed_grid_components(values)}


def plane_pair(row, greater):
    """(failed run folder, successful run folder) for the plane: the lowest-scoring failed
    run and the median successful run of the row; None without one of each."""
    checks = row.get("failure_checks") or {}
    failed = [s for s, f in checks.items() if f and row["values"].get(s) is not None]
    kept = sorted((row["values"][s], s) for s, f in checks.items()
                  if f is False and row["values"].get(s) is not None)
    if not failed or not kept:
        return None
    worst = (min if greater else max)(failed, key=lambda s: row["values"][s])
    return row["dirs"][worst], row["dirs"][kept[(len(kept) - 1) // 2][1]]


# The landscape reads a run's trajectory (θ0 at step 0, θ1 at the end); the recipes' runs
# record none (90 MB a checkpoint), so the plane's two runs are trained again with one, in
# <output_dir>/plane/runs/. CPU runs are deterministic: a replay must reach its run's value.
REPLAYS = "runs"
REPLAY_EVERY = 10 ** 9  # no checkpoint between θ0 and θ1
# The claim needs λ_max and ε-sharpness at each minimum, not the Hessian's trace: no
# Hutchinson probes, one eigenvalue (each Hessian-vector product is ~5 forward passes).
PLANE_FLAGS = ("--mode=three_point,hessian,sharpness", "--top_k=1", "--hutchinson_probes=0")


def replay_with_trajectory(config, output_dir, metric, execute):
    """The run of `config` trained again in `<output_dir>/plane/runs/<its folder name>` with
    its trajectory recorded (reused when finished); {"run", "replay", "value",
    "replay_value", "failed", "replay_failed"}."""
    folder = os.path.join(output_dir, PLANE, REPLAYS, os.path.basename(config.output_dir))
    if not run_folder.read_metrics(folder):
        execute(dataclasses.replace(config, output_dir=folder, overwrite_output_dir=False,
                                    save_trajectory_every=REPLAY_EVERY))
    check = run_folder.read_failure_check(config.output_dir) or {}
    again = run_folder.read_failure_check(folder) or {}
    return {"run": config.output_dir, "replay": folder,
            "value": run_folder.read_metrics(config.output_dir).get(metric),
            "replay_value": run_folder.read_metrics(folder).get(metric),
            "failed": check.get("failed"), "replay_failed": again.get("failed")}


def run_plane(pair, output_dir, log=print):
    """The three-point landscape through θ0 and the pair (run folders with a trajectory), in
    its own process; its three_point.json, or None when it failed."""
    folder = os.path.join(output_dir, PLANE)
    summary = os.path.join(folder, "three_point.json")
    if not os.path.isfile(summary):
        command = [sys.executable, "-m", "kerasbert.landscape", f"--run_dir={pair[0]}",
                   f"--compare_run_dir={pair[1]}", *PLANE_FLAGS, f"--output_dir={folder}"]
        log("stability: the plane: " + " ".join(command))
        if subprocess.run(command, check=False).returncode != 0:
            log("stability: the plane's landscape command failed; the rest is reported")
            return None
    return read_json_object(summary)


# --- The papers' claims, as docs/figures/stability/PLAN.md decides them --------------------

FINDINGS = "stability_findings.json"  # read by `python -m kerasbert.experiments findings`
VARIANCE_CLAIMS = {MOSBACH: "mosbach-variance", ZHANG: "zhang-variance"}
RATIO_BAND = (0.25, 4.0)  # "comparable": E[MS order] / E[MS init] within a factor of 4
NORM_RATIO_BELOW = 0.1  # "≫ smaller": at least 10× smaller


def _measurement(measure, n, effect, low, high, unit, points, p, test, verdict, note):
    return {"measure": measure, "n": n, "effect": effect, "low": low, "high": high,
            "std": None, "unit": unit, "points": points, "p": p, "test": test,
            "verdict": verdict, "note": note}


def _interval_verdict(low, high, above, below=None):
    """supported / contradicted / not distinguishable of an interval against the claim's
    region: `above` (low end beyond it supports) or, with `below`, a band [above, below]
    the whole interval must lie in (lying wholly outside it contradicts)."""
    if below is None:
        return ("supported" if low > above else "contradicted" if high < above
                else "not distinguishable")
    if above <= low and high <= below:
        return "supported"
    if high < above or low > below:
        return "contradicted"
    return "not distinguishable"


def _decided(verdict_of):
    return lambda low, high: verdict_of(low, high) != "not distinguishable"


def failure_rate_claim(bert_row, mosbach_row):
    """Claim 1: BERT's failure rate − Mosbach's, Newcombe's interval; > 0 supports."""
    from kerasbert.analysis import stability

    a, b = restarts.failure_summary(bert_row), restarts.failure_summary(mosbach_row)
    if a is None or b is None:
        return None
    at = (lambda level: tuple(stability.failure_rate_difference(
        a["count"], a["n"], b["count"], b["n"], level)[k] for k in ("low", "high")))
    d = stability.failure_rate_difference(a["count"], a["n"], b["count"], b["n"])
    verdict_of = (lambda low, high: _interval_verdict(low, high, 0.0))
    verdict = verdict_of(d["low"], d["high"])
    return _measurement(
        "failure rate bert − mosbach", a["n"] + b["n"], d["difference"], d["low"], d["high"],
        "failure rate", True, stability.decision_level(at, _decided(verdict_of)),
        "Newcombe interval", verdict,
        f"{a['count']}/{a['n']} bert runs and {b['count']}/{b['n']} mosbach runs failed; "
        "supported when the 95% Newcombe interval of the difference excludes 0 above")


def variance_claim(bert_row, row):
    """Claims 2 and 3: Levene (Brown–Forsythe) of all runs, the recipe against bert."""
    from kerasbert.analysis import stability

    a = finished_values(bert_row)
    b = finished_values(row)
    if len(a) < 2 or len(b) < 2:
        return None
    test = stability.levene(b, a)
    std_a, std_b = (float(np.std(x, ddof=1)) for x in (a, b))
    ratio = std_a / std_b if std_b > 0 else math.inf
    if test["p"] is None or test["p"] >= 0.05:
        verdict = "not distinguishable"
    else:
        verdict = "supported" if std_b < std_a else "contradicted"
    p = "–" if test["p"] is None else f"{test['p']:.3g}"
    return _measurement(
        f"std bert / std {row['label']}", len(a) + len(b), ratio, None, None,
        f"× (std bert / std {row['label']})", False, test["p"], "Levene (Brown–Forsythe)",
        verdict, f"std {100 * std_a:.2f} (bert) vs {100 * std_b:.2f} ({row['label']}) "
        f"points; Levene W {test['W'] if test['W'] is None else round(test['W'], 3)}, "
        f"p {p}; supported when p < 0.05 with the smaller std for {row['label']}")


def mean_claim(bert_row, row):
    """Claim 4: mean(zhang) − mean(bert) over all runs, Welch's interval; > 0 supports."""
    from scipy import stats as scipy_stats

    from kerasbert.analysis import stats

    a = finished_values(row)
    b = finished_values(bert_row)
    if len(a) < 2 or len(b) < 2:
        return None
    w = stats.welch_interval(a, b)
    p = float(scipy_stats.ttest_ind(a, b, equal_var=False).pvalue)
    return _measurement(
        f"mean {row['label']} − mean bert", len(a) + len(b), w["difference"], w["low"],
        w["high"], "points", True, p if math.isfinite(p) else None, "Welch t",
        _interval_verdict(w["low"], w["high"], 0.0),
        "supported when the 95% Welch interval excludes 0 above")


def grid_claim(split):
    """Claim 5: E[MS data order] / E[MS init] of the grid within [1/4, 4] (F interval)."""
    from kerasbert.analysis import stability

    ratio = split["ratio"]
    if ratio["value"] is None:
        return None
    at = (lambda level: tuple(stability.seed_grid_components(split["values"], level)["ratio"][k]
                              for k in ("low", "high")))
    verdict_of = (lambda low, high: _interval_verdict(low, high, *RATIO_BAND))
    cells = split["shape"][0] * split["shape"][1]
    return {**_measurement(
        "E[MS data order] / E[MS init]", cells, ratio["value"], ratio["low"], ratio["high"],
        "× (mean-square ratio)", False, stability.decision_level(at, _decided(verdict_of)),
        "F interval", verdict_of(ratio["low"], ratio["high"]),
        f"{split['shape'][0]} × {split['shape'][1]} grid; supported when the 95% F interval "
        f"lies within [{RATIO_BAND[0]:g}, {RATIO_BAND[1]:g}], contradicted when wholly "
        "outside it" + _grid_reach(split["shape"])), "seeds": split["seeds"]}


def _grid_reach(shape, level=0.95):
    """A note when the grid's F interval (a fixed factor wide) cannot fit in the band, so
    that it could contradict the claim but never support it; names the levels that could."""
    from scipy import stats

    band = RATIO_BAND[1] / RATIO_BAND[0]
    tail = (1 - level) / 2
    width = stats.f.ppf(1 - tail, shape[0] - 1, shape[1] - 1) / stats.f.ppf(
        tail, shape[0] - 1, shape[1] - 1)
    if width <= band:
        return ""
    k = next(k for k in range(max(shape) + 1, 1000)
             if stats.f.ppf(1 - tail, k - 1, k - 1) ** 2 <= band)
    return (f"; a {shape[0]} × {shape[1]} grid's interval spans a factor of {width:.0f}, "
            f"wider than the band's {band:g}, so it can contradict the claim but not support "
            f"it ({k} × {k} can)")


def grad_norm_claim(grads):
    """Claim 6: failed / successful last-epoch total gradient norm (geometric means), Welch
    on logs; the high end below 0.1 supports; needs ≥ 2 failed and ≥ 2 successful runs."""
    from kerasbert.analysis import stability

    failed, kept = grads["total"]["failed"], grads["total"]["successful"]
    if len(failed) < 2 or len(kept) < 2:
        return None
    r = stability.norm_ratio(failed, kept)
    at = (lambda level: tuple(stability.norm_ratio(failed, kept, level)[k]
                              for k in ("low", "high")))
    verdict_of = (lambda low, high: "supported" if high < NORM_RATIO_BELOW else
                  "contradicted" if low > NORM_RATIO_BELOW else "not distinguishable")
    return _measurement(
        "gradient norm failed / successful", len(failed) + len(kept), r["ratio"], r["low"],
        r["high"], "× (geometric-mean ratio)", False,
        stability.decision_level(at, _decided(verdict_of)), "Welch t on logs",
        verdict_of(r["low"], r["high"]),
        f"{len(failed)} failed, {len(kept)} successful runs (every recipe's); supported when "
        f"the 95% interval lies below {NORM_RATIO_BELOW:g} (≥ 10× smaller)")


def barrier_claim(record):
    """Claim 7: how far the training loss rises above the failed run's end on the straight
    path to the successful one (the plane's path starts at the failed run). One pair a
    task: no interval and, as planned, no verdict."""
    barriers = (record or {}).get("barriers") or {}
    train, dev = barriers.get("train_loss"), barriers.get("dev_loss")
    if train is None:
        return None
    rise = train["max"] - train["start"]
    note = (f"on the straight path from the failed to the successful minimum the training "
            f"loss rises {rise:.3g} above the failed end at α = {train['alpha_of_max']:g} "
            f"(barrier {train['barrier']:.3g} above the line between the ends)")
    if dev is not None:
        note += f"; the dev loss {dev['max'] - max(dev['start'], dev['end']):.3g} above its higher end"
    note += "; one pair a task, so no interval and, as PLAN.md part 2 says, no verdict"
    measured = _measurement("training-loss rise above the failed end", 1, rise, None, None,
                            "training loss", False, None, None, NO_VERDICT, note)
    seeds = [_seed_of(r["replay"]) for r in record.get("replays") or []]  # failed, successful
    return {**measured, "seeds": seeds} if seeds and None not in seeds else measured


def _seed_of(run_dir):
    """N of a run folder named seed-N, else None."""
    name = os.path.basename(os.path.normpath(run_dir))
    return int(name[5:]) if name.startswith("seed-") and name[5:].isdigit() else None


def _campaign_against_restarts(summary, bert_values, greater):
    """(best, steps, full runs' worth, n, bert's E[best of n] point of evp.curve) of the
    stop-early campaign against n = ⌊its steps / one full run's⌋ of bert's runs; None
    where either is missing."""
    from kerasbert.analysis import evp

    compute = (summary or {}).get("compute", {})
    steps, runs = compute.get("steps"), compute.get("runs")
    full = compute["full_run_steps"] / runs if runs else None  # one full run's steps
    best = (summary or {}).get("best_value")
    if not (steps and full and bert_values and best is not None):
        return None
    n = max(1, math.floor(steps / full))
    return best, steps, steps / full, n, evp.curve(bert_values, greater, max_n=n)[-1]


def stop_early_claim(summary, bert_values, greater):
    """Claim 8: the campaign's best − bert's expected best of as many full runs (signed so
    that + is better), with that expectation's bootstrap interval. One campaign a task: no
    verdict, as planned."""
    found = _campaign_against_restarts(summary, bert_values, greater)
    if found is None:
        return None
    best, steps, runs, n, point = found
    sign = 1.0 if greater else -1.0
    ends = [sign * (best - point["expected"])] + [
        None if x is None else sign * (best - x) for x in (point["high"], point["low"])]
    low, high = (None, None) if None in ends[1:] else sorted(ends[1:])
    note = (f"the campaign's best run {best * 100:.1f} for {steps} optimizer steps "
            f"({runs:.2f} full runs) against bert's expected best of {n} full runs "
            f"{point['expected'] * 100:.1f} (95% bootstrap interval of that expectation); "
            "one campaign a task, so, as PLAN.md part 2 says, no verdict")
    measured = _measurement(f"campaign's best − bert's expected best of {n} full runs",
                            summary.get("compute", {}).get("runs", 0), ends[0], low, high,
                            "points", True, None, None, NO_VERDICT, note)
    seeds = [r.get("seed") for r in summary.get("runs") or []]
    return {**measured, "seeds": seeds} if seeds and None not in seeds else measured


def claim_measurements(collected, grads, split, plane=None, campaign=None, greater=True):
    """{claim id: measurement} of PLAN.md part 2's claims that these runs measure, in the
    shape `findings` reads (effect, interval, its own verdict and p-value; claims 7 and 8,
    from the plane's record and the stop-early campaign's summary, measured without one)."""
    rows = {r["label"]: r for r in collected}
    bert = rows.get(BERT)
    found = {}
    if bert is not None and MOSBACH in rows:
        found["mosbach-failure-rate"] = failure_rate_claim(bert, rows[MOSBACH])
    if bert is not None:
        for label, claim_id in VARIANCE_CLAIMS.items():
            if label in rows:
                found[claim_id] = variance_claim(bert, rows[label])
        if ZHANG in rows:
            found["zhang-mean"] = mean_claim(bert, rows[ZHANG])
    if split is not None:
        found["dodge-order-vs-init"] = grid_claim(split)
    found["mosbach-grad-norms"] = grad_norm_claim(grads)
    found["mosbach-barrier"] = barrier_claim(plane)
    if bert is not None:
        found["dodge-stop-early"] = stop_early_claim(campaign, finished_values(bert), greater)
    return {k: v for k, v in found.items() if v is not None}


# --- The report ----------------------------------------------------------------------------

def _pct(x):
    return "–" if x is None else f"{100 * x:.1f}"


def wall_time_markdown(times, totals=()):
    """The table of `wall_times`, plus `totals`: (label, runs, seconds) of work recorded as
    one sum (the stop-early campaign's, the plane's landscape)."""
    if not times:
        return ""
    lines = ["", "#### Wall time", "",
             "Per run as its history.csv records it: training and dev evaluation, summed "
             "over the processes of a resumed run (not their starts, nor the work a kill "
             "lost); a run that shared the machine or was paused counts that time.",
             "", "| runs | n | median s per run | min–max s | total h |", "|---|---|---|---|---|"]
    for label, t in times.items():
        lines.append(f"| {label} | {t['runs']} | {t['median']:.0f} | {t['min']:.0f}–"
                     f"{t['max']:.0f} | {t['total'] / 3600:.2f} |")
    total = sum(t["total"] for t in times.values())
    runs = sum(t["runs"] for t in times.values())
    for label, n, seconds in totals:
        total, runs = total + seconds, runs + n
        lines.append(f"| {label} | {n} | | | {seconds / 3600:.2f} |")
    lines.append(f"| all | {runs} | | | {total / 3600:.2f} |")
    return "\n".join(lines) + "\n"


def stability_markdown(per_recipe, grads, grid, stop_early, plane, scale):
    lines = ["", "#### Per recipe", "",
             "| recipe | n | failed | failure rate [95% CP] | successful: mean ± std | "
             "Levene vs bert: W, p | E[best of 1 / 5 / 10 / 20] |", "|---|---|---|---|---|---|---|"]
    for r in per_recipe:
        f = r["failures"]
        failed = "–" if f is None else f"{f['count']}/{f['n']}"
        rate = "–" if f is None else f"{_pct(f['rate'])} [{_pct(f['low'])}, {_pct(f['high'])}]"
        s = f and f["successful"]
        kept = ("–" if not s else f"{s['mean'] * scale:.1f}"
                + ("" if s["std"] is None else f" ± {s['std'] * scale:.1f}"))
        lev = r.get("levene_vs_bert")
        lev = "–" if lev is None or lev["W"] is None else f"{lev['W']:.2f}, {lev['p']:.3f}"
        evp_points = r.get("evp", {})
        best = " / ".join("–" if evp_points.get(n) is None else f"{evp_points[n] * scale:.1f}"
                          for n in (1, 5, 10, 20))
        lines.append(f"| {r['label']} | {r['n']} | {failed} | {rate} | {kept} | {lev} | "
                     f"{best} |")
    lines += ["", "#### Gradient norms: failed vs successful runs (last epoch's mean)", ""]
    if not grads["groups"]:
        lines.append(f"Not measured: {grads['failed_runs']} failed and "
                     f"{grads['successful_runs']} successful runs recorded gradient norms.")
    else:
        lines += [f"{grads['failed_runs']} failed, {grads['successful_runs']} successful runs; "
                  "geometric-mean ratio failed / successful, 95% interval (Welch, log scale).",
                  "", "| group | ratio | 95% interval |", "|---|---|---|"]
        for group, r in grads["groups"].items():
            interval = ("–" if r["low"] is None else f"[{r['low']:.3g}, {r['high']:.3g}]")
            lines.append(f"| {group} | {r['ratio']:.3g} | {interval} |")
    if grid is not None:
        v, sh, ratio = grid["variance"], grid["share"], grid["ratio"]
        lines += ["", f"#### Data order vs initialisation ({grid['shape'][0]} × "
                  f"{grid['shape'][1]} grid, bert recipe, dropout at --seed)", "",
                  "| part | variance (× 100²) | share | F test p |", "|---|---|---|---|"]
        for part in ("data_order", "init", "residual"):
            p = grid["test"].get(part, {}).get("p") if part != "residual" else None
            lines.append(f"| {part.replace('_', ' ')} | {v[part] * scale ** 2:.2f} | "
                         f"{_pct(sh[part])}% | {'–' if p is None else f'{p:.3f}'} |")
        if ratio["value"] is not None:
            lines += ["", f"Mean-square ratio data order / init: {ratio['value']:.2f} "
                      f"[{ratio['low']:.2f}, {ratio['high']:.2f}] (95%, F)."]
    if stop_early is not None:
        lines += ["", "#### Start many, stop early (bert recipe)", "", stop_early]
    if plane is not None:
        lines += ["", "#### The failed run's plane", "", plane]
    return "\n".join(lines) + "\n"


def campaign_summary(output_dir):
    """The stop-early campaign's stop_early.json, or None where none ran."""
    path = os.path.join(output_dir, STOP_EARLY, "stop_early.json")
    return read_json_object(path) if os.path.isfile(path) else None


def _campaign_cost(summary):
    """(runs, seconds) of the stop-early campaign as its summary records them (every
    stopped stretch and continuation), or (0, None)."""
    compute = (summary or {}).get("compute", {})
    return compute.get("runs", 0), compute.get("seconds")


def stop_early_text(summary, bert_values, greater, scale):
    """The campaign's best against bert's expected best of as many full runs' steps."""
    if summary is None:
        return None
    text = f"See [stop_early.md]({STOP_EARLY}/stop_early.md)."
    found = _campaign_against_restarts(summary, bert_values, greater)
    if found is not None:
        best, steps, runs, n, point = found
        text += (f" Best continued run: {best * scale:.1f}, for {steps} optimizer steps "
                 f"= {runs:.1f} full runs; bert's expected best of {n} full runs: "
                 f"{point['expected'] * scale:.1f}.")
    return text


def plane_text(record):
    if record is None:
        return None
    replays = record.get("replays") or []
    same = all(r["replay_value"] == r["value"] for r in replays)
    parts = [f"{name.replace('_', ' ')}: barrier {b['barrier']:.4f} at α = {b['alpha']:g} "
             f"(highest point {b['above_endpoints']:+.4f} above the higher end)"
             for name, b in (record.get("barriers") or {}).items()]
    # the landscape labels a run by its folder (seed-N); the replays say which one failed
    verdicts = {os.path.basename(r["replay"]): "failed" if r["replay_failed"] else "successful"
                for r in replays}
    for label, c in (record.get("curvature") or {}).items():
        name = next((f"the {v} run ({folder})" for folder, v in verdicts.items()
                     if f"({folder})" in label), label)
        measures = ([f"λ_max {c['lambda_max']:.4g}"] if "lambda_max" in c else []) + [
            f"ε-sharpness {x['keskar']:.3g}% at ε = {x['epsilon']:g}"
            for x in c.get("sharpness") or []]
        if measures:
            parts.append(f"{name}: " + ", ".join(measures))
    text = f"See [three_point.md]({PLANE}/three_point.md). " + "; ".join(parts) + "."
    if replays:
        text += (" Its two runs were trained again with their trajectory (the recipes' runs "
                 f"record none) in {PLANE}/{REPLAYS}/: "
                 + ", ".join(f"{os.path.basename(r['run'])} {r['value']:.4f} → "
                             f"{r['replay_value']:.4f}" for r in replays)
                 + (" (the same dev values)." if same else " (dev values differ)."))
    return text


def draw_plane(output_dir, rows, bert_row, metric, greater, execute=None, log=print):
    """The plane through θ0, bert's lowest failed and median successful run, both replayed
    with their trajectory; its three_point.json with "replays" added, or None (no pair, a
    replay that does not reproduce its run's verdict, or the landscape failed)."""
    pair = plane_pair(bert_row, greater) if bert_row is not None else None
    if pair is None:
        return None
    if execute is None:
        from kerasbert import run as run_lib

        execute = run_lib.execute_in_own_process
    configs = {c.output_dir: c for c in dict(rows)[BERT].values()}
    replays = [replay_with_trajectory(configs[d], output_dir, metric, execute) for d in pair]
    for r in replays:
        if r["replay_failed"] != r["failed"]:
            log(f"stability: the plane is not drawn: {r['replay']} ended at "
                f"{r['replay_value']} where {r['run']} ended at {r['value']}")
            return None
    record = run_plane([r["replay"] for r in replays], output_dir, log)
    return None if record is None else {**record, "replays": replays}


def main(argv):
    from kerasbert.main import FLAGS

    runner.no_arguments(argv)
    task, base, seeds = runner.from_flags(FLAGS)
    campaign_base, base = base, dataclasses.replace(base, stop_early_at=None)  # rows: full runs
    rows = plan_rows(base, task, seeds, FLAGS.recipes, FLAGS.long_epochs, FLAGS.reinit_layers)
    grid_seeds = restarts.parse_seeds(FLAGS.grid_seeds, None, "--grid_seeds") \
        if FLAGS.grid_seeds else []
    grid = plan_grid(base, task, grid_seeds) if grid_seeds else {}
    stop_seeds = (restarts.parse_seeds(FLAGS.stop_early_seeds, None, "--stop_early_seeds")
                  if FLAGS.stop_early_seeds else [])
    if stop_seeds and (campaign_base.stop_early_at is None or FLAGS.continue_best is None):
        raise InputError("--stop_early_seeds: give --stop_early_at=F and --continue_best=K too")
    if not stop_seeds and campaign_base.stop_early_at is not None:
        raise InputError(f"--stop_early_at={campaign_base.stop_early_at}: the recipes' runs "
                         "train to the end; it is for --stop_early_seeds")
    runner.run_rows(rows + ([(GRID, dict(enumerate(grid.values())))] if grid else []),
                    "stability", BERT if BERT in FLAGS.recipes else None)
    if stop_seeds:
        from kerasbert import stop_early
        from kerasbert import run as run_lib

        campaign = dataclasses.replace(
            campaign_base, output_dir=os.path.join(base.output_dir, STOP_EARLY),
            overwrite_output_dir=False, **recipe_changes(BERT, base.resolved(task)))
        stop_early.run_stop_early(campaign, FLAGS.continue_best, seeds=stop_seeds,
                                  execute=lambda config, _: run_lib.execute_in_own_process(config))
    write_outputs(base.output_dir, task, rows, grid, seeds, FLAGS.plane)
    return 0


def write_outputs(output_dir, task, rows, grid, seeds, plane=False):
    from kerasbert import metrics

    metric = task.main_metric
    greater = metrics.greater_is_better(metric, task, getattr(task, "registered_kind", None))
    scale = 100.0  # every metric a stability task reports is a share or a correlation
    baseline = BERT if any(label == BERT for label, _ in rows) else None
    # Read once: the table and the stability sections come from the same collected rows.
    collected = restarts.collect(
        [{"label": label, "runs": {s: c.output_dir for s, c in runs.items()}}
         for label, runs in rows], metric, task, task.dev_splits[0])
    table = restarts.summarize(collected, metric, baseline, greater_is_better=greater)
    bert_row = next((r for r in collected if r["label"] == BERT), None)
    per_recipe = [recipe_stability(r, bert_row, greater) for r in collected]
    grads = grad_signature(collected)
    split = grid_split(grid, metric) if grid else None
    bert_values = finished_values(bert_row) if bert_row else []
    campaign = campaign_summary(output_dir)  # read once: its text and its cost
    early = stop_early_text(campaign, bert_values, greater, scale)
    record = draw_plane(output_dir, rows, bert_row, metric, greater) if plane else None
    first = rows[0][1][seeds[0]]
    header = (f"### {task.name}: fine-tuning stability over seeds {', '.join(map(str, seeds))}"
              f"\n\nData {first.data_dir or 'bundled sample'} (max_train_examples "
              f"{first.max_train_examples}), lr {first.learning_rate:g}, batch "
              f"{first.train_batch_size}, max_seq_length {first.max_seq_length}; recipes: "
              + "; ".join(f"{label}: {runs[seeds[0]].num_train_epochs:g} epochs, bias "
                          f"correction {'on' if runs[seeds[0]].adam_bias_correction else 'off'}"
                          + (f", re-init top {runs[seeds[0]].reinit_top_layers}"
                             if runs[seeds[0]].reinit_top_layers else "")
                          for label, runs in rows) + ".\n\n")
    replays = [os.path.dirname(h) for h in sorted(glob.glob(
        os.path.join(output_dir, PLANE, REPLAYS, "*", "history.csv")))]
    times = wall_times({**{r["label"]: list(r["dirs"].values()) for r in collected},
                        **({GRID: [c.output_dir for c in grid.values()]} if grid else {}),
                        **({"plane replays": replays} if replays else {})})
    totals = [(f"{label} ({name})", n, seconds) for label, name, n, seconds in (
        ("start many, stop early", f"{STOP_EARLY}/stop_early.json", *_campaign_cost(campaign)),
        ("the plane's landscape", f"{PLANE}/three_point.json", 1, (record or {}).get("seconds")))
        if seconds is not None]
    text = (header + restarts.markdown(table, scale=scale, row_header="recipe")
            + stability_markdown(per_recipe, grads, split, early,
                                 plane_text(record), scale)
            + wall_time_markdown(times, totals))
    experiment = restarts.experiment(first, seeds, recipes=[label for label, _ in rows])
    runner.publish(output_dir, "stability", {task.name: table}, text, experiment)
    extra = {"per_recipe": per_recipe, "grad_norms": grads, "grid": split,
             "plane": record, "stop_early": early, "wall_seconds": times}
    atomic_write_json(os.path.join(output_dir, "stability_analysis.json"), extra)
    atomic_write_json(os.path.join(output_dir, FINDINGS), {
        "command": restarts.command_line(), "experiment": experiment,
        "claims": claim_measurements(collected, grads, split, record, campaign, greater)})
    return text


run = runner.command(main, define_flags)
