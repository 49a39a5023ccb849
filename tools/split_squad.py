"""Splits one official SQuAD file by article into a training and an evaluation file.

    python -m tools.split_squad --input=../shared/data/squad/dev-v1.1-part-a.json \
        --train_articles=30 --output_dir=/tmp/squad_split

writes `<output_dir>/train-v1.1.json` (the first --train_articles articles) and
`dev-v1.1.json` (the rest), the names `--task=squad_v1 --data_dir=<output_dir>` reads
(`-v2.0` for a v2.0 file, from its "version"). Whole articles go to one side, so no
paragraph is read in training and asked about in evaluation. Both files keep the input's
"version" and are written whole or not at all; the counts go to stdout.
"""

import argparse
import os
import sys

from kerasbert import evaluate, io_utils
from kerasbert.errors import InputError, at, guarded


def split(dataset, train_articles):
    """(train, dev) SQuAD objects: the first `train_articles` articles, then the rest."""
    articles = dataset["data"]
    return ({**dataset, "data": articles[:train_articles]},
            {**dataset, "data": articles[train_articles:]})


def count_questions(dataset):
    return sum(len(p["qas"]) for a in dataset["data"] for p in a["paragraphs"])


def file_version(dataset):
    """v2.0 for a file that says so (SQuAD 2.0 has unanswerable questions), else v1.1."""
    return "v2.0" if str(dataset.get("version", "")).startswith("2") else "v1.1"


@guarded
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--input", required=True, help="an official SQuAD JSON file")
    p.add_argument("--train_articles", type=int, required=True,
                   help="how many of its articles, from the first, go to training")
    p.add_argument("--output_dir", required=True)
    args = p.parse_args(argv)
    dataset, _ = evaluate.load_squad_file(args.input)  # one line if not in the format
    n = len(dataset["data"])
    if not 0 < args.train_articles < n:
        raise InputError(f"--train_articles={args.train_articles}: must leave both sides "
                         f"an article, between 1 and {n - 1} ({at(args.input)}{n} articles)")
    train, dev = split(dataset, args.train_articles)
    version = file_version(dataset)
    written = []
    try:
        for name, part in (("train", train), ("dev", dev)):
            path = os.path.join(args.output_dir, f"{name}-{version}.json")
            io_utils.atomic_write_json(path, part)
            written.append(path)
            print(f"{path}: {len(part['data'])} articles, {count_questions(part)} questions")
    except BaseException:
        for path in written:  # both files or neither
            os.remove(path)
        raise
    return 0

if __name__ == "__main__":
    sys.exit(main())
