"""Peak memory of reading (and featurizing) a large GLUE TSV, against the file's size.

    python -m benchmarks.bench_reader_memory --megabytes=200 [--featurize_rows=100000]

Generates an SST-2-layout train.tsv of about --megabytes in /tmp (random words from the
BERT vocabulary, ~10 words a row), then measures, each in a fresh process, the peak
resident memory (VmHWM, reset after the imports) above the memory after its imports, of:
  stream     the reader's line stream alone (io_utils.iter_utf8_lines): what reading costs
  whole      the old whole-file read (read_utf8_text + split): the file, decoded, at once
  examples   GlueTask.read_file: every row as an Example (what training starts from)
  featurize  featurize of the first --featurize_rows rows at max_seq_length 128, on top of
             their Examples (int32 token/segment/mask arrays: 1.5 KB a row, kept)
  epoch_held    the training split as an in-memory run now holds a file of 64 MB or more
                (streaming.CompactFeatures: the rows without their padding) and one whole
                shuffled epoch of its batches (batch 32, max_seq_length 128), no model
  epoch_padded  the same from the padded arrays (read_file, featurize, make_dataset): what
                an in-memory run held before, ~80 times the file (opt in: --modes)
--modes picks and orders them (default: stream,whole,examples,featurize,epoch_held);
--json writes the results. Prints one JSON object per mode and a summary table.

    python -m benchmarks.bench_reader_memory --start_training --megabytes=1024 --memory_megabytes=100

instead starts training (5 steps of a random 2-layer H=32 model at max_seq_length 128,
batch 32, no evaluation) with `kerasbert.run.execute` from generated files, each run in a
fresh process, and measures the same peak above the post-import RSS:
  train_memory  --stream_train_data=false: Examples, then the padded feature arrays (from
                64 MB: the rows held without padding, streaming.CompactFeatures)
  train_stream  --stream_train_data=true: a counting pass, then a generator featurizing
                1,024 rows at a time into a shuffle buffer of --shuffle_buffer_size rows
  epoch_stream  no model: one whole shuffled epoch of the streamed batches (does memory
                stay flat over an epoch? and how fast is reading + featurizing?)
at 1 MB (the fixed cost of building and tracing the model), --memory_megabytes (all
modes) and --megabytes (streamed only: padded in memory it needed ~80 times the file).

    python -m benchmarks.bench_reader_memory --start_training --task=conll2003 --megabytes=200 --memory_megabytes=20

does the same for CoNLL-2003 files (`word POS chunk NER` lines, 4-30 vocabulary words a
sentence, random IOB2 entities; a sentence longer than a row makes several rows): the
train_memory and train_stream modes, no epoch_stream.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import time

from benchmarks.processes import child_env, module_command


MODES = ("stream", "whole", "examples", "featurize", "epoch_held", "epoch_padded")


def _vocab():
    """BERT's uncased vocabulary when the MiniLM package is installed (the measured runs),
    else the bundled sample vocabulary."""
    from kerasbert.model.encoders import default_vocab

    return default_vocab()


def _words():
    """The plain ASCII words of the vocabulary, for generated text."""
    with open(_vocab(), encoding="utf-8") as f:
        return [w for w in f.read().split() if w.isalpha() and w.isascii()]


def generate(path, megabytes, seed=0):
    words = _words()
    rng = random.Random(seed)
    target = megabytes * 1024 * 1024
    with open(path, "w", encoding="utf-8") as f:
        f.write("sentence\tlabel\n")
        written, rows = 0, 0
        while written < target:
            line = " ".join(rng.choices(words, k=rng.randint(4, 16))) + f"\t{rng.randint(0, 1)}\n"
            f.write(line)
            written += len(line)
            rows += 1
    return rows


def generate_conll(path, megabytes, seed=0):
    """A CoNLL-2003 layout file of about `megabytes`; returns its number of sentences."""
    words = _words()
    types = ("PER", "ORG", "LOC", "MISC")
    rng = random.Random(seed)
    target = megabytes * 1024 * 1024
    with open(path, "w", encoding="utf-8") as f:
        f.write("-DOCSTART- -X- -X- O\n\n")
        written, sentences = 0, 0
        while written < target:
            lines, entity = [], None
            for word in rng.choices(words, k=rng.randint(4, 30)):
                if entity and rng.random() < 0.5:
                    tag = "I-" + entity
                elif rng.random() < 0.15:
                    entity = rng.choice(types)
                    tag = "B-" + entity
                else:
                    entity, tag = None, "O"
                lines.append(f"{word} NN O {tag}\n")
            text = "".join(lines) + "\n"
            f.write(text)
            written += len(text)
            sentences += 1
    return sentences


def reset_peak():
    """Resets the peak-RSS mark (Linux >= 4.0), so the imports' own peak (TF loading its
    libraries) does not hide what the reader adds; returns the RSS now, in MiB."""
    from kerasbert.training import memory

    if not memory.reset_peak_rss() or memory.rss_mb() is None:
        raise RuntimeError("needs Linux's /proc/self/clear_refs and /proc/self/status")
    return memory.rss_mb()


def peak_above(base):
    """MiB of the peak-RSS mark above `base` (reset_peak's RSS)."""
    from kerasbert.training import memory

    return round(memory.peak_rss_mb() - base, 1)


def measure_epoch(path, rows, shuffle_buffer_size):
    """Peak RSS of one shuffled epoch of the streamed batches, without a model."""
    from kerasbert.data import pipeline, streaming
    from kerasbert.data.tokenization import WordPieceTokenizer
    from kerasbert.tasks import glue

    tokenizer = WordPieceTokenizer(_vocab(), do_lower_case=True)
    tokenizer.tokenize("warm up")
    start = time.perf_counter()
    base = reset_peak()
    train = streaming.StreamedFeatures(glue.TASKS["sst2"], path, tokenizer, 128,
                                       shuffle_buffer_size)
    counted = time.perf_counter()
    seen = sum(int(labels.shape[0]) for _, labels in
               pipeline.dataset_of(train, 32, shuffle_seed=1))
    assert seen == rows == train.num_rows, (seen, rows, train.num_rows)
    return {"mode": "epoch_stream", "rows": rows,
            "file_mb": round(os.path.getsize(path) / 2**20, 1),
            "baseline_mb": round(base, 1),
            "peak_above_baseline_mb": peak_above(base),
            "counting_seconds": round(counted - start, 1),
            "epoch_rows_per_second": round(rows / (time.perf_counter() - counted)),
            "seconds": round(time.perf_counter() - start, 1)}


def measure_held_epoch(mode, path):
    """Peak RSS of holding `path` as a training split in memory and reading one shuffled
    epoch of its batches: held without padding (epoch_held) or as padded arrays
    (epoch_padded), without a model."""
    from kerasbert.data import pipeline, streaming
    from kerasbert.data.tokenization import WordPieceTokenizer
    from kerasbert.tasks import glue

    task = glue.TASKS["sst2"]
    tokenizer = WordPieceTokenizer(_vocab(), do_lower_case=True)
    tokenizer.tokenize("warm up")
    start = time.perf_counter()
    base = reset_peak()
    if mode == "epoch_held":
        train = streaming.CompactFeatures(task, path, tokenizer, 128)
    else:
        train = task.featurize(task.read_file(path, "train"), tokenizer, 128)
    held = time.perf_counter()
    rows = sum(int(labels.shape[0]) for _, labels in
               pipeline.dataset_of(train, 32, shuffle_seed=1))
    assert rows == pipeline.num_rows(train), (rows, pipeline.num_rows(train))
    return {"mode": mode, "rows": rows, "file_mb": round(os.path.getsize(path) / 2**20, 1),
            "baseline_mb": round(base, 1), "peak_above_baseline_mb": peak_above(base),
            "reading_seconds": round(held - start, 1),
            "epoch_rows_per_second": round(rows / (time.perf_counter() - held)),
            "seconds": round(time.perf_counter() - start, 1)}


def measure_training(mode, path, rows, shuffle_buffer_size, steps=5, task="sst2"):
    """Peak RSS of `execute` training `steps` steps from `path` (see the docstring)."""
    import math
    import shutil
    import tempfile

    from kerasbert import run as run_lib
    from kerasbert import run_folder
    from kerasbert.config import RunConfig
    from kerasbert.data import pipeline, streaming  # noqa: F401  (imported before the baseline)

    out = tempfile.mkdtemp(prefix="kerasbert_bench_train_")
    per_epoch = math.ceil(rows / 32)
    config = RunConfig(task=task, output_dir=os.path.join(out, "run"), train_file=path,
                       init_checkpoint="random", model_size="2/32/2", max_seq_length=128,
                       train_batch_size=32, learning_rate=1e-4, do_eval=False,
                       num_train_epochs=(steps - 0.5) / per_epoch, save_checkpoints_steps=0,
                       stream_train_data="true" if mode == "train_stream" else "false",
                       shuffle_buffer_size=shuffle_buffer_size)
    start = time.perf_counter()
    base = reset_peak()
    try:
        run_lib.execute(config)
        trained_steps = int(run_folder.read_run_history(os.path.join(out, "run"))[-1]["step"])
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return {"mode": mode, "task": task, "rows": rows,
            "file_mb": round(os.path.getsize(path) / 2**20, 1), "steps": trained_steps, "baseline_mb": round(base, 1),
            "peak_above_baseline_mb": peak_above(base),
            "seconds": round(time.perf_counter() - start, 1)}


def measure(mode, path, featurize_rows):
    from kerasbert.data.tokenization import WordPieceTokenizer
    from kerasbert.io_utils import iter_utf8_lines, read_utf8_text
    from kerasbert.tasks import glue

    task = glue.TASKS["sst2"]
    tokenizer = None
    if mode == "featurize":
        tokenizer = WordPieceTokenizer(_vocab(), do_lower_case=True)
        tokenizer.tokenize("warm up")
    start = time.perf_counter()
    base = reset_peak()
    if mode == "stream":
        rows = sum(1 for _ in iter_utf8_lines(path, "GLUE")) - 1
    elif mode == "whole":
        rows = len(read_utf8_text(path, "GLUE").split("\n")) - 2
    elif mode == "examples":
        rows = len(task.read_file(path, "train"))
    else:  # featurization alone: the peak is reset once the examples are read
        examples = task.read_file(path, "train")[:featurize_rows]
        base = reset_peak()
        features = task.featurize(examples, tokenizer, 128)
        rows = len(features.inputs["token_ids"])
    return {"mode": mode, "rows": rows, "file_mb": round(os.path.getsize(path) / 2**20, 1),
            "baseline_mb": round(base, 1),
            "peak_above_baseline_mb": peak_above(base),
            "seconds": round(time.perf_counter() - start, 1)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=200)
    parser.add_argument("--featurize_rows", type=int, default=100_000)
    parser.add_argument("--path", default="/tmp/kerasbert_bench_reader/train.tsv")
    parser.add_argument("--start_training", action="store_true",
                        help="measure starting training, streamed and in memory")
    parser.add_argument("--memory_megabytes", type=int, default=100,
                        help="with --start_training: the file size of the in-memory runs")
    parser.add_argument("--shuffle_buffer_size", type=int, default=100_000)
    parser.add_argument("--task", default="sst2", choices=["sst2", "conll2003"],
                        help="with --start_training: the layout of the generated files")
    parser.add_argument("--modes", default="stream,whole,examples,featurize,epoch_held",
                        help="without --start_training: the measurements, comma-separated "
                        f"(of {', '.join(MODES)})")
    parser.add_argument("--json", default=None, help="also write the results here")
    parser.add_argument("--mode", help=argparse.SUPPRESS)  # one measurement (child process)
    parser.add_argument("--rows", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        parser.error(f"--modes={args.modes}: expected some of {', '.join(MODES)}")
    if args.megabytes < 1:
        parser.error(f"--megabytes={args.megabytes}: must be at least 1")
    if args.mode:
        if args.mode == "epoch_stream":
            result = measure_epoch(args.path, args.rows, args.shuffle_buffer_size)
        elif args.mode in ("epoch_held", "epoch_padded"):
            result = measure_held_epoch(args.mode, args.path)
        elif args.mode.startswith("train_"):
            result = measure_training(args.mode, args.path, args.rows, args.shuffle_buffer_size,
                                      task=args.task)
        else:
            result = measure(args.mode, args.path, args.featurize_rows)
        print(json.dumps(result))
        return
    os.makedirs(os.path.dirname(args.path), exist_ok=True)
    if args.start_training:
        start_training(args)
        return
    rows = generate(args.path, args.megabytes)
    print(f"generated {args.path}: {os.path.getsize(args.path) / 2**20:.0f} MB, {rows} rows",
          flush=True)
    results = []
    env = child_env({"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""})
    for mode in modes:
        out = subprocess.run(module_command(sys.executable, "bench_reader_memory", f"--mode={mode}",
                                            f"--path={args.path}",
                                            f"--featurize_rows={args.featurize_rows}"),
                             check=True, capture_output=True, text=True, env=env)
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(json.dumps(results[-1]), flush=True)
    print(f"\n{'mode':12s} {'rows':>9s} {'peak MB above baseline':>24s} {'x file size':>12s} "
          f"{'KB a row':>9s}")
    for r in results:
        mb = r["peak_above_baseline_mb"]
        print(f"{r['mode']:12s} {r['rows']:9d} {mb:24.1f} {mb / r['file_mb']:12.2f} "
              f"{mb * 1024 / r['rows']:9.2f}")
    os.remove(args.path)
    if args.json:
        from kerasbert.io_utils import atomic_write_json

        atomic_write_json(args.json, {"megabytes": args.megabytes, "results": results})


def start_training(args):
    env = child_env({"TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""})
    plan = [(1, "train_memory"), (1, "train_stream"), (args.memory_megabytes, "train_memory"),
            (args.memory_megabytes, "train_stream"), (args.memory_megabytes, "epoch_stream"),
            (args.megabytes, "train_stream")]
    conll = args.task == "conll2003"
    if conll:  # rows here are sentences (the steps of an epoch count them)
        plan = [step for step in plan if step[1] != "epoch_stream"]
    results = []
    for megabytes in dict.fromkeys(mb for mb, _ in plan):
        path = os.path.join(os.path.dirname(args.path),
                            f"train-{megabytes}mb" + (".txt" if conll else ".tsv"))
        started = time.perf_counter()
        rows = (generate_conll if conll else generate)(path, megabytes)
        print(f"generated {path}: {os.path.getsize(path) / 2**20:.0f} MB, {rows} rows "
              f"({time.perf_counter() - started:.0f} s)", flush=True)
        try:
            for mode in [m for mb, m in plan if mb == megabytes]:
                out = subprocess.run(
                    module_command(sys.executable, "bench_reader_memory", f"--mode={mode}",
                                   f"--path={path}", f"--rows={rows}",
                                   f"--shuffle_buffer_size={args.shuffle_buffer_size}",
                                   f"--task={args.task}"),
                    check=True, capture_output=True, text=True, env=env)
                results.append(json.loads(out.stdout.strip().splitlines()[-1]))
                print(json.dumps(results[-1]), flush=True)
        finally:
            os.remove(path)
    print(f"\n{'mode':13s} {'file MB':>8s} {'rows':>10s} {'peak MB above baseline':>23s} "
          f"{'x file size':>12s} {'seconds':>8s}")
    for r in results:
        mb = r["peak_above_baseline_mb"]
        print(f"{r['mode']:13s} {r['file_mb']:8.1f} {r['rows']:10d} {mb:23.1f} "
              f"{mb / r['file_mb']:12.2f} {r['seconds']:8.1f}")


if __name__ == "__main__":
    main()
