"""Benchmark: --group_by_length vs per-batch padding alone, over seeds: training time and the
dev metric.

    python -m benchmarks.bench_group_by_length --task=sst2 --data_dir=<GLUE>/SST-2 \
        --max_train_examples=2000 --num_train_epochs=1 --seeds=1,2,3 --output_dir=runs/group-sst2

Takes every flag of `python -m kerasbert.main`. Each (variant, seed) is an ordinary kerasbert
run in `<output_dir>/<variant>/seed-<n>/`, both variants with the same seed, so they differ only in
how the epoch's shuffled rows are cut into batches; finished runs are reused. The order of
the two alternates from seed to seed, so that whatever warms up in the process (or loads the
machine) falls on both. Writes `group_by_length.md` / `.json`: per variant the training
seconds (evaluation excluded) and the dev main metric, mean ± sample std over seeds; the
paired time ratio (grouped / plain) and the paired metric difference with 95% Student-t
intervals; and the padded tokens per epoch each way (what grouping saves, computed from the
batches themselves).
"""

import dataclasses
import os
import sys

from benchmarks import run_flags
from kerasbert import plugins, restarts, run_folder
from kerasbert import run as run_lib
from kerasbert.analysis import stats
from kerasbert.errors import InputError

FLAGS = run_flags.FLAGS
VARIANTS = ("per-batch padding", "group_by_length")


def plan(base, task, seeds):
    """{variant: {seed: resolved run config}}."""
    return {name: {seed: dataclasses.replace(
        base, output_dir=restarts.seed_folder(
            os.path.join(base.output_dir, name.replace(" ", "_")), seed),
        overwrite_output_dir=False, seed=seed,
        group_by_length=name == "group_by_length").resolved(task) for seed in seeds}
        for name in VARIANTS}


def training_seconds(run_dir):
    """A finished run's training wall seconds, its evaluations taken out (history.csv's
    cumulative `seconds` minus each epoch's `eval_seconds`)."""
    history = run_folder.read_run_history(run_dir)
    return (float(history[-1]["seconds"])
            - sum(float(r.get("eval_seconds") or 0) for r in history))


def padded_tokens(config, task, registry):
    """Word-piece positions the training batches of the first epoch hold, padding included,
    with and without grouping: {variant: tokens} (the compute that grouping saves)."""
    from kerasbert.data import pipeline
    from kerasbert.data.tokenization import WordPieceTokenizer

    encoder = run_lib.load_encoder(config)
    tokenizer = WordPieceTokenizer(encoder.vocab_file, do_lower_case=encoder.do_lower_case)
    features = task.featurize(run_lib.read_split(config, task, "train"), tokenizer,
                              config.max_seq_length)
    kind = registry.kind_of(task)
    out = {}
    for name in VARIANTS:
        group = config.length_group_batches if name == "group_by_length" else 0
        batches = pipeline.dataset_of(features, config.train_batch_size,
                                      shuffle_seed=config.seed, group_by_length=group,
                                      labels_per_token=kind.labels_per_token)
        out[name] = int(sum(int(b["padding_mask"].shape[0]) * int(b["padding_mask"].shape[-1])
                            for b, _ in batches))
    return out


def summary(rows, task):
    m = task.main_metric
    seeds = list(rows[VARIANTS[0]])
    done = [s for s in seeds
            if all(run_folder.read_metrics(rows[v][s].output_dir) for v in VARIANTS)]
    if len(done) < 2:
        raise InputError(f"{len(done)} seed(s) finished both ways: a spread needs at least 2")
    out = {"metric": m, "seeds": done, "variants": {}}
    for name in VARIANTS:
        seconds = [training_seconds(rows[name][s].output_dir) for s in done]
        values = [run_folder.read_metrics(rows[name][s].output_dir)[m] for s in done]
        out["variants"][name] = {"train_seconds": seconds, "metric": values,
                                 "seconds_summary": stats.describe(seconds),
                                 "metric_summary": stats.describe(values)}
    plain, grouped = (out["variants"][v] for v in VARIANTS)
    ratios = [g / p for g, p in zip(grouped["train_seconds"], plain["train_seconds"])]
    out["time_ratio"] = {"values": ratios, **stats.describe(ratios),
                         **{k: stats.t_interval(ratios)[k] for k in ("low", "high")}}
    out["metric_difference"] = stats.paired_difference(grouped["metric"], plain["metric"])
    return out


def markdown(result, header):
    m = result["metric"]
    lines = [header, "", f"| batches | train s (mean ± std) | dev {m} × 100 (mean ± std, "
             "min–max) | padded tokens, epoch 1 |", "|---|---|---|---|"]
    for name in VARIANTS:
        v = result["variants"][name]
        s, q = v["seconds_summary"], v["metric_summary"]
        lines.append(f"| {name} | {s['mean']:.1f} ± {s['std']:.1f} | {100 * q['mean']:.1f} ± "
                     f"{100 * q['std']:.1f} ({100 * q['min']:.1f}–{100 * q['max']:.1f}) | "
                     f"{result['padded_tokens'][name]:,} |")
    r, d = result["time_ratio"], result["metric_difference"]
    lines.append(f"\nTraining time grouped / plain, paired over seeds "
                 f"{', '.join(map(str, result['seeds']))}: {r['mean']:.3f} ± {r['std']:.3f} "
                 f"(95% interval [{r['low']:.3f}, {r['high']:.3f}]); dev {m} grouped − plain: "
                 f"{100 * d['difference']:+.1f} [{100 * d['low']:+.1f}, {100 * d['high']:+.1f}]"
                 " points. Padded tokens: "
                 f"{result['padded_tokens'][VARIANTS[1]] / result['padded_tokens'][VARIANTS[0]]:.3f}"
                 " of plain.")
    return "\n".join(lines) + "\n"


def main(argv):
    if len(argv) > 1:
        raise InputError(f"unexpected arguments: {' '.join(argv[1:])}")
    registry = plugins.registry()
    task = registry.task(FLAGS.task)
    base = run_flags.run_config(task)
    seeds = restarts.parse_seeds(FLAGS.seeds, base.seed)
    rows = plan(base, task, seeds)
    # Alternate which variant runs first, seed by seed.
    order = [rows[VARIANTS[(i + k) % 2]][s] for i, s in enumerate(seeds) for k in (0, 1)]
    restarts.run_all(order, lambda c: run_lib.execute(c, registry), tool="bench_group_by_length")
    result = summary(rows, task)
    result["padded_tokens"] = padded_tokens(rows[VARIANTS[0]][seeds[0]], task, registry)
    first = rows[VARIANTS[0]][seeds[0]]
    header = (f"### {task.name}: --group_by_length (windows of {first.length_group_batches} "
              f"batches) vs per-batch padding alone\n\nData {first.data_dir or 'bundled sample'}"
              f" (max_train_examples {first.max_train_examples}), batch "
              f"{first.train_batch_size}, max_seq_length {first.max_seq_length}, "
              f"{first.num_train_epochs:g} epoch(s), lr {first.learning_rate:g}.")
    text = markdown(result, header)
    restarts.write_outputs(base.output_dir, "group_by_length", {task.name: result}, text,
                           restarts.command_line(), restarts.experiment(first, seeds))
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    run_flags.run(main)
