"""BERT's Table 7 on CoNLL-2003: fine-tuning vs the six feature-based layer choices, over
seeds.

    python tools/ner_table.py --data_dir=../shared/data/conll2003 --max_train_examples=2000 \
        --num_train_epochs=3 --seeds=1,2,3 --output_dir=runs/ner-table

Takes every `kerasbert.main` flag; --learning_rate applies to fine-tuning and
--frozen_learning_rate to the feature-based runs (a new BiLSTM wants a larger one). Runs
fine-tuning (the `tagger` head) and `feature_bilstm` with each layer choice on the same
data and, seed by seed, the same seed; each (approach, seed) is an ordinary kerasbert run in
`<output_dir>/<tagger or layer choice>/seed-<n>/`, reused when finished (an unfinished one
resumes). Writes `table.md` and `table.json`: per approach n, mean ± sample std, min–max and
a 95% bootstrap interval of dev F1 over seeds and dev sentences (from each run's
valid_predictions.txt), and the paired difference to --baseline (default fine-tuning).
"""

import dataclasses
import os
import sys


from kerasbert import main as kb_main
from kerasbert import plugins, restarts
from kerasbert import run as run_lib
from kerasbert.config import RunConfig
from kerasbert.errors import InputError
from kerasbert.heads.feature_bilstm import LAYER_CHOICES

FLAGS = kb_main.FLAGS
ROWS = [("Fine-tuning", "tagger", None)] + [
    (f"Feature-based: {layers}", "feature_bilstm", layers) for layers in LAYER_CHOICES]


def plan(base, task, seeds):
    """[(approach, {seed: run config})], every config resolved."""
    rows = []
    for label, head, layers in ROWS:
        folder = os.path.join(base.output_dir, head if layers is None else layers)
        options = dict(base.head_options, feature_bilstm_layers=layers) if layers else {}
        rows.append((label, {seed: dataclasses.replace(
            base, head=head, output_dir=restarts.seed_folder(folder, seed), seed=seed,
            overwrite_output_dir=False, head_options=options,
            learning_rate=base.learning_rate if layers is None else base.frozen_learning_rate,
        ).resolved(task) for seed in seeds}))
    return rows


def table(rows, task, baseline=None):
    collected = restarts.collect(
        [{"label": label, "runs": {s: c.output_dir for s, c in runs.items()}}
         for label, runs in rows], "f1", task.kind, task.dev_splits[0])
    return restarts.summarize(collected, "f1", baseline)


def main(argv):
    if len(argv) > 1:
        raise InputError(f"unexpected arguments: {' '.join(argv[1:])}")
    FLAGS.task = "conll2003"
    registry = plugins.registry()
    task = registry.task("conll2003")
    base = RunConfig.from_flags(FLAGS, kb_main.head_options(FLAGS, "feature_bilstm"))
    seeds = restarts.parse_seeds(FLAGS.seeds, base.seed)
    rows = plan(base, task, seeds)
    restarts.baseline_label([label for label, _ in rows], FLAGS.baseline)
    restarts.run_all([c for _, runs in rows for c in runs.values()],
                     lambda c: run_lib.execute(c, registry), tool="ner_table")
    summary = table(rows, task, FLAGS.baseline)
    tuned, frozen = rows[0][1][seeds[0]], rows[1][1][seeds[0]]
    header = (f"### CoNLL-2003 (BERT Table 7): fine-tuning vs feature-based, seeds "
              f"{', '.join(map(str, seeds))}\n\n"
              f"Data {tuned.data_dir or 'bundled sample'} (max_train_examples "
              f"{tuned.max_train_examples}); {tuned.num_train_epochs:g} epochs; fine-tuning "
              f"lr {tuned.learning_rate:g}, feature-based lr {frozen.learning_rate:g}.\n\n")
    text = header + restarts.markdown(summary, row_header="approach")
    restarts.write_outputs(base.output_dir, "table", {task.name: summary}, text,
                           restarts.command_line(),
                           restarts.experiment(tuned, seeds,
                                               feature_learning_rate=frozen.learning_rate))
    sys.stdout.write(text)
    return 0


def run():
    kb_main.run_tool(main)


if __name__ == "__main__":
    run()
