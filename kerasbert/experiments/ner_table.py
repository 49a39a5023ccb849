"""BERT's Table 7 on CoNLL-2003 (fine-tuning vs the six feature-based layer choices), or
the CRF and document-context table, over seeds.

    python -m kerasbert.experiments ner_table --data_dir=../shared/data/conll2003 \
        --max_train_examples=2000 --num_train_epochs=3 --seeds=1,2,3 --output_dir=runs/ner-table
    python -m kerasbert.experiments ner_table --ner_rows=crf --document_context=64 \
        --feature_cache_dir=cache/ --data_dir=../shared/data/conll2003 \
        --max_train_examples=2000 --seeds=1,2,3 --output_dir=runs/ner-crf-table

Takes every `kerasbert.main` flag; --learning_rate applies to fine-tuning and
--frozen_learning_rate to the feature-based runs (a new BiLSTM wants a larger one).
--ner_rows picks the rows:
- `table7` (default): fine-tuning (the `tagger` head) and `feature_bilstm` with each layer
  choice;
- `crf`: the softmax `tagger` and `tagger_crf`, each alone and with --document_context
  (N or max, required), and the feature-based `bilstm_crf` on the frozen encoder (its
  --bilstm_crf_* flags; --feature_cache_dir computes the encoder's layers once).
Every row runs on the same data and, seed by seed, the same seed; each (row, seed) is an
ordinary kerasbert run in `<output_dir>/<row>/seed-<n>/` (in a process of its own), reused
when finished (an unfinished one resumes). Writes `table.md` and `table.json`: per row n,
mean ± sample std, min–max and a 95% bootstrap interval of dev F1 over seeds and dev
sentences (from each run's valid_predictions.txt), and the paired difference to --baseline
(default the first row).
"""

import dataclasses
import os

from kerasbert import plugins, restarts
from kerasbert.config import RunConfig, asks_for_context, uses_document_context
from kerasbert.errors import InputError
from kerasbert.experiments import runner
from kerasbert.heads.feature_bilstm import LAYER_CHOICES


def define_flags(flag_values):
    """--ner_rows and --table7_layers, beside kerasbert.main's flags."""
    from absl import flags

    if "ner_rows" in flag_values:  # run twice in one process: defined once
        return
    flags.DEFINE_enum("ner_rows", "table7", ["table7", "crf"],
                      "table7: fine-tuning vs the six feature-based layer choices (BERT Table "
                      "7); crf: softmax tagger vs tagger_crf, without and with "
                      "--document_context, and the feature-based bilstm_crf.",
                      flag_values=flag_values)
    flags.DEFINE_list("table7_layers", list(LAYER_CHOICES),
                      "--ner_rows=table7: the feature-based layer choices to run (each a "
                      "row; fewer rows, a cheaper table on a CPU).", flag_values=flag_values)


@dataclasses.dataclass(frozen=True)
class Row:
    label: str
    folder: str  # under --output_dir
    head: str
    feature_based: bool = False  # the encoder stays frozen: --frozen_learning_rate
    options: tuple = ()  # (head option, value) pairs over the head's own flags
    document_context: str = "0"


def table7_rows(layer_choices=LAYER_CHOICES):
    unknown = [c for c in layer_choices if c not in LAYER_CHOICES]
    if unknown or not layer_choices:
        raise InputError(f"--table7_layers={','.join(layer_choices)}: "
                         + (f"unknown {', '.join(unknown)}; " if unknown else "empty; ")
                         + f"choose from {', '.join(LAYER_CHOICES)}")
    return [Row("Fine-tuning", "tagger", "tagger")] + [
        Row(f"Feature-based: {layers}", layers, "feature_bilstm", True,
            (("feature_bilstm_layers", layers),)) for layers in layer_choices]


