"""Peak memory of reading (and featurizing) a large GLUE TSV, against the file's size.

    python tools/bench_reader_memory.py --megabytes=200 [--featurize_rows=100000]

Generates an SST-2-layout train.tsv of about --megabytes in /tmp (random words from the
BERT vocabulary, ~10 words a row), then measures, each in a fresh process, the peak
resident memory (VmHWM, reset after the imports) above the memory after its imports, of:
  stream     the reader's line stream alone (io_utils.iter_utf8_lines): what reading costs
  whole      the old whole-file read (read_utf8_text + split): the file, decoded, at once
  examples   GlueTask.read_file: every row as an Example (what training starts from)
  featurize  featurize of the first --featurize_rows rows at max_seq_length 128, on top of
             their Examples (int32 token/segment/mask arrays: 1.5 KB a row, kept)
Prints one JSON object per mode and a summary table.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def generate(path, megabytes, seed=0):
    vocab = os.path.join(ROOT, "kerasbert", "data", "uncased_vocab.txt")
    with open(vocab, encoding="utf-8") as f:
        words = [w for w in f.read().split() if w.isalpha() and w.isascii()]
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


def _status_kb(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def reset_peak():
    """Resets the peak-RSS mark (Linux >= 4.0), so the imports' own peak (TF loading its
    libraries) does not hide what the reader adds; returns the RSS now, in KB."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return _status_kb("VmRSS")


def peak_kb():
    return _status_kb("VmHWM")


def measure(mode, path, featurize_rows):
    from kerasbert.data.tokenization import WordPieceTokenizer
    from kerasbert.io_utils import iter_utf8_lines, read_utf8_text
    from kerasbert.tasks import glue

    task = glue.TASKS["sst2"]
    tokenizer = None
    if mode == "featurize":
        tokenizer = WordPieceTokenizer(os.path.join(ROOT, "kerasbert", "data",
                                                    "uncased_vocab.txt"), do_lower_case=True)
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
            "baseline_mb": round(base / 1024, 1),
            "peak_above_baseline_mb": round((peak_kb() - base) / 1024, 1),
            "seconds": round(time.perf_counter() - start, 1)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=200)
    parser.add_argument("--featurize_rows", type=int, default=100_000)
    parser.add_argument("--path", default="/tmp/kerasbert_bench_reader/train.tsv")
    parser.add_argument("--mode", help=argparse.SUPPRESS)  # one measurement (child process)
    args = parser.parse_args()
    if args.mode:
        print(json.dumps(measure(args.mode, args.path, args.featurize_rows)))
        return
    os.makedirs(os.path.dirname(args.path), exist_ok=True)
    rows = generate(args.path, args.megabytes)
    print(f"generated {args.path}: {os.path.getsize(args.path) / 2**20:.0f} MB, {rows} rows",
          flush=True)
    results = []
    env = {**os.environ, "PYTHONPATH": ROOT, "TF_CPP_MIN_LOG_LEVEL": "3",
           "CUDA_VISIBLE_DEVICES": ""}
    for mode in ("stream", "whole", "examples", "featurize"):
        out = subprocess.run([sys.executable, __file__, f"--mode={mode}", f"--path={args.path}",
                              f"--featurize_rows={args.featurize_rows}"],
                             check=True, capture_output=True, text=True, env=env)
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(json.dumps(results[-1]), flush=True)
    print(f"\n{'mode':10s} {'rows':>9s} {'peak MB above baseline':>24s} {'x file size':>12s} "
          f"{'KB a row':>9s}")
    for r in results:
        mb = r["peak_above_baseline_mb"]
        print(f"{r['mode']:10s} {r['rows']:9d} {mb:24.1f} {mb / r['file_mb']:12.2f} "
              f"{mb * 1024 / r['rows']:9.2f}")
    os.remove(args.path)


if __name__ == "__main__":
    main()
