"""BERT's model-size table (paper section 5.2, Table 6): dev metric against L/H/A.

    python -m kerasbert.experiments model_size --task=mrpc --data_dir=glue_data/MRPC \
        --sizes=2/64/2,4/128/2,4/256/4 --output_dir=runs/sizes          # CPU-sized (default)
    python -m kerasbert.experiments model_size --task=mrpc --data_dir=glue_data/MRPC \
        --sizes=paper --output_dir=runs/sizes-paper
        # 3/768/12 6/768/3 6/768/12 12/768/12 12/1024/16 24/1024/16
    python -m kerasbert.experiments model_size --task=rte \
        --sizes=2/64/2,path/to/pretrained_bert ...

Takes every `kerasbert.main` flag, and `--seeds=1,2,3` (default: --seed). Each `--sizes`
entry is an L/H/A shape (or a `--model_size` name) trained from a random initialisation
(intermediate size 4H, as in BERT), or a checkpoint folder (anything `--init_checkpoint`
takes) fine-tuned from its weights, at `--checkpoint_learning_rate` where given (a random
initialisation's rate is often too large for pre-trained weights). Every (entry, seed) is an ordinary run in
`<output_dir>/<L-H-A or folder name>/seed-<n>/` with the same data and recipe; a finished
one is reused when the command is run again. Writes `grid.md` and `grid.json` (per size:
n, mean ± sample std, min–max and a 95% interval of the dev main metric over seeds, and
the paired difference to --baseline, default the first size; kerasbert/restarts.py),
`grid.csv` (one line per run) and `grid.png` (mean dev metric against encoder parameters).
The paper's grid compares *pre-trained* models; random initialisations show what size
alone buys on the task (little, on small data), and given checkpoints give the paper's
comparison.
"""

import csv
import dataclasses
import io
import os

from kerasbert import restarts, run_folder
from kerasbert.errors import InputError
from kerasbert.experiments import runner
from kerasbert.io_utils import atomic_write_text

PAPER_SIZES = ["3/768/12", "6/768/3", "6/768/12", "12/768/12", "12/1024/16", "24/1024/16"]


def define_flags(flag_values):
    """--sizes and --checkpoint_learning_rate, beside kerasbert.main's flags."""
    from absl import flags

    if "sizes" in flag_values:  # run twice in one process: defined once
        return
    flags.DEFINE_list("sizes", ["2/64/2", "4/128/2", "4/256/4"], "L/H/A shapes (random "
                      "initialisation), checkpoint folders, or 'paper' for the BERT paper's "
                      "Table 6 grid (" + ", ".join(PAPER_SIZES) + ").", flag_values=flag_values)
    # A random initialisation and pre-trained weights rarely train well at one rate (the
    # random-init recipe's 3e-4 is past what fine-tuning a checkpoint takes).
    flags.DEFINE_float("checkpoint_learning_rate", None, "Learning rate for the --sizes "
                       "entries that are checkpoint folders (default: --learning_rate).",
                       flag_values=flag_values)


def plan_grid(base, sizes, checkpoint_learning_rate=None):
    """(label, run config) per entry of --sizes: a shape → random init, a folder → that
    checkpoint (at checkpoint_learning_rate, where given); the config's output_dir is the
    entry's folder (seeds go below it)."""
    from kerasbert.model.backbone import parse_model_size

    entries = [s for item in sizes for s in (PAPER_SIZES if item == "paper" else [item])]
    if not entries:
        raise InputError("--sizes: give at least one L/H/A shape or checkpoint folder")
    plan = []
    for entry in entries:
        if os.path.isdir(entry):
            label = os.path.basename(os.path.normpath(entry))
            config = dataclasses.replace(base, init_checkpoint=entry)
            if checkpoint_learning_rate is not None:
                config = dataclasses.replace(config, learning_rate=checkpoint_learning_rate)
        else:
            try:
                shape = parse_model_size(entry)
            except InputError:
                raise InputError(f"--sizes: {entry!r} is neither an L/H/A shape nor a "
                                 "checkpoint folder") from None
            label = "/".join(str(n) for n in shape)
            config = dataclasses.replace(base, init_checkpoint="random", model_size=label)
        folder = label.replace("/", "-")
        if any(folder == os.path.basename(c.output_dir) for _, c in plan):
            raise InputError(f"--sizes: {entry} is given twice")
        plan.append((label, dataclasses.replace(
            config, output_dir=os.path.join(base.output_dir, folder))))
    return plan


def encoder_shape_and_parameters(run_dir):
    """(L, H, A, parameters) of the encoder a run saved (the fine-tuned one)."""
    from kerasbert.model import encoders

    backbone = encoders.load_encoder(run_dir).backbone
    return (backbone.num_layers, backbone.hidden_dim, backbone.num_heads,
            int(backbone.count_params()))


def plan_seeds(plan, task, seeds):
    """[(label, {seed: resolved run config in <entry folder>/seed-<n>})]."""
    return [(label, runner.seed_runs(config, task, config.output_dir, seeds))
            for label, config in plan]


