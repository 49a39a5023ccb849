"""Learns kerasbert/data/sample_vocab.txt: the WordPiece vocabulary of random-init encoders
when the pre-trained MiniLM package (which ships BERT's uncased vocabulary) is not
installed.

It is learned from the text of the bundled samples (kerasbert/data/samples: GLUE TSVs, SWAG
CSVs, SQuAD JSON, CoNLL-2003 columns) with tensorflow_text's BERT vocabulary trainer
(kerasbert.pretraining.data.learn_vocab), lower-cased, BERT's special tokens first, so the
tiny fallback model covers the words it is demonstrated on.

    python -m tools.samples.make_sample_vocab            # rewrites kerasbert/data/sample_vocab.txt
"""

import argparse
import csv
import glob
import json
import os
import tempfile

from tools.samples import DATA_DIR

SAMPLES = os.path.join(DATA_DIR, "samples")


def _is_text(cell):
    return any(c.isalpha() for c in cell)


def sample_sentences():
    """Every text field of the bundled samples, one string each."""
    csv.field_size_limit(1 << 24)
    for path in sorted(glob.glob(os.path.join(SAMPLES, "glue", "*", "*.tsv"))):
        with open(path, encoding="utf-8", newline="") as f:
            for row in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
                yield from (cell for cell in row if _is_text(cell))
    for path in sorted(glob.glob(os.path.join(SAMPLES, "swag", "*.csv"))):
        with open(path, encoding="utf-8", newline="") as f:
            for row in csv.reader(f):
                yield from (cell for cell in row if _is_text(cell))
    for path in sorted(glob.glob(os.path.join(SAMPLES, "squad", "*.json"))):
        with open(path, encoding="utf-8") as f:
            yield from _json_strings(json.load(f))
    for path in sorted(glob.glob(os.path.join(SAMPLES, "conll2003", "*.txt"))):
        words = []
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip() and not line.startswith("-DOCSTART-"):
                    words.append(line.split()[0])
                elif words:
                    yield " ".join(words)
                    words = []
        if words:
            yield " ".join(words)


def _json_strings(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("context", "question", "text") and isinstance(value, str):
                yield value
            else:
                yield from _json_strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _json_strings(value)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vocab_size", type=int, default=8000,
                        help="the trainer's target; it returns fewer on little text")
    parser.add_argument("--out", default=os.path.join(DATA_DIR, "sample_vocab.txt"))
    args = parser.parse_args()
    from kerasbert.pretraining.data import learn_vocab

    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "samples.txt")
        with open(corpus, "w", encoding="utf-8") as f:
            f.writelines(" ".join(sentence.split()) + "\n\n"  # one sentence per document
                         for sentence in sample_sentences())
        size = learn_vocab([corpus], args.vocab_size, True, args.out)
    print(f"make_sample_vocab: {size} tokens in {args.out}")


if __name__ == "__main__":
    main()
