"""Learning-rate sweep with random restarts, best run picked on dev (BERT paper, section 4).

    python -m kerasbert.main --task=rte --learning_rates=5e-5,4e-5,3e-5,2e-5 --num_restarts=3 \
        --output_dir=runs/rte-sweep

Every (learning rate, restart) pair is an ordinary `kerasbert.run.execute` run in
`<output_dir>/runs/lr<rate>-r<restart>/`. Restart i uses seed `--seed + i` (data shuffling,
dropout, head initialisation; --vary_seed: only the one named), or the i-th of `--seeds`,
and the same `--init_checkpoint`; every learning rate sees the same seeds. Per learning rate the summary also has n, mean ±
sample std, min–max and a 95% interval over the restarts, and the paired difference to
`--baseline` (default the first learning rate), in `sweep.json` under "restarts"
(kerasbert/restarts.py) and in `report.md`. The best run on dev by the task's main metric keeps everything (weights,
checkpoints, predictions); the others keep only their metrics, history, config and report.
`sweep.json`, `sweep.csv`, `sweep.png` and `report.md` summarise the grid and are rewritten
after every run. Started again with the same command, a sweep skips finished runs
(metrics.json present), resumes an unfinished one from its last epoch's checkpoint, and
refuses a run folder that was trained with other settings.
"""

import contextlib
import dataclasses
import os
import statistics

from kerasbert import distribute, evp_report, plugins, report, restarts, run_folder, storage
from kerasbert import run as run_lib
from kerasbert.errors import InputError, TrainingError
from kerasbert.export import saved_model
from kerasbert.io_utils import atomic_write_json
from kerasbert.metrics import finite_value, greater_is_better, higher_is_better

RUNS = run_folder.SWEEP_RUNS
# What a pruned (not best) run keeps: small files that say what it did.
KEEP = set(run_folder.SUMMARY_FILES) | {run_folder.TENSORBOARD_DIR}
# Settings that may change between a stopped sweep and its resumption.
RESUMABLE_CHANGES = {"output_dir", "overwrite_output_dir", "export_dir", "deterministic",
                     "keep_checkpoints"}


@dataclasses.dataclass(frozen=True)
class PlannedRun:
    name: str
    learning_rate: float
    restart: int
    seed: int
    config: object  # RunConfig


def parse_learning_rates(values):
    """`--learning_rates` (a list of strings, or one comma-separated string) as floats."""
    return tuple(restarts.parse_positive_numbers(values))


def run_name(learning_rate, restart):
    return f"lr{learning_rate:g}-r{restart}"


def sweep_seeds(base_seed, num_restarts, seeds=None):
    """The seed of each restart: --seeds when given (then --num_restarts must be 1 or
    their number), else --seed, --seed + 1, ... for --num_restarts."""
    if num_restarts < 1:
        raise InputError(f"--num_restarts={num_restarts}: must be a positive integer")
    if seeds is None:
        return [base_seed + restart for restart in range(num_restarts)]
    seeds = restarts.parse_seeds(seeds, base_seed)
    if num_restarts not in (1, len(seeds)):
        raise InputError(f"--num_restarts={num_restarts}: --seeds gives {len(seeds)} "
                         "restarts; give one or the other")
    return seeds


def plan_sweep(base, learning_rates, num_restarts, seeds=None):
    """One run per (learning rate, restart), learning rates outermost; restart i: seed + i,
    or the i-th of `seeds`."""
    seed_of = sweep_seeds(base.seed, num_restarts, seeds)
    runs = []
    for rate in learning_rates:
        for restart, seed in enumerate(seed_of):
            name = run_name(rate, restart)
            config = dataclasses.replace(
                base.for_restart(seed), learning_rate=rate,
                output_dir=os.path.join(base.output_dir, RUNS, name),
                overwrite_output_dir=False, export_dir=None)
            runs.append(PlannedRun(name, rate, restart, seed, config))
    return runs


def _value(result, metric):
    return finite_value(result.get("metrics"), metric)


def select_best(results, metric, greater=None):
    """The name of the best result by `metric` (dicts with name and metrics; failed or
    unfinished runs have none); the earliest wins a tie; None when nothing has a value.
    `greater`: whether larger is better (`metric_direction`:
    None: the guess from the metric's name)."""
    greater = higher_is_better(metric) if greater is None else greater
    sign = 1.0 if greater else -1.0
    best, best_value = None, None
    for result in results:
        value = _value(result, metric)
        if value is not None and (best is None or sign * value > sign * best_value):
            best, best_value = result["name"], value
    return best