def main(argv):
    from kerasbert.main import FLAGS

    runner.no_arguments(argv)
    task, base, seeds = runner.from_flags(FLAGS)
    if FLAGS.checkpoint_learning_rate is not None and FLAGS.checkpoint_learning_rate <= 0:
        raise InputError("--checkpoint_learning_rate: must be positive")
    rows = plan_seeds(plan_grid(base, FLAGS.sizes, FLAGS.checkpoint_learning_rate), task,
                      seeds)
    runner.run_rows(rows, "model_size_grid", FLAGS.baseline)
    write_outputs(base.output_dir, task, rows, seeds, FLAGS.baseline)
    return 0


def describe_rows(rows, task):
    """Per entry: its shape, init and encoder parameters (from its first finished run's
    encoder/), and every run's line for grid.csv."""
    info, lines = {}, []
    for label, runs in rows:
        for seed, config in runs.items():
            metrics = {k: v for k, v in run_folder.read_metrics(config.output_dir).items()
                       if k != "phases"}
            if not metrics:
                continue
            if label not in info:
                layers, hidden, heads, parameters = encoder_shape_and_parameters(
                    config.output_dir)
                info[label] = {"size": f"{layers}/{hidden}/{heads}", "parameters": parameters,
                               "init": ("random" if config.init_checkpoint == "random"
                                        else label),
                               "learning_rate": config.learning_rate}
            history = run_folder.read_run_history(config.output_dir)
            lines.append({**info[label], "seed": seed, "metrics": metrics,
                          "seconds": history[-1]["seconds"] if history else "",
                          "run": os.path.relpath(config.output_dir,
                                                 os.path.dirname(os.path.dirname(
                                                     config.output_dir)))})
    return info, lines


def rates_differ(info):
    """Whether the entries trained at more than one learning rate (--checkpoint_learning_rate):
    then grid.md's table has an lr column and grid.json's sizes name each entry's rate."""
    return len({entry["learning_rate"] for entry in info.values()}) > 1


def grid_experiment(first, seeds, info):
    """The experiment findings.py shows: the first run's data and budget, and the sizes as
    rows (L/H/A and init each) in place of the first run's own --model_size and encoder."""
    per_size_rate = rates_differ(info)
    experiment = restarts.experiment(first, seeds, sizes=[
        f"{entry['size']} ({entry['init']}" + (
            f", lr {entry['learning_rate']:g})" if per_size_rate else ")")
        for entry in info.values()])
    experiment.pop("model_size", None)
    # else the first run's would read as every run's
    if len({entry["init"] for entry in info.values()}) > 1:
        experiment["init_checkpoint"] = "per size"
    if per_size_rate:
        experiment["learning_rate"] = "per size"
    return experiment


def write_outputs(output_dir, task, rows, seeds, baseline=None):
    from kerasbert.analysis.report_plots import plot_size_grid

    metric = task.main_metric
    info, lines = describe_rows(rows, task)
    summary = runner.summarize(rows, metric, task, task.dev_splits[0], baseline, info)
    keys = list(dict.fromkeys([metric] + [k for r in lines for k in r["metrics"]]))
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["L/H/A", "init", "learning_rate", "encoder_parameters", "seed", *keys,
                     "train_seconds", "run"])
    for r in lines:
        writer.writerow([r["size"], r["init"], r["learning_rate"], r["parameters"], r["seed"],
                         *[r["metrics"].get(k, "") for k in keys], r["seconds"], r["run"]])
    atomic_write_text(os.path.join(output_dir, "grid.csv"), buffer.getvalue())
    first = rows[0][1][seeds[0]]
    checkpoint_rate = "".join(sorted({
        f" (checkpoints: {entry['learning_rate']:g})" for entry in info.values()
        if entry["init"] != "random" and entry["learning_rate"] != first.learning_rate}))
    header = (f"### {task.name}: dev {metric} by encoder size, seeds "
              f"{', '.join(map(str, seeds))}\n\n"
              f"Data {first.data_dir or 'bundled sample'} (max_train_examples "
              f"{first.max_train_examples}); {first.num_train_epochs:g} epochs, lr "
              f"{first.learning_rate:g}{checkpoint_rate}, batch {first.train_batch_size}.\n\n")
    sizes = {label: info[label]["size"] for label in info}
    params = {label: f"{info[label]['parameters'] / 1e6:.2f}M" for label in info}
    inits = {label: info[label]["init"] for label in info}
    rates = {label: f"{info[label]['learning_rate']:g}" for label in info}
    extra = [("L/H/A", sizes), ("init", inits)] + (
        [("lr", rates)] if rates_differ(info) else []) + [
        ("encoder parameters", params)]
    text = header + restarts.markdown(summary, scale=1.0, digits=4, row_header="entry",
                                      extra=extra)
    runner.publish(output_dir, "grid", {task.name: summary}, text,
                   grid_experiment(first, seeds, info))
    plot_size_grid([{"parameters": info[r["label"]]["parameters"], "value": r["mean"],
                     "std": r["std"], "size": info[r["label"]]["size"],
                     "init": info[r["label"]]["init"], "label": r["label"]}
                    for r in summary["rows"] if r["label"] in info and r["mean"] is not None],
                   os.path.join(output_dir, "grid.png"), metric,
                   title=f"{task.name}: mean dev {metric} (± std) by encoder size")


run = runner.command(main, define_flags)
