"""Start many, stop early (Dodge et al. 2020): start N runs, stop each after a fraction of
its training steps, and continue only the K best on dev to the end.

    python -m kerasbert.main --task=rte --seeds=1,2,3,4,5,6,7,8 --stop_early_at=0.25 \\
        --continue_best=2 --output_dir=runs/rte-stop-early

The runs are a sweep's (kerasbert/sweep.py): one per seed (--seeds, or --num_restarts from
--seed), times each of --learning_rates, each in `<output_dir>/runs/lr<rate>-r<restart>/`.
Each is an ordinary run with --stop_early_at=F: it trains to F of its steps (its learning-rate
schedule still the full run's), evaluates on dev, keeps its resume checkpoint and writes
stop_point.json. The K best by the task's main metric there (in its declared direction; the
earlier run wins a tie) then run again without the flag, which continues each to exactly
the run that never stopped. The others stay stopped, checkpoints kept: the same command
with a larger --continue_best continues more of them; --continue_best=0 stops them all.

`stop_early.json` and `stop_early.md` in --output_dir: every run's dev score at the stop and
at the end, which continued, the best, and the compute: optimizer steps trained (counted:
each run to its stop, the continued ones on to their end) against N full runs, and the
seconds (stop_point.json's, and the continuing process's history.csv; N full runs'
seconds are estimated from the continued runs'). Started again with the same command, it
reuses what is done: stopped runs are not retrained, continued runs not continued again.
"""

import contextlib
import dataclasses
import os
import statistics

from kerasbert import distribute, plugins, restarts, run_folder, sweep
from kerasbert import run as run_lib
from kerasbert.errors import InputError, TrainingError
from kerasbert.io_utils import atomic_write_json, atomic_write_text
from kerasbert.metrics import finite_value

SUMMARY_JSON = "stop_early.json"
SUMMARY_MD = "stop_early.md"
# A run stopped with --stop_early_at, then continued without it, is one run.
RESUMABLE_CHANGES = sweep.RESUMABLE_CHANGES | {"stop_early_at"}


def check_continue_best(continue_best, num_runs, fraction):
    """--continue_best: 0 (stop them all) up to the number of runs, with --stop_early_at."""
    if fraction is None:
        raise InputError(f"--continue_best={continue_best}: continues the runs that "
                         "--stop_early_at stopped; give --stop_early_at=F too")
    if continue_best is None:
        raise InputError(f"--stop_early_at={fraction:g}: with {num_runs} runs, say how many "
                         "of them continue to the end: --continue_best=K")
    if not 0 <= continue_best <= num_runs:
        raise InputError(f"--continue_best={continue_best}: must be between 0 and the number "
                         f"of runs started ({num_runs})")


def run_stop_early(base, continue_best, seeds=None, num_restarts=1, learning_rates=None,
                   registry=None, execute=None, log=print):
    """Starts (or resumes) the runs of `base` (a RunConfig with stop_early_at: the fraction
    F) for `seeds` (or `num_restarts` from base.seed) and `learning_rates`, stops each at F,
    continues the best `continue_best` and returns the summary written to stop_early.json.
    `execute(config, registry)` runs one run (default: kerasbert.run.execute)."""
    registry = registry or plugins.registry()
    execute = execute or run_lib.execute
    fraction = base.stop_early_at
    rates = sweep.parse_learning_rates(learning_rates)
    sweep.check_runs_flags(base, rates, "the runs take their",
                           "start many, stop early picks the runs to continue")
    task = registry.task(base.task)
    full = dataclasses.replace(base, stop_early_at=None).resolved(task)
    if full.export_dir:
        raise InputError(f"--export_dir={full.export_dir}: not with --stop_early_at (several "
                         "runs end; export the one you want with python -m "
                         "kerasbert.export.saved_model --run_dir=...)")
    plan = sweep.plan_sweep(full, rates or (full.learning_rate,), num_restarts, seeds)
    check_continue_best(continue_best, len(plan), fraction)
    with (run_folder.lock(full.output_dir) if distribute.writes_outputs(
            full.distribution_strategy) else contextlib.nullcontext()):
        return _run(full, plan, fraction, continue_best, task, registry, execute, log)