def summarise(results, metric, greater=None):
    """Per learning rate (in sweep order): restarts finished and failed, mean ± sample std
    and best of the metric over the finished restarts, and which run is the best."""
    rows = []
    for rate in dict.fromkeys(r["learning_rate"] for r in results):
        group = [r for r in results if r["learning_rate"] == rate]
        values = [v for v in (_value(r, metric) for r in group) if v is not None]
        best_run = select_best(group, metric, greater)
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

def check_same_settings(run):
    """A folder trained with other settings must not be counted (or resumed) as this run."""
    changed = run_folder.changed_settings(run.config.output_dir, run.config, RESUMABLE_CHANGES)
    if changed:
        key, saved, wanted = changed[0]
        raise InputError(
            f"{run_folder.path(run.config.output_dir, run_folder.RUN_CONFIG)}: this run was "
            f"made with {key}={saved!r}, the sweep now asks for {wanted!r}; use another "
            "--output_dir, or --overwrite_output_dir to start the sweep over")


def prune(run_dir, metric):
    """Drops a run's large files (weights, checkpoints, encoder, predictions); keeps KEEP."""
    removed = []
    for name in sorted(storage.listdir(run_dir)):
        if name in KEEP or name.startswith("."):
            continue
        path = os.path.join(run_dir, name)
        if storage.isdir(path):
            storage.rmtree(path)
            removed.append(name + "/")
        else:
            storage.remove(path)
            removed.append(name)
    if removed:
        run_folder.write_pruned(run_dir, set(run_folder.read_pruned(run_dir)) | set(removed))
        report.write_run_report(run_dir, metric)
    return removed


def prepare_sweep_dir(base):
    """With --overwrite_output_dir the previous sweep's runs and summaries are removed;
    otherwise the folder is reused (that is how a stopped sweep resumes)."""
    root = base.output_dir
    if base.overwrite_output_dir and storage.isdir(root):
        run_folder.clear(root, (RUNS, run_folder.SWEEP_JSON, run_folder.SWEEP_CSV,
                                run_folder.SWEEP_PNG, run_folder.REPORT))
    try:
        storage.makedirs(os.path.join(root, RUNS))
    except Exception as e:
        if not storage.is_io_error(e):
            raise
        raise InputError(f"--output_dir={root}: cannot write there ({storage.reason(e)})") from None


# --- The sweep ---------------------------------------------------------------------------

def check_runs_flags(base, rates, who_takes, what_picks):
    """--learning_rates excludes --learning_rate, and runs picked on dev need --do_train and
    --do_eval (the sweep's and start-many-stop-early's check, in their own words)."""
    if rates and base.learning_rate is not None:
        raise InputError(f"--learning_rate={base.learning_rate}: {who_takes} learning rates "
                         "from --learning_rates; give one or the other")
    if not (base.do_train and base.do_eval):
        raise InputError(f"--do_eval: {what_picks} on dev; it needs --do_train and --do_eval")


def run_sweep(base, learning_rates, num_restarts, registry=None, execute=None, log=print,
              seeds=None, baseline=None):
    """Runs (or resumes) the grid; returns the summary written to sweep.json. `seeds`
    (--seeds) replaces --seed + restart; `baseline` (--baseline) is the learning rate the
    others are compared with (default the first)."""
    registry = registry or plugins.registry()
    execute = execute or run_lib.execute
    rates = parse_learning_rates(learning_rates)
    check_runs_flags(base, rates, "a sweep takes its", "a sweep picks its best run")
    task = registry.task(base.task)
    base = base.resolved(task)
    export_dir = base.export_dir
    if export_dir:  # the best run is exported at the end: what can fail, fails now
        saved_model.kind_export(task, registry)
        saved_model.check_export_dir(export_dir)
    plan = plan_sweep(base, rates or (base.learning_rate,), num_restarts, seeds)
    restarts.baseline_label([f"{r:g}" for r in dict.fromkeys(p.learning_rate for p in plan)],
                            baseline)  # a bad --baseline is refused before the first run
    # A second sweep (or run, or landscape) on the folder refuses, naming this process.
    with (run_folder.lock(base.output_dir) if distribute.writes_outputs(
            base.distribution_strategy) else contextlib.nullcontext()):
        return _run_plan(base, plan, task, export_dir, registry, execute, log, baseline)


def metric_direction(task, registry):
    """Whether a larger main metric of `task` is better: the task's or its kind's
    declaration, else the guess from the metric's name (kerasbert/metrics.py)."""
    return greater_is_better(task.main_metric, task, registry.kind_of(task))


