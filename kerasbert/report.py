"""report.md: what a person reads after a run (or a sweep) instead of its raw files.

    python -m kerasbert.report <run_dir or sweep_dir>    # (re)writes its report.md

A run's report has the headline dev metric, the metrics per phase, the training curves
(`curves.png` from history.csv), links to its predictions and files, and its config. A
sweep's report (see kerasbert/sweep.py) has the table per learning rate and one figure.
Everything is built from the files a run leaves, so a report can be regenerated at any time.
"""

import json
import os
import sys

from kerasbert.config import RUN_CONFIG
from kerasbert.errors import InputError
from kerasbert.io_utils import atomic_write_text, read_history, read_json_object

REPORT = "report.md"
CURVES = "curves.png"
PRUNED = "sweep_pruned.json"  # written by a sweep when it dropped a run's large files
# Files every run writes; anything else in a run folder is a prediction/eval file.
RUN_FILES = (RUN_CONFIG, "metrics.json", "eval_results.txt", "history.csv", REPORT,
             CURVES, PRUNED, "failed.json")
RUN_FOLDERS = {"tensorboard": "TensorBoard events (`tensorboard --logdir` this folder)",
               "checkpoints": "resume state (latest epoch)",
               "encoder": "the fine-tuned encoder (`--init_checkpoint=` this run)"}


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
        from kerasbert import plugins

        return plugins.registry().task(config["task"]).main_metric
    except (InputError, KeyError):  # a task this install lacks: the report still gets written
        return next(iter(k for k in metrics if k != "phases"), None)


def write_run_report(run_dir, main_metric=None):
    """Writes `<run_dir>/report.md` and `<run_dir>/curves.png`; returns the report's path."""
    config_path = os.path.join(run_dir, RUN_CONFIG)
    if not os.path.isfile(config_path):
        raise InputError(f"{run_dir}: not a kerasbert run (no run_config.json)")
    config = read_json_object(config_path)
    metrics_path = os.path.join(run_dir, "metrics.json")
    metrics = read_json_object(metrics_path) if os.path.isfile(metrics_path) else {}
    phases = metrics.pop("phases", None)
    history = read_history(os.path.join(run_dir, "history.csv"))
    main_metric = main_metric or _main_metric_of(config, metrics)

    name = os.path.basename(os.path.normpath(run_dir))
    lines = [f"# {config['task']}: {name}", ""]
    if main_metric in metrics:
        lines.append(f"**dev {main_metric} = {fmt(metrics[main_metric])}** (end of training)")
    elif os.path.isfile(os.path.join(run_dir, "failed.json")):
        failure = read_json_object(os.path.join(run_dir, "failed.json"))
        lines.append(f"**failed**: {failure.get('error', '?')}")
    else:
        lines.append("No dev metrics (unfinished run, or --do_eval=false).")
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
        from kerasbert.analysis.report_plots import plot_run_history

        plot_run_history(history, os.path.join(run_dir, CURVES), main_metric,
                         title=f"{config['task']} {name}")
        lines += ["## Training curves", "", f"![training curves]({CURVES})", ""]
        shown = [k for k in ("phase", "epoch", "step", "train_loss", "train_accuracy",
                             f"dev_{main_metric}", "learning_rate", "seconds") if k in history[0]]
        lines += [markdown_table(shown, [[_cell(r.get(k)) for k in shown] for r in history])]

    lines += ["## Files", ""] + _file_lines(run_dir) + [""]
    lines += ["## Config", "", markdown_table(
        ["setting", "value"], [[k, json.dumps(v)] for k, v in sorted(config.items())])]
    path = os.path.join(run_dir, REPORT)
    atomic_write_text(path, "\n".join(lines))
    return path


def _cell(value):
    try:
        return float(value) if "." in str(value) else value
    except ValueError:
        return value


def _file_lines(run_dir):
    lines = []
    names = sorted(os.listdir(run_dir))
    outputs = [n for n in names if n not in RUN_FILES and not n.startswith(".")
               and os.path.isfile(os.path.join(run_dir, n))]
    for n in outputs:
        lines.append(f"- [{n}]({n})" + (" (weights of encoder + head)"
                                         if n.endswith(".weights.h5") else ""))
    for n in ("metrics.json", "eval_results.txt", "history.csv", RUN_CONFIG):
        if n in names:
            lines.append(f"- [{n}]({n})")
    for folder, what in RUN_FOLDERS.items():
        if os.path.isdir(os.path.join(run_dir, folder)):
            lines.append(f"- [{folder}/]({folder}/): {what}")
    if PRUNED in names:
        removed = read_json_object(os.path.join(run_dir, PRUNED)).get("removed", [])
        lines.append(f"- not the best run of its sweep: its large files were removed "
                     f"({', '.join(removed) or 'none'}); metrics, history and config are kept")
    return lines


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m kerasbert.report <run_dir or sweep_dir>", file=sys.stderr)
        return 2
    target = argv[0]
    try:
        if os.path.isfile(os.path.join(target, "sweep.json")):
            from kerasbert import sweep

            path = sweep.write_sweep_report(target)
        else:
            path = write_run_report(target)
    except InputError as e:
        print(f"kerasbert: error: {e}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