def crf_rows(context):
    """Issue #22's comparison: what a CRF adds, what document context adds, and both."""
    if not asks_for_context(context):
        raise InputError("--ner_rows=crf: --document_context must be N > 0 or max (the "
                         "context rows use it)")
    return [
        Row("Softmax tagger", "tagger", "tagger"),
        Row("tagger_crf", "tagger_crf", "tagger_crf"),
        Row(f"Softmax tagger, context {context}", f"tagger-context-{context}", "tagger",
            document_context=context),
        Row(f"tagger_crf, context {context}", f"tagger_crf-context-{context}", "tagger_crf",
            document_context=context),
        Row("Feature-based: bilstm_crf (frozen)", "bilstm_crf-frozen", "bilstm_crf", True,
            (("bilstm_crf_frozen", True),)),
    ]


def plan(base, task, seeds, rows=None, head_flags=None):
    """[(row label, {seed: run config})], every config resolved. `head_flags`: head name ->
    its own flag values (kerasbert.main.head_options), under each row's options."""
    rows = table7_rows() if rows is None else rows
    head_flags = head_flags or {}
    planned = []
    for row in rows:
        folder = os.path.join(base.output_dir, row.folder)
        options = dict(head_flags.get(row.head, {}), **dict(row.options))
        planned.append((row.label, runner.seed_runs(
            base, task, folder, seeds, head=row.head, head_options=options,
            document_context=row.document_context,
            # only a frozen encoder's layers can be cached (a fine-tuning run refuses the flag)
            feature_cache_dir=base.feature_cache_dir if row.feature_based else None,
            learning_rate=base.frozen_learning_rate if row.feature_based else base.learning_rate,
            # a feature-based row trains only its head, at --frozen_learning_rate
            head_learning_rate=None if row.feature_based else base.head_learning_rate)))
    return planned


def table(rows, task, baseline=None):
    return runner.summarize(rows, "f1", task, task.dev_splits[0], baseline)


def table_experiment(tuned, frozen, seeds):
    """The experiment findings.py shows: the fine-tuning row's run config, plus what the
    feature-based rows differ in (head, learning rate, head options but the per-row layer
    choice), so a reader does not take the whole table for `tagger` runs."""
    row_specific = ("feature_bilstm_layers", "bilstm_crf_frozen")
    options = {k: v for k, v in sorted(frozen.head_options.items()) if k not in row_specific}
    return restarts.experiment(tuned, seeds, feature_head=frozen.head,
                               feature_learning_rate=frozen.learning_rate, **options)


def main(argv):
    from kerasbert.main import FLAGS, head_options

    runner.no_arguments(argv)
    FLAGS.task = "conll2003"
    registry = plugins.registry()
    task = registry.task("conll2003")
    base = RunConfig.from_flags(FLAGS, {})
    base.validate()  # --document_context's form, before the rows read it
    if FLAGS.ner_rows == "crf":
        chosen = crf_rows(str(FLAGS.document_context))
    else:
        if uses_document_context(base):
            raise InputError("--document_context: only --ner_rows=crf has context rows")
        chosen = table7_rows(FLAGS.table7_layers)
    head_flags = {row.head: head_options(FLAGS, row.head, registry.heads) for row in chosen}
    seeds = runner.parse_seeds(FLAGS.seeds, base.seed)
    rows = plan(base, task, seeds, chosen, head_flags)
    runner.run_rows(rows, "ner_table", FLAGS.baseline)
    summary = table(rows, task, FLAGS.baseline)
    by_label = {label: runs[seeds[0]] for label, runs in rows}
    tuned = next(by_label[r.label] for r in chosen if not r.feature_based)
    frozen = next(by_label[r.label] for r in chosen if r.feature_based)
    title = ("CoNLL-2003 (BERT Table 7): fine-tuning vs feature-based" if FLAGS.ner_rows ==
             "table7" else "CoNLL-2003: softmax vs CRF, without and with document context")
    header = (f"### {title}, seeds {', '.join(map(str, seeds))}\n\n"
              f"Data {tuned.data_dir or 'bundled sample'} (max_train_examples "
              f"{tuned.max_train_examples}); {tuned.num_train_epochs:g} epochs; fine-tuning "
              f"lr {tuned.learning_rate:g}, feature-based lr {frozen.learning_rate:g}.\n\n")
    text = header + restarts.markdown(summary, row_header="approach")
    runner.publish(base.output_dir, "table", {task.name: summary}, text,
                   table_experiment(tuned, frozen, seeds))
    return 0


run = runner.command(main, define_flags)
