"""report.md: what a person reads after a run (or a sweep) instead of its raw files.

    python -m kerasbert.report <run_dir or sweep_dir>    # (re)writes its report.md

A run's report has the headline dev metric, the metrics per phase, the training curves
(`curves.png` from history.csv), links to its predictions and files, and its config. A
sweep's report (see kerasbert/sweep.py) has the table per learning rate and one figure.
Everything is built from the files a run leaves, so a report can be regenerated at any time.
"""

import csv
import io
import json
import os
import sys

from kerasbert import plugins, run_folder, storage
from kerasbert.errors import InputError
from kerasbert.io_utils import atomic_write_text, read_json_object
from kerasbert.metrics import finite_value


def fmt(value):
    """Metrics as 4 decimals (SQuAD's 0–100 scale as 2), everything else as is."""
    if isinstance(value, float):
        if value and abs(value) < 1e-3:  # learning rates
            return f"{value:.3g}"
        return f"{value:.2f}" if abs(value) > 1.5 else f"{value:.4f}"
    return str(value)


def markdown_table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _main_metric_of(config, metrics):
    """The task's main metric: from the registry if the task is known, else the first key."""
    try:
        return plugins.registry().task(config["task"]).main_metric
    except (InputError, KeyError):  # a task this install lacks: the report still gets written
        return next(iter(k for k in metrics if k != "phases"), None)


def write_run_report(run_dir, main_metric=None):
    """Writes `<run_dir>/report.md` and `<run_dir>/curves.png`; returns the report's path."""
    if not storage.isfile(run_folder.path(run_dir, run_folder.RUN_CONFIG)):
        raise InputError(f"{run_dir}: not a kerasbert run (no {run_folder.RUN_CONFIG})")
    config = run_folder.read_config(run_dir)
    metrics = run_folder.read_metrics(run_dir)
    phases = metrics.pop("phases", None)
    history = run_folder.read_run_history(run_dir)
    main_metric = main_metric or _main_metric_of(config, metrics)

    name = os.path.basename(os.path.normpath(run_dir))
    lines = [f"# {config['task']}: {name}", ""]
    if main_metric in metrics:
        lines.append(f"**dev {main_metric} = {fmt(metrics[main_metric])}** (end of training)")
    elif run_folder.status(run_dir) == "failed":
        lines.append(f"**failed**: {run_folder.read_failure(run_dir)}")
    else:
        lines.append("No dev metrics (unfinished run, or --do_eval=false).")
    failure = run_folder.read_failure_check(run_dir)
    if failure is not None:
        lines += ["", failure_line(failure)]
    lines += ["", f"encoder `{config.get('init_checkpoint') or 'default (MiniLM)'}`, "
              f"head `{config.get('head')}`, learning rate {config.get('learning_rate')}, "
              f"batch {config.get('train_batch_size')}, {config.get('num_train_epochs')} epochs"
              + (f" after {config['frozen_epochs']} frozen" if config.get("frozen_epochs") else "")
              + f", seed {config.get('seed')}, max_seq_length {config.get('max_seq_length')}.", ""]

    if metrics:
        lines += ["## Dev metrics", ""]
        keys = list(metrics)
        if phases and len(phases) > 1:
            rows = [[phase] + [values.get(k, "") for k in keys] for phase, values in phases.items()]
        else:
            rows = [["final"] + [metrics[k] for k in keys]]
        lines += [markdown_table(["phase"] + keys, rows)]

    if history:
        from kerasbert.analysis.report_plots import plot_run_history  # matplotlib: only now

        plot_run_history(history, run_folder.path(run_dir, run_folder.CURVES), main_metric,
                         title=f"{config['task']} {name}")
        lines += ["## Training curves", "", f"![training curves]({run_folder.CURVES})", ""]
        shown = [k for k in ("phase", "epoch", "step", "train_loss", "train_accuracy",
                             f"dev_{main_metric}", "grad_norm/total", "learning_rate",
                             "seconds") if k in history[0]]
        lines += [markdown_table(shown, [[_cell(r.get(k)) for k in shown] for r in history])]

    lines += ["## Files", ""] + _file_lines(run_dir) + [""]
    lines += ["## Config", "", markdown_table(
        ["setting", "value"], [[k, json.dumps(v)] for k, v in sorted(config.items())])]
    path = run_folder.path(run_dir, run_folder.REPORT)
    atomic_write_text(path, "\n".join(lines))
    return path


