"""Benchmark: per-batch padding (kerasbert's pipeline) vs always padding to max_seq_length.

    python -m benchmarks.bench_padding --task=sst2 --data_dir=<GLUE>/SST-2 \
        --max_train_examples=640 --num_train_epochs=1 --dropout=0 --output_dir=runs/pad-sst2

Takes every flag of `python -m kerasbert.main` and runs the same task twice, end to end: once
as kerasbert does (each batch trimmed to its own longest sequence, kerasbert/data/pipeline.py)
and once with every batch padded back to --max_seq_length, each in a fresh process. Padded positions are masked out
of attention, so with --dropout=0 (dropout masks are drawn per shape) both give the same
losses and metrics up to float rounding. Prints a table (also written to
<output_dir>/padding.md): wall seconds of the run, training+eval seconds, the dev main
metric, the final training loss, and the speed-up.
"""

import os
import sys
import time

from benchmarks import run_flags
from benchmarks.processes import child_env, module_command
from kerasbert import plugins, run_folder
from kerasbert import run as run_lib
from kerasbert.io_utils import atomic_write_text

FLAGS = run_flags.FLAGS


def padded_to_max_length(make_dataset):
    """`make_dataset`, but every batch padded back to the features' full width."""
    import tensorflow as tf

    def make(inputs, labels, batch_size, shuffle_seed=None, labels_per_token=False,
             group_by_length=0):
        if labels_per_token:
            raise SystemExit("bench_padding: sequence-level tasks only (GLUE)")
        width = len(next(iter(inputs.values()))[0])
        dataset = make_dataset(inputs, labels, batch_size, shuffle_seed=shuffle_seed,
                               group_by_length=group_by_length)

        def pad(batch, batch_labels):
            missing = width - tf.shape(batch["token_ids"])[-1]
            return {k: tf.pad(v, [[0, 0], [0, missing]]) for k, v in batch.items()}, batch_labels

        return dataset.map(pad)

    return make


VARIANTS = {"per_batch": "per-batch (kerasbert)", "max_length": "always max_seq_length"}


def run_variant(variant):
    """One run in this process (a fresh one per variant, so both pay the same start-up)."""
    from kerasbert.data import pipeline

    if variant == "max_length":
        pipeline.make_dataset = padded_to_max_length(pipeline.make_dataset)
    task = plugins.registry().task(FLAGS.task)
    run_lib.execute(run_flags.run_config(task))


def main(argv):
    if FLAGS.bench_variant:
        return run_variant(FLAGS.bench_variant)
    import subprocess

    task = plugins.registry().task(FLAGS.task)
    rows = []
    for variant, name in VARIANTS.items():
        out = os.path.join(FLAGS.output_dir, variant)
        started = time.perf_counter()
        subprocess.run(module_command(sys.executable, "bench_padding", *sys.argv[1:],
                                      f"--bench_variant={variant}", f"--output_dir={out}",
                                      "--overwrite_output_dir"), check=True, env=child_env())
        wall = time.perf_counter() - started
        metrics = run_folder.read_metrics(out)
        last = run_folder.read_run_history(out)[-1]
        rows.append((name, wall, float(last["seconds"]), metrics[task.main_metric],
                     float(last["train_loss"])))
    m = task.main_metric
    lines = [f"| padding | process wall s | train+eval s | dev {m} | final train loss |",
             "|---|---|---|---|---|"]
    lines += [f"| {n} | {w:.1f} | {s:.1f} | {v:.4f} | {loss:.6f} |" for n, w, s, v, loss in rows]
    lines.append(f"\nspeed-up of per-batch padding: {rows[1][1] / rows[0][1]:.2f}× wall, "
                 f"{rows[1][2] / rows[0][2]:.2f}× train+eval; |Δ dev {m}| = "
                 f"{abs(rows[0][3] - rows[1][3]):.2g}, |Δ train loss| = "
                 f"{abs(rows[0][4] - rows[1][4]):.2g}")
    table = "\n".join(lines) + "\n"
    atomic_write_text(os.path.join(FLAGS.output_dir, "padding.md"), table)
    sys.stdout.write(table)
    return 0


if __name__ == "__main__":
    from absl import flags

    flags.DEFINE_enum("bench_variant", None, list(VARIANTS), "(internal) run one variant.")
    run_flags.run(main)
