"""Learning-rate sweep with random restarts, best run picked on dev (BERT paper, section 4).

    python -m kerasbert.main --task=rte --learning_rates=5e-5,4e-5,3e-5,2e-5 --num_restarts=3 \
        --output_dir=runs/rte-sweep

Every (learning rate, restart) pair is an ordinary `main.execute` run in
`<output_dir>/runs/lr<rate>-r<restart>/`. Restart i uses seed `--seed + i` (data shuffling,
dropout, head initialisation) and the same `--init_checkpoint`; every learning rate sees
the same seeds. The best run on dev by the task's main metric keeps everything (weights,
checkpoints, predictions); the others keep only their metrics, history, config and report.
`sweep.json`, `sweep.csv`, `sweep.png` and `report.md` summarise the grid and are rewritten
after every run. Started again with the same command, a sweep skips finished runs
(metrics.json present), resumes an unfinished one from its last epoch's checkpoint, and
refuses a run folder that was trained with other settings.
"""

import csv
import dataclasses
import io
import json
import math
import os
import shutil
import statistics

from kerasbert import report
from kerasbert.config import RUN_CONFIG
from kerasbert.errors import InputError, TrainingError
from kerasbert.io_utils import (
    atomic_write_json,
    atomic_write_text,
    read_history,
    read_json_object,
)

RUNS = "runs"
SWEEP_JSON, SWEEP_CSV, SWEEP_PNG = "sweep.json", "sweep.csv", "sweep.png"
FAILED = "failed.json"
# What a pruned (not best) run keeps: small files that say what it did.
KEEP = set(report.RUN_FILES) | {"tensorboard"}
# Main metrics are all "higher is better" today; these words mark the opposite.
LOWER_IS_BETTER = ("loss", "perplexity", "error", "mse")
# Settings that may change between a stopped sweep and its resumption.
RESUMABLE_CHANGES = {"output_dir", "overwrite_output_dir", "export_dir", "deterministic"}


@dataclasses.dataclass(frozen=True)
class PlannedRun:
    name: str
    learning_rate: float
    restart: int
    seed: int
    config: object  # RunConfig


def parse_learning_rates(values):
    """`--learning_rates` (a list of strings, or one comma-separated string) as floats."""
    if values is None:
        return ()
    if isinstance(values, str):
        values = values.split(",")
    rates = []
    for text in (str(v).strip() for v in values):
        if not text:
            continue
        try:
            rate = float(text)
        except ValueError:
            raise InputError(f"--learning_rates: {text!r} is not a number") from None
        if not math.isfinite(rate) or rate <= 0:
            raise InputError(f"--learning_rates: {text} must be a positive number")
        if rate in rates:
            raise InputError(f"--learning_rates: {text} is given twice")
        rates.append(rate)
    return tuple(rates)


def run_name(learning_rate, restart):
    return f"lr{learning_rate:g}-r{restart}"


def plan_sweep(base, learning_rates, num_restarts):
    """One run per (learning rate, restart), learning rates outermost; restart i: seed + i."""
    if num_restarts < 1:
        raise InputError(f"--num_restarts={num_restarts}: must be a positive integer")
    runs = []
    for rate in learning_rates:
        for restart in range(num_restarts):
            name = run_name(rate, restart)
            config = dataclasses.replace(
                base, learning_rate=rate, seed=base.seed + restart,
                output_dir=os.path.join(base.output_dir, RUNS, name),
                overwrite_output_dir=False, export_dir=None)
            runs.append(PlannedRun(name, rate, restart, base.seed + restart, config))
    return runs


def higher_is_better(metric):
    return not any(word in metric.lower() for word in LOWER_IS_BETTER)


def _value(result, metric):
    value = (result.get("metrics") or {}).get(metric)
    return value if isinstance(value, (int, float)) and math.isfinite(value) else None