def _check(run, fraction):
    """A folder made with other settings, or finished without stopping at `fraction`, is
    not one of these runs: refused before anything trains."""
    out = run.config.output_dir
    changed = run_folder.changed_settings(out, run.config, RESUMABLE_CHANGES)
    if changed:
        key, saved, wanted = changed[0]
        raise InputError(
            f"{run_folder.path(out, run_folder.RUN_CONFIG)}: this run was made with "
            f"{key}={saved!r}, now {wanted!r}; use another --output_dir, or "
            "--overwrite_output_dir to start over")
    stop = run_folder.read_stop_point(out)
    if run_folder.is_finished(out) and (stop is None or stop["fraction"] != fraction):
        raise InputError(
            f"--output_dir={out}: holds a run that finished without stopping at "
            f"--stop_early_at={fraction:g}; use another --output_dir, or "
            "--overwrite_output_dir to start over")


def _run(base, plan, fraction, keep, task, registry, execute, log):
    metric = task.main_metric
    greater = sweep.metric_direction(task, registry)
    sweep.prepare_sweep_dir(base)
    for run in plan:
        _check(run, fraction)

    def attempt(run, config, where):
        try:
            execute(config, registry)
        except TrainingError as e:  # a diverged run: the others go on
            run_folder.write_failure(run.config.output_dir, e)
            log(f"{where}: failed: {e}")

    for i, run in enumerate(plan):  # stage 1: every run, with --stop_early_at
        out = run.config.output_dir
        where = f"kerasbert: stop early {i + 1}/{len(plan)} {run.name}"
        stop = run_folder.read_stop_point(out)
        if run_folder.status(out) == "failed":
            log(f"{where}: failed before ({run_folder.read_failure(out)}), skipped")
        elif stop is not None and stop["fraction"] == fraction:
            log(f"{where}: stopped before at step {stop['step']}, reused")
        else:
            log(f"{where}: learning rate {run.learning_rate:g}, seed {run.seed}, to "
                f"{fraction:g} of its steps")
            attempt(run, dataclasses.replace(run.config, stop_early_at=fraction), where)

    chosen = choose(plan, metric, greater, keep)
    log(f"kerasbert: stop early: continuing {len(chosen)} of {len(plan)} runs, the best on "
        f"dev {metric} at the stop: " + (", ".join(chosen) or "none"))
    summary = write_summary(base, plan, chosen, task, fraction, keep, greater)
    for i, run in enumerate(r for r in plan if r.name in chosen):  # stage 2: the best K
        out = run.config.output_dir
        where = f"kerasbert: continue {i + 1}/{len(chosen)} {run.name}"
        if run_folder.is_finished(out):
            log(f"{where}: finished before, reused")
            continue
        log(f"{where}: from step {run_folder.read_stop_point(out)['step']} to the end")
        attempt(run, run.config, where)
        summary = write_summary(base, plan, chosen, task, fraction, keep, greater)
    log(summary["markdown"].split("\n\n")[0])
    log(f"kerasbert: stop-early summary in {run_folder.path(base.output_dir, SUMMARY_MD)}")
    return summary


def _stop_value(run, metric):
    stop = run_folder.read_stop_point(run.config.output_dir)
    if stop is None or run_folder.status(run.config.output_dir) == "failed":
        return None
    return finite_value(stop["metrics"], metric)


def choose(plan, metric, greater, keep):
    """The names of the `keep` best runs by `metric` at their stop, in plan order; runs
    without a value there (failed) are never chosen; the earlier run wins a tie."""
    sign = 1.0 if greater else -1.0
    scored = [(i, run.name, _stop_value(run, metric)) for i, run in enumerate(plan)]
    ranked = sorted((s for s in scored if s[2] is not None), key=lambda s: (-sign * s[2], s[0]))
    best = {name for _, name, _ in ranked[:keep]}
    return [run.name for run in plan if run.name in best]


# --- The summary ---------------------------------------------------------------------------

def _run_entry(base, run, chosen, metric):
    out = run.config.output_dir
    stop = run_folder.read_stop_point(out) or {}
    finished = run_folder.is_finished(out)
    history = run_folder.read_run_history(out) if finished else []
    resumed = bool(finished and stop and not stop.get("finished"))
    entry = {"name": run.name, "learning_rate": run.learning_rate, "seed": run.seed,
             "dir": os.path.relpath(out, base.output_dir), "status": run_folder.status(out),
             "stop_step": stop.get("step"), "total_steps": stop.get("total_steps"),
             "stop_value": finite_value(stop.get("metrics"), metric),
             "stop_seconds": stop.get("seconds"), "continued": run.name in chosen,
             "final_value": finite_value(run_folder.read_metrics(out), metric) if finished
             else None,
             # The continuing process's training and dev time (history.csv's last row).
             "continue_seconds": (float(history[-1]["seconds"]) if resumed and history
                                  else 0.0 if finished else None)}
    # Steps trained: to the stop, and on to the end for a continued, finished run.
    entry["steps"] = (None if entry["stop_step"] is None else entry["total_steps"] if finished
                      else entry["stop_step"])
    return entry


