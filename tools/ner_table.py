"""BERT's Table 7 on CoNLL-2003: fine-tuning vs the six feature-based layer choices.

    python tools/ner_table.py --data_dir=../shared/data/conll2003 --max_train_examples=2000 \
        --num_train_epochs=3 --output_dir=runs/ner-table

Takes every `kerasbert.main` flag; --learning_rate applies to fine-tuning and
--frozen_learning_rate to the feature-based runs (a new BiLSTM wants a larger one). Runs
fine-tuning (the `tagger` head) and `feature_bilstm` with each layer choice on the same
data and seed, each an ordinary kerasbert run in a sub-folder, and writes `table.md` with
dev F1 per approach into --output_dir.
"""

import dataclasses
import os
import sys

from absl import app

from kerasbert import main as kb_main
from kerasbert import run as run_lib
from kerasbert import run_folder
from kerasbert.config import RunConfig
from kerasbert.heads.feature_bilstm import LAYER_CHOICES
from kerasbert.io_utils import atomic_write_text

FLAGS = kb_main.FLAGS
ROWS = [("Fine-tuning", "tagger", None)] + [
    (f"Feature-based: {layers}", "feature_bilstm", layers) for layers in LAYER_CHOICES]


def main(argv):
    FLAGS.task = "conll2003"
    base = RunConfig.from_flags(FLAGS, kb_main.head_options(FLAGS, "feature_bilstm"))
    lines = ["| approach | dev F1 | train seconds |", "|---|---|---|"]
    for label, head, layers in ROWS:
        out = os.path.join(base.output_dir, head if layers is None else layers)
        options = dict(base.head_options, feature_bilstm_layers=layers) if layers else {}
        config = dataclasses.replace(
            base, head=head, output_dir=out, overwrite_output_dir=True, head_options=options,
            learning_rate=base.learning_rate if layers is None else base.frozen_learning_rate)
        metrics = run_lib.execute(config)
        seconds = run_folder.read_run_history(out)[-1]["seconds"]
        lines.append(f"| {label} | {100 * metrics['f1']:.1f} | {seconds} |")
        atomic_write_text(os.path.join(base.output_dir, "table.md"), "\n".join(lines) + "\n")
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    kb_main.define_plugin_flags()
    app.run(main)