def failure_line(failure):
    """The report's line on the failed-run check (failure_check.json)."""
    metric, value, baseline = failure.get("metric"), failure.get("value"), failure.get("baseline")
    margin = failure.get("margin") or 0.0
    if baseline is None:
        return (f"Failed-run check: the constant-prediction baseline of {metric} is unknown "
                "for this task, so the run is not judged.")
    if value is None:
        return f"Failed-run check: no dev {metric} to judge (baseline {fmt(baseline)})."
    lower = failure.get("greater_is_better") is False
    bound = baseline - margin if lower else baseline + margin
    if failure.get("failed"):
        where = "at or above" if lower else "at or below"
        return (f"**Failed run**: dev {metric} {fmt(value)} is {where} the "
                f"constant-prediction baseline {fmt(baseline)} {'−' if lower else '+'} margin "
                f"{fmt(float(margin))} = {fmt(bound)} (Mosbach et al. 2021; the gradient "
                "norms in history.csv show whether training stalled).")
    return (f"Not a failed run: dev {metric} {fmt(value)} beats the constant-prediction "
            f"baseline {fmt(baseline)} {'−' if lower else '+'} margin {fmt(float(margin))}.")


def _cell(value):
    try:
        return float(value) if "." in str(value) else value
    except ValueError:
        return value


def _file_lines(run_dir):
    lines = []
    names = sorted(storage.listdir(run_dir))
    outputs = [n for n in names if n not in run_folder.SUMMARY_FILES and not n.startswith(".")
               and storage.isfile(os.path.join(run_dir, n))]
    for n in outputs:
        lines.append(f"- [{n}]({n})" + (" (weights of encoder + head)"
                                         if n.endswith(".weights.h5") else ""))
    for n in (run_folder.METRICS, run_folder.EVAL_RESULTS, run_folder.HISTORY,
              run_folder.GRAD_NORMS, run_folder.FAILURE_CHECK, run_folder.RUN_CONFIG):
        if n in names:
            lines.append(f"- [{n}]({n})")
    for folder, what in run_folder.FOLDER_ROLES.items():
        if storage.isdir(os.path.join(run_dir, folder)):
            lines.append(f"- [{folder}/]({folder}/): {what}")
    if run_folder.PRUNED in names:
        removed = run_folder.read_pruned(run_dir)
        lines.append(f"- not the best run of its sweep: its large files were removed "
                     f"({', '.join(removed) or 'none'}); metrics, history and config are kept")
    return lines


# --- A sweep's report --------------------------------------------------------------------

