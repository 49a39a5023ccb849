"""Fine-tune only vs frozen only vs stack-and-finetune (Wang et al. 2019) on one task/head.

    python tools/compare_strategies.py --task=mrpc --head=bimpm \
        --data_dir=../shared/data/glue/MRPC --max_train_examples=1000 \
        --frozen_epochs=2 --num_train_epochs=2 --output_dir=runs/compare-mrpc

Takes every `kerasbert.main` flag. The three strategies use the same seed, data and
encoder: fine-tune only (--num_train_epochs), frozen only (--frozen_epochs) and both in
sequence. Writes `comparison.md` (a Markdown table) and `curves.png` (train and dev
curves across the phase boundary) into --output_dir; each run is an ordinary kerasbert
run in a sub-folder.
"""

import dataclasses
import os
import sys

from absl import app

from kerasbert import main as kb_main
from kerasbert import plugins, run_folder
from kerasbert import run as run_lib
from kerasbert.config import RunConfig
from kerasbert.io_utils import atomic_write_text

FLAGS = kb_main.FLAGS
STRATEGIES = {  # name -> (uses the frozen phase, uses the fine-tuning phase)
    "fine-tune only": (False, True),
    "frozen only": (True, False),
    "stack-and-finetune": (True, True),
}


def main(argv):
    task = plugins.registry().task(FLAGS.task)
    head = FLAGS.head or task.default_head
    base = RunConfig.from_flags(FLAGS, kb_main.head_options(FLAGS, head))
    frozen_epochs = base.frozen_epochs or 2.0
    finetune_epochs = base.num_train_epochs if base.num_train_epochs is not None else 2.0
    rows, curves = [], {}
    for name, (frozen, finetune) in STRATEGIES.items():
        out = os.path.join(base.output_dir, name.replace(" ", "_"))
        config = dataclasses.replace(
            base, output_dir=out, overwrite_output_dir=True,
            frozen_epochs=frozen_epochs if frozen else 0.0,
            num_train_epochs=finetune_epochs if finetune else 0.0)
        metrics = run_lib.execute(config)
        history = run_folder.read_run_history(out)
        curves[name] = history
        best = max(float(r[f"dev_{task.main_metric}"]) for r in history)
        rows.append((name, metrics[task.main_metric], best,
                     history[-1].get("train_dev_gap", ""), history[-1]["seconds"]))
    m = task.main_metric
    lines = [f"| strategy | final dev {m} | best dev {m} | train − dev accuracy, last epoch "
             "| train seconds |", "|---|---|---|---|---|"]
    lines += [f"| {n} | {f:.4f} | {b:.4f} | {g} | {s} |" for n, f, b, g, s in rows]
    table = "\n".join(lines) + "\n"
    atomic_write_text(os.path.join(base.output_dir, "comparison.md"), table)
    from kerasbert.analysis.plots import plot_curves

    plot_curves(curves, os.path.join(base.output_dir, "curves.png"),
                metric="accuracy" if "dev_accuracy" in curves["fine-tune only"][0] else m,
                title=f"{task.name}, head {head}")
    sys.stdout.write(table)


if __name__ == "__main__":
    kb_main.define_plugin_flags()
    app.run(main)