def select_best(results, metric):
    """The name of the best result by `metric` (dicts with name and metrics; failed or
    unfinished runs have none); the earliest wins a tie; None when nothing has a value."""
    sign = 1.0 if higher_is_better(metric) else -1.0
    best, best_value = None, None
    for result in results:
        value = _value(result, metric)
        if value is not None and (best is None or sign * value > sign * best_value):
            best, best_value = result["name"], value
    return best


def summarise(results, metric):
    """Per learning rate (in sweep order): restarts finished and failed, mean ± sample std
    and best of the metric over the finished restarts, and which run is the best."""
    rows = []
    for rate in dict.fromkeys(r["learning_rate"] for r in results):
        group = [r for r in results if r["learning_rate"] == rate]
        values = [v for v in (_value(r, metric) for r in group) if v is not None]
        best_run = select_best(group, metric)
        rows.append({
            "learning_rate": rate, "runs": len(group), "finished": len(values),
            "failed": sum(r["status"] == "failed" for r in group),
            "mean": statistics.fmean(values) if values else None,
            "std": statistics.stdev(values) if len(values) > 1 else (0.0 if values else None),
            "best": next((_value(r, metric) for r in group if r["name"] == best_run), None),
            "best_run": best_run,
        })
    return rows


# --- Run folders -------------------------------------------------------------------------

def run_status(run_dir):
    if os.path.isfile(os.path.join(run_dir, "metrics.json")):
        return "finished"
    if os.path.isfile(os.path.join(run_dir, FAILED)):
        return "failed"
    if os.path.isfile(os.path.join(run_dir, RUN_CONFIG)):
        return "unfinished"
    return "pending"


def check_same_settings(run):
    """A folder trained with other settings must not be counted (or resumed) as this run."""
    path = os.path.join(run.config.output_dir, RUN_CONFIG)
    if not os.path.isfile(path):
        return
    saved = read_json_object(path)
    wanted = json.loads(json.dumps(run.config.to_dict()))
    for key in sorted(set(saved) & set(wanted) - RESUMABLE_CHANGES):
        if saved[key] != wanted[key]:
            raise InputError(
                f"{path}: this run was made with {key}={saved[key]!r}, the sweep now asks for "
                f"{wanted[key]!r}; use another --output_dir, or --overwrite_output_dir to "
                "start the sweep over")


def prune(run_dir, metric):
    """Drops a run's large files (weights, checkpoints, encoder, predictions); keeps KEEP."""
    removed = []
    for name in sorted(os.listdir(run_dir)):
        if name in KEEP or name.startswith("."):
            continue
        path = os.path.join(run_dir, name)
        if os.path.isdir(path):
            shutil.rmtree(path)
            removed.append(name + "/")
        else:
            os.remove(path)
            removed.append(name)
    if removed:
        marker = os.path.join(run_dir, report.PRUNED)
        before = read_json_object(marker).get("removed", []) if os.path.isfile(marker) else []
        atomic_write_json(marker, {"removed": sorted(set(before) | set(removed))})
        report.write_run_report(run_dir, metric)
    return removed


def prepare_sweep_dir(base):
    """With --overwrite_output_dir the previous sweep's runs and summaries are removed;
    otherwise the folder is reused (that is how a stopped sweep resumes)."""
    root = base.output_dir
    if base.overwrite_output_dir and os.path.isdir(root):
        for name in (RUNS, SWEEP_JSON, SWEEP_CSV, SWEEP_PNG, report.REPORT):
            path = os.path.join(root, name)
            if os.path.isdir(path):
                shutil.rmtree(path)
            elif os.path.exists(path):
                os.remove(path)
    try:
        os.makedirs(os.path.join(root, RUNS), exist_ok=True)
    except OSError as e:
        raise InputError(f"--output_dir={root}: cannot write there ({e.strerror})") from None


# --- The sweep ---------------------------------------------------------------------------