def write_sweep_report(sweep_dir):
    """sweep.csv, sweep.png and report.md from sweep.json and the runs' history files."""
    summary = read_json_object(run_folder.path(sweep_dir, run_folder.SWEEP_JSON))
    metric, runs, best = summary["metric"], summary["runs"], summary["best"]
    keys = list(dict.fromkeys([metric] + [k for r in runs for k in (r["metrics"] or {})]))
    seconds = {}
    curves = {}
    for r in runs:
        history = run_folder.read_run_history(os.path.join(sweep_dir, r["dir"]))
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
    atomic_write_text(run_folder.path(sweep_dir, run_folder.SWEEP_CSV), buffer.getvalue())

    from kerasbert.analysis.report_plots import plot_sweep  # matplotlib: only now

    plot_sweep([{**r, "value": finite_value(r["metrics"], metric), "curve": curves[r["name"]],
                 "best": r["name"] == best} for r in runs],
               run_folder.path(sweep_dir, run_folder.SWEEP_PNG), metric,
               title=f"{summary['task']}: dev {metric} over learning rates and restarts")

    finished = sum(r["status"] == "finished" for r in runs)
    failed = sum(r["status"] == "failed" for r in runs)
    rates = summary["learning_rates"]
    title = (f"# Sweep: {summary['task']}, {len(rates)} learning rate"
             f"{'s' * (len(rates) > 1)} × {summary['num_restarts']} restart"
             f"{'s' * (summary['num_restarts'] > 1)}")
    lines = [title, "",
             f"{finished} of {len(runs)} runs finished" + (f", {failed} failed" if failed else "")
             + ". Restart i uses the i-th of seeds "
             + ", ".join(str(s) for s in summary.get("seeds", [summary["seed"]]))
             + " (data shuffling, dropout, head "
             "initialisation) from the same encoder checkpoint; every learning rate sees the "
             f"same seeds. Selection: dev {metric}, "
             + ("higher" if summary["higher_is_better"] else "lower") + " is better.", ""]
    if best:
        value = next(finite_value(r["metrics"], metric) for r in runs if r["name"] == best)
        lines += [(f"**Best: [{best}]({run_folder.SWEEP_RUNS}/{best}/report.md), dev {metric} = "
                   f"{fmt(value)}**. It is kept in full ({run_folder.SWEEP_RUNS}/{best}/: weights, "
                   "encoder, checkpoints, predictions); the other runs keep their metrics, "
                   "history, config and report."), ""]
    lines += [f"## Dev {metric} per learning rate", "", markdown_table(
        ["learning rate", "restarts finished", "mean ± std", "best", "best run"],
        [[f"{s['learning_rate']:g}", f"{s['finished']}/{s['runs']}",
          "–" if s["mean"] is None else f"{fmt(s['mean'])} ± {fmt(s['std'])}",
          "–" if s["best"] is None else s["best"],
          "–" if s["best_run"] is None else s["best_run"] + (" ★" if s["best_run"] == best
                                                              else "")]
         for s in summary["per_learning_rate"]]),
        f"![dev {metric} per learning rate and restart]({run_folder.SWEEP_PNG})", "",
        *(["## Over restarts: intervals and paired differences", "",
           summary["restarts_markdown"]] if summary.get("restarts_markdown") else []),
        "## All runs", "", markdown_table(
            ["run", "learning rate", "seed", "status", *keys, "train s", "report"],
            [[r["name"], f"{r['learning_rate']:g}", r["seed"], r["status"],
              *[(r["metrics"] or {}).get(k, "") for k in keys], seconds[r["name"]],
              f"[report]({r['dir']}/report.md)" if r["status"] in ("finished", "failed")
              else "–"] for r in runs])]
    path = run_folder.path(sweep_dir, run_folder.REPORT)
    atomic_write_text(path, "\n".join(lines))
    return path


def _main(argv):
    if len(argv) != 2:
        raise InputError("expected one folder: python -m kerasbert.report <run_dir or "
                         "sweep_dir>" + (f"; got {' '.join(argv[1:])}" if argv[1:] else ""))
    target = argv[1]
    if storage.isfile(run_folder.path(target, run_folder.SWEEP_JSON)):
        path = write_sweep_report(target)
    else:
        path = write_run_report(target)
    print(path)
    return 0


def main(argv=None):
    """`python -m kerasbert.report RUN_OR_SWEEP_DIR` (argv: the arguments after the
    program's name): writes report.md and prints its path."""
    from absl import flags

    from kerasbert import command

    argv = sys.argv[1:] if argv is None else argv
    usage = ("usage: python -m kerasbert.report RUN_OR_SWEEP_DIR\n\n"
             + __doc__.strip() + "\n\nWrites <folder>/report.md and prints its path.")
    return command.run(_main, flags.FlagValues(), usage=usage,
                       argv=["kerasbert.report", *argv])


if __name__ == "__main__":
    sys.exit(main())
