"""Throughput of SQuAD feature building and span decoding (questions per second).

    python -m benchmarks.bench_squad_features --data_file=<SQuAD>/dev-v1.1.json

Feature building: official JSON -> examples -> windows of ids (read once; the tokenizer is
built and warmed up before timing). Decoding: n-best span search, text mapping and (v2) the
null decision on random logits of the right shape [rows, max_seq_length, 2], padding masked
as the span head masks it. Each number is the median of --repeats runs.
"""

import argparse
import statistics
import time

import numpy as np

from kerasbert.data.tokenization import WordPieceTokenizer
from kerasbert.heads.span import PADDING_LOGIT
from kerasbert.model.encoders import default_vocab
from kerasbert.tasks import squad

VOCAB = default_vocab()  # BERT's uncased vocabulary when the MiniLM package is installed


def median_seconds(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data_file", required=True, help="A SQuAD JSON file (v1.1 or v2.0).")
    parser.add_argument("--vocab_file", default=VOCAB)
    parser.add_argument("--max_seq_length", type=int, default=384)
    parser.add_argument("--doc_stride", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)

    tokenizer = WordPieceTokenizer(args.vocab_file)
    tokenizer.tokenize_ids(["warm up"])
    tokenizer.words(["warm up"])
    read_s, examples = median_seconds(
        lambda: squad.read_squad_file(args.data_file, version_2=True), args.repeats)
    task = squad.SquadTask(version_2=True).configure(doc_stride=args.doc_stride)
    feat_s, features = median_seconds(
        lambda: task.featurize(examples, tokenizer, args.max_seq_length), args.repeats)
    rows = len(features.labels)
    logits = np.random.default_rng(0).normal(size=(rows, args.max_seq_length, 2)).astype(np.float32)
    logits[features.inputs["padding_mask"] == 0] = PADDING_LOGIT
    n = len(examples)
    table = [("read JSON", read_s), ("build features", feat_s)]
    for version_2 in (False, True):
        seconds, _ = median_seconds(
            lambda: squad.decode(logits, features, version_2=version_2), args.repeats)
        table.append((f"decode {'v2 (null)' if version_2 else 'v1'}", seconds))

    print(f"{n} questions, {rows} windows (max_seq_length {args.max_seq_length}, "
          f"doc_stride {args.doc_stride}); median of {args.repeats}")
    print(f"{'stage':<18}{'seconds':>10}{'questions/s':>14}")
    for name, seconds in table:
        print(f"{name:<18}{seconds:>10.2f}{n / seconds:>14.0f}")


if __name__ == "__main__":
    main()
