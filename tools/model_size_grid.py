"""BERT's model-size table (paper section 5.2, Table 6): dev metric against L/H/A.

    python tools/model_size_grid.py --task=mrpc --data_dir=glue_data/MRPC \
        --sizes=2/64/2,4/128/2,4/256/4 --output_dir=runs/sizes          # CPU-sized (default)
    python tools/model_size_grid.py --task=mrpc --data_dir=glue_data/MRPC --sizes=paper \
        --output_dir=runs/sizes-paper     # 3/768/12 6/768/3 6/768/12 12/768/12 12/1024/16 24/1024/16
    python tools/model_size_grid.py --task=rte --sizes=2/64/2,path/to/pretrained_bert ...

Takes every `kerasbert.main` flag. Each `--sizes` entry is an L/H/A shape (or a
`--model_size` name) trained from a random initialisation (intermediate size 4H, as in
BERT), or a checkpoint folder (anything `--init_checkpoint` takes) fine-tuned from its
weights. Every entry is an ordinary run in `<output_dir>/<L-H-A or folder name>/` with the
same data, seed and recipe; a finished one is skipped when the command is run again.
Writes `grid.md`, `grid.csv` and `grid.png` (dev metric against encoder parameters).
The paper's grid compares *pre-trained* models; random initialisations show what size
alone buys on the task (little, on small data), and given checkpoints give the paper's
comparison.
"""

import csv
import dataclasses
import io
import os
import sys

from absl import app, flags

from kerasbert import main as kb_main
from kerasbert import plugins, run_folder
from kerasbert import run as run_lib
from kerasbert.config import RunConfig
from kerasbert.errors import InputError
from kerasbert.io_utils import atomic_write_text

FLAGS = kb_main.FLAGS
PAPER_SIZES = ["3/768/12", "6/768/3", "6/768/12", "12/768/12", "12/1024/16", "24/1024/16"]
flags.DEFINE_list("sizes", ["2/64/2", "4/128/2", "4/256/4"], "L/H/A shapes (random "
                  "initialisation), checkpoint folders, or 'paper' for the BERT paper's "
                  "Table 6 grid (" + ", ".join(PAPER_SIZES) + ").")


def plan_grid(base, sizes):
    """(label, run config) per entry of --sizes: a shape → random init, a folder → that
    checkpoint."""
    from kerasbert.model.backbone import parse_model_size

    entries = [s for item in sizes for s in (PAPER_SIZES if item == "paper" else [item])]
    if not entries:
        raise InputError("--sizes: give at least one L/H/A shape or checkpoint folder")
    plan = []
    for entry in entries:
        if os.path.isdir(entry):
            label = os.path.basename(os.path.normpath(entry))
            config = dataclasses.replace(base, init_checkpoint=entry)
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


def main(argv):
    if len(argv) > 1:
        raise InputError(f"unexpected arguments: {' '.join(argv[1:])}")
    registry = plugins.registry()
    task = registry.task(FLAGS.task)
    head = FLAGS.head or task.default_head
    base = RunConfig.from_flags(FLAGS, kb_main.head_options(FLAGS, head))
    metric = task.main_metric
    rows = []
    for label, config in plan_grid(base, FLAGS.sizes):
        if run_folder.is_finished(config.output_dir):
            print(f"model_size_grid: {label}: finished before, skipped", flush=True)
            metrics = run_folder.read_metrics(config.output_dir)
        else:
            print(f"model_size_grid: {label} ({config.init_checkpoint})", flush=True)
            metrics = run_lib.execute(config, registry)
        layers, hidden, heads, parameters = encoder_shape_and_parameters(config.output_dir)
        history = run_folder.read_run_history(config.output_dir)
        rows.append({"size": f"{layers}/{hidden}/{heads}", "init": (
            "random" if config.init_checkpoint == "random" else label),
            "parameters": parameters, "value": metrics.get(metric),
            "metrics": {k: v for k, v in metrics.items() if k != "phases"},
            "seconds": history[-1]["seconds"] if history else "",
            "run": os.path.basename(config.output_dir)})
    write_outputs(base.output_dir, task.name, metric, rows)
    return 0


def write_outputs(output_dir, task_name, metric, rows):
    from kerasbert.analysis.report_plots import plot_size_grid
    from kerasbert.report import markdown_table

    keys = list(dict.fromkeys([metric] + [k for r in rows for k in r["metrics"]]))
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["L/H/A", "init", "encoder_parameters", *keys, "train_seconds", "run"])
    for r in rows:
        writer.writerow([r["size"], r["init"], r["parameters"],
                         *[r["metrics"].get(k, "") for k in keys], r["seconds"], r["run"]])
    atomic_write_text(os.path.join(output_dir, "grid.csv"), buffer.getvalue())
    table = markdown_table(
        ["L/H/A", "init", "encoder parameters", *[f"dev {k}" for k in keys], "train s", "run"],
        [[r["size"], r["init"], f"{r['parameters'] / 1e6:.2f}M",
          *[r["metrics"].get(k, "") for k in keys], r["seconds"],
          f"[{r['run']}]({r['run']}/report.md)"] for r in rows])
    atomic_write_text(os.path.join(output_dir, "grid.md"), table)
    plot_size_grid(rows, os.path.join(output_dir, "grid.png"), metric,
                   title=f"{task_name}: dev {metric} by encoder size")
    sys.stdout.write(table)


def run():
    kb_main.define_plugin_flags()

    def guarded(argv):
        try:
            return main(argv)
        except InputError as e:
            print(f"kerasbert: error: {e}", file=sys.stderr)
            return 2

    app.run(guarded)


if __name__ == "__main__":
    run()