def run_sweep(base, learning_rates, num_restarts, registry=None, execute=None, log=print):
    """Runs (or resumes) the grid; returns the summary written to sweep.json."""
    from kerasbert import main as main_lib
    from kerasbert import plugins

    registry = registry or plugins.registry()
    execute = execute or main_lib.execute
    rates = parse_learning_rates(learning_rates)
    if rates and base.learning_rate is not None:
        raise InputError(f"--learning_rate={base.learning_rate}: a sweep takes its learning "
                         "rates from --learning_rates; give one or the other")
    if not (base.do_train and base.do_eval):
        raise InputError("--do_eval: a sweep picks its best run on dev; it needs --do_train "
                         "and --do_eval")
    task = registry.task(base.task)
    base = base.resolved(task)
    export_dir = base.export_dir
    plan = plan_sweep(base, rates or (base.learning_rate,), num_restarts)
    metric = task.main_metric
    prepare_sweep_dir(base)
    for run in plan:  # every conflict is reported before anything trains
        check_same_settings(run)

    results = [{"name": r.name, "learning_rate": r.learning_rate, "restart": r.restart,
                "seed": r.seed, "dir": os.path.join(RUNS, r.name),
                "status": run_status(r.config.output_dir), "metrics": None} for r in plan]
    for i, (run, result) in enumerate(zip(plan, results)):
        out = run.config.output_dir
        where = f"kerasbert: sweep run {i + 1}/{len(plan)} {run.name}"
        if result["status"] == "finished":
            log(f"{where}: finished before, skipped")
        elif result["status"] == "failed":
            log(f"{where}: failed before ({read_json_object(os.path.join(out, FAILED))['error']}),"
                " skipped")
        else:
            log(f"{where}: learning rate {run.learning_rate:g}, seed {run.seed}"
                + (" (resuming)" if result["status"] == "unfinished" else ""))
            try:
                execute(run.config, registry)
                result["status"] = "finished"
            except TrainingError as e:  # e.g. a diverged restart: the sweep goes on
                atomic_write_json(os.path.join(out, FAILED), {"error": str(e)})
                result["status"] = "failed"
                log(f"{where}: failed: {e}")
        if result["status"] == "finished":
            result["metrics"] = read_json_object(os.path.join(out, "metrics.json"))
            result["metrics"].pop("phases", None)
        best = select_best(results, metric)
        for other, other_run in zip(results[:i + 1], plan):
            if other["name"] != best and other["status"] in ("finished", "failed"):
                prune(other_run.config.output_dir, metric)
        summary = write_summary(base, plan, results, metric, best)

    best = summary["best"]
    if best and os.path.exists(os.path.join(base.output_dir, RUNS, best, report.PRUNED)):
        log(f"kerasbert: the best run {best} was pruned by an earlier sweep over other "
            "learning rates; its weights are gone (rerun it alone to get them)")
    elif best and export_dir:
        from kerasbert.export.saved_model import export_run

        path = export_run(os.path.join(base.output_dir, RUNS, best), export_dir,
                          registry=registry)
        log(f"kerasbert: SavedModel of the best run in {path}")
    with open(os.path.join(base.output_dir, report.REPORT), encoding="utf-8") as f:
        log(f.read().split("\n## All runs")[0].rstrip())  # the headline and the table
    log(f"kerasbert: sweep summary in {os.path.join(base.output_dir, report.REPORT)}")
    return summary


def write_summary(base, plan, results, metric, best):
    summary = {
        "task": base.task, "metric": metric, "higher_is_better": higher_is_better(metric),
        "learning_rates": list(dict.fromkeys(r.learning_rate for r in plan)),
        "num_restarts": max(r.restart for r in plan) + 1, "seed": base.seed,
        "best": best, "runs": results, "per_learning_rate": summarise(results, metric),
    }
    atomic_write_json(os.path.join(base.output_dir, SWEEP_JSON), summary)
    write_sweep_report(base.output_dir)
    return summary