def compute(runs):
    """What the runs cost against as many full runs: optimizer steps (counted) and seconds
    (the full runs' estimated from the finished ones'); runs without a stop point (failed
    before it) count in neither."""
    counted = [r for r in runs if r["steps"] is not None]
    steps = sum(r["steps"] for r in counted)
    full_steps = sum(r["total_steps"] for r in counted)
    done = [r for r in counted if r["final_value"] is not None]
    seconds = None
    if all(r["stop_seconds"] is not None for r in counted):
        seconds = sum(r["stop_seconds"] + (r["continue_seconds"] or 0.0) for r in counted)
    per_full_run = (statistics.fmean(r["stop_seconds"] + r["continue_seconds"] for r in done)
                    if done and seconds is not None else None)
    full_seconds = None if per_full_run is None else per_full_run * len(counted)
    return {"runs": len(counted), "steps": steps, "full_run_steps": full_steps,
            "saved_steps": full_steps - steps,
            "saved_fraction": (full_steps - steps) / full_steps if full_steps else None,
            "seconds": None if seconds is None else round(seconds, 1),
            "full_run_seconds_estimate": (None if full_seconds is None
                                          else round(full_seconds, 1)),
            "seconds_estimated_from": len(done)}


def write_summary(base, plan, chosen, task, fraction, keep, greater):
    metric = task.main_metric
    runs = [_run_entry(base, run, chosen, metric) for run in plan]
    sign = 1.0 if greater else -1.0
    ended = [r for r in runs if r["final_value"] is not None and r["continued"]]
    best = max(ended, key=lambda r: sign * r["final_value"], default=None)  # earliest on ties
    summary = {"task": base.task, "metric": metric, "higher_is_better": greater,
               "stop_early_at": fraction, "continue_best": keep, "runs": runs,
               "chosen": chosen, "best": best["name"] if best else None,
               "best_value": best["final_value"] if best else None,
               "compute": compute(runs), "command": restarts.command_line(),
               "measured_on": restarts.measured_on(),
               "experiment": {**restarts.experiment(base, list(dict.fromkeys(
                   r.seed for r in plan))), "stop_early_at": fraction, "continue_best": keep}}
    summary["markdown"] = markdown(summary)
    atomic_write_json(run_folder.path(base.output_dir, SUMMARY_JSON), summary)
    atomic_write_text(run_folder.path(base.output_dir, SUMMARY_MD), summary["markdown"])
    return summary


def _value(x):
    return "–" if x is None else f"{x:.4f}"


def markdown(summary):
    """The headline (the best run, what the compute was against N full runs) and a row per
    run."""
    c, metric = summary["compute"], summary["metric"]
    lines = [f"Start many, stop early: {len(summary['runs'])} runs started, each stopped "
             f"after {summary['stop_early_at']:g} of its training steps; the best "
             f"{summary['continue_best']} on dev {metric} there continued to the end. "
             + (f"Best: {summary['best']}, dev {metric} {_value(summary['best_value'])}. "
                if summary["best"] else "No run has finished yet. ")
             + f"Compute: {c['steps']} optimizer steps against {c['full_run_steps']} for "
             f"{c['runs']} full runs (saved {c['saved_steps']}"
             + (f", {100 * c['saved_fraction']:.1f}%" if c["saved_fraction"] is not None
                else "") + ")"
             + (f"; {c['seconds']:.1f} s of training and dev evaluation against an estimated "
                f"{c['full_run_seconds_estimate']:.1f} s (a full run's seconds: the mean of "
                f"{c['seconds_estimated_from']} finished)"
                if c["full_run_seconds_estimate"] is not None else "")
             + ".", "",
             f"| run | seed | learning rate | steps trained | dev {metric} at the stop | "
             f"continued | dev {metric} at the end |", "|---|---|---|---|---|---|---|"]
    for r in summary["runs"]:
        steps = "–" if r["steps"] is None else f"{r['steps']}/{r['total_steps']}"
        lines.append(f"| {r['name']} | {r['seed']} | {r['learning_rate']:g} | {steps} | "
                     f"{_value(r['stop_value'])} | {'yes' if r['continued'] else 'no'} | "
                     f"{_value(r['final_value'])}"
                     + (" (best)" if r["name"] == summary["best"] else "")
                     + (" (failed)" if r["status"] == "failed" else "") + " |")
    return "\n".join(lines) + "\n"