def _run_plan(base, plan, task, export_dir, registry, execute, log, baseline=None):
    metric = task.main_metric
    greater = metric_direction(task, registry)
    prepare_sweep_dir(base)
    for run in plan:  # every conflict is reported before anything trains
        check_same_settings(run)

    results = [{"name": r.name, "learning_rate": r.learning_rate, "restart": r.restart,
                "seed": r.seed, "dir": os.path.join(RUNS, r.name),
                "status": run_folder.status(r.config.output_dir), "metrics": None} for r in plan]
    # A sweep asked to record trajectories is a landscape experiment: every run's
    # trajectory and weights are what it was run for, so nothing is pruned.
    keep_all = base.save_trajectory_every > 0
    for i, (run, result) in enumerate(zip(plan, results)):
        out = run.config.output_dir
        where = f"kerasbert: sweep run {i + 1}/{len(plan)} {run.name}"
        if result["status"] == "finished":
            log(f"{where}: finished before, skipped")
        elif result["status"] == "failed":
            log(f"{where}: failed before ({run_folder.read_failure(out)}), skipped")
        else:
            log(f"{where}: learning rate {run.learning_rate:g}, seed {run.seed}"
                + (" (resuming)" if result["status"] == "unfinished" else ""))
            try:
                execute(run.config, registry)
                result["status"] = "finished"
            except TrainingError as e:  # e.g. a diverged restart: the sweep goes on
                run_folder.write_failure(out, e)
                result["status"] = "failed"
                log(f"{where}: failed: {e}")
        if result["status"] == "finished":
            result["metrics"] = run_folder.read_metrics(out)
            result["metrics"].pop("phases", None)
        best = select_best(results, metric, greater)
        for other, other_run in zip(results[:i + 1], plan):
            if (other["name"] != best and other["status"] in ("finished", "failed")
                    and not keep_all):
                prune(other_run.config.output_dir, metric)
        summary = write_summary(base, plan, results, task, best, baseline, greater)

    best = summary["best"]
    if best and run_folder.read_pruned(os.path.join(base.output_dir, RUNS, best)):
        log(f"kerasbert: the best run {best} was pruned by an earlier sweep over other "
            "learning rates; its weights are gone (rerun it alone to get them)")
    elif best and export_dir:
        path = saved_model.export_run(os.path.join(base.output_dir, RUNS, best), export_dir,
                          registry=registry)
        log(f"kerasbert: SavedModel of the best run in {path}")
    report_path = run_folder.path(base.output_dir, run_folder.REPORT)
    with storage.open_file(report_path) as f:
        log(f.read().split("\n## All runs")[0].rstrip())  # the headline and the table
    log(f"kerasbert: sweep summary in {report_path}")
    return summary


def restarts_table(base, plan, task, baseline=None, greater=None):
    """Per learning rate over its restarts (kerasbert/restarts.py): n, mean ± std, min–max,
    a 95% interval and the paired difference to the baseline learning rate."""
    rows = [{"label": f"{rate:g}", "runs": {r.seed: r.config.output_dir for r in plan
                                            if r.learning_rate == rate}}
            for rate in dict.fromkeys(r.learning_rate for r in plan)]
    metric = task.main_metric
    table = restarts.summarize(restarts.collect(rows, metric, task, task.dev_splits[0]),
                               metric, baseline, greater_is_better=greater)
    for row in table["rows"]:  # folders relative to the sweep's, as "runs" has them
        row["dirs"] = {s: os.path.relpath(d, base.output_dir) for s, d in row["dirs"].items()}
    return table


def write_summary(base, plan, results, task, best, baseline=None, greater=None):
    metric = task.main_metric
    greater = greater_is_better(metric, task) if greater is None else greater
    table = restarts_table(base, plan, task, baseline, greater)
    summary = {
        "task": base.task, "metric": metric, "higher_is_better": greater,
        "learning_rates": list(dict.fromkeys(r.learning_rate for r in plan)),
        "num_restarts": max(r.restart for r in plan) + 1, "seed": base.seed,
        "seeds": list(dict.fromkeys(r.seed for r in plan)),
        "best": best, "runs": results, "per_learning_rate": summarise(results, metric, greater),
        "restarts": table,
        "restarts_markdown": restarts.markdown(table, scale=1.0, digits=4,
                                               row_header="learning rate"),
        "command": restarts.command_line(), "measured_on": restarts.measured_on(),
    }
    experiment = restarts.experiment(base, summary["seeds"],
                                     learning_rates=summary["learning_rates"])
    del experiment["learning_rate"]  # --learning_rate is not what any run used: the grid is
    summary["experiment"] = experiment
    atomic_write_json(run_folder.path(base.output_dir, run_folder.SWEEP_JSON), summary)
    report.write_sweep_report(base.output_dir)
    # evp.json/.md/.png: each learning rate's expected best of n restarts (Dodge et al.)
    evp_report.write(base.output_dir, {base.task: table}, root=base.output_dir)
    return summary