def write_sweep_report(sweep_dir):
    """sweep.csv, sweep.png and report.md from sweep.json and the runs' history files."""
    from kerasbert.analysis.report_plots import plot_sweep

    summary = read_json_object(os.path.join(sweep_dir, SWEEP_JSON))
    metric, runs, best = summary["metric"], summary["runs"], summary["best"]
    keys = list(dict.fromkeys([metric] + [k for r in runs for k in (r["metrics"] or {})]))
    seconds = {}
    curves = {}
    for r in runs:
        history = read_history(os.path.join(sweep_dir, r["dir"], "history.csv"))
        seconds[r["name"]] = history[-1].get("seconds", "") if history else ""
        curves[r["name"]] = [float(h[f"dev_{metric}"]) if h.get(f"dev_{metric}") else None
                             for h in history]

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["run", "learning_rate", "restart", "seed", "status", *keys,
                     "train_seconds", "best"])
    for r in runs:
        m = r["metrics"] or {}
        writer.writerow([r["name"], r["learning_rate"], r["restart"], r["seed"], r["status"],
                         *[m.get(k, "") for k in keys], seconds[r["name"]],
                         int(r["name"] == best)])
    atomic_write_text(os.path.join(sweep_dir, SWEEP_CSV), buffer.getvalue())

    plot_sweep([{**r, "value": _value(r, metric), "curve": curves[r["name"]],
                 "best": r["name"] == best} for r in runs],
               os.path.join(sweep_dir, SWEEP_PNG), metric,
               title=f"{summary['task']}: dev {metric} over learning rates and restarts")

    finished = sum(r["status"] == "finished" for r in runs)
    failed = sum(r["status"] == "failed" for r in runs)
    rates = summary["learning_rates"]
    title = (f"# Sweep: {summary['task']}, {len(rates)} learning rate"
             f"{'s' * (len(rates) > 1)} × {summary['num_restarts']} restart"
             f"{'s' * (summary['num_restarts'] > 1)}")
    lines = [title, "",
             f"{finished} of {len(runs)} runs finished" + (f", {failed} failed" if failed else "")
             + ". Restart i uses seed " + f"{summary['seed']} + i (data shuffling, dropout, head "
             "initialisation) from the same encoder checkpoint; every learning rate sees the "
             f"same seeds. Selection: dev {metric}, "
             + ("higher" if summary["higher_is_better"] else "lower") + " is better.", ""]
    if best:
        value = next(_value(r, metric) for r in runs if r["name"] == best)
        lines += [(f"**Best: [{best}]({RUNS}/{best}/report.md), dev {metric} = "
                   f"{report.fmt(value)}**. It is kept in full ({RUNS}/{best}/: weights, "
                   "encoder, checkpoints, predictions); the other runs keep their metrics, "
                   "history, config and report."), ""]
    lines += [f"## Dev {metric} per learning rate", "", report.markdown_table(
        ["learning rate", "restarts finished", "mean ± std", "best", "best run"],
        [[f"{s['learning_rate']:g}", f"{s['finished']}/{s['runs']}",
          "–" if s["mean"] is None else f"{report.fmt(s['mean'])} ± {report.fmt(s['std'])}",
          "–" if s["best"] is None else s["best"],
          "–" if s["best_run"] is None else s["best_run"] + (" ★" if s["best_run"] == best
                                                              else "")]
         for s in summary["per_learning_rate"]]),
        f"![dev {metric} per learning rate and restart]({SWEEP_PNG})", "",
        "## All runs", "", report.markdown_table(
            ["run", "learning rate", "seed", "status", *keys, "train s", "report"],
            [[r["name"], f"{r['learning_rate']:g}", r["seed"], r["status"],
              *[(r["metrics"] or {}).get(k, "") for k in keys], seconds[r["name"]],
              f"[report]({r['dir']}/report.md)" if r["status"] in ("finished", "failed")
              else "–"] for r in runs])]
    path = os.path.join(sweep_dir, report.REPORT)
    atomic_write_text(path, "\n".join(lines))
    return path
