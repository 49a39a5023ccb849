"""Writes the bundled samples of the generic tasks on a user's own files
(kerasbert/data/samples/<task>/), converted from the other bundled samples, so every
generic task has a sample in the formats a user brings:

    text_classification/   train.csv, dev.csv (SST-2's, labels named negative/positive),
                           test.csv (no label column)
    text_regression/       train.jsonl, dev.jsonl, test.jsonl (STS-B's scores; the pair as one
                           `sentence`, the default text column's other name)
    token_classification/  train.jsonl, dev.jsonl (CoNLL-2003's, `tokens` and `tags`),
                           test.jsonl (tokens only)
    multiple_choice/       train.csv, dev.csv, test.csv (SWAG's, context and ending0..3)

    python -m tools.samples.make_own_files_samples [--out kerasbert/data/samples]

question_answering reads SQuAD's own bundled sample.

The committed files must equal this script's output (tests/tasks/test_own_files.py checks).
"""

import argparse
import csv
import io
import json
import os

from tools.samples import DATA_DIR

SAMPLES = os.path.join(DATA_DIR, "samples")
SENTIMENT = {"0": "negative", "1": "positive"}


def _tsv(path):
    with open(path, encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    return [dict(zip(rows[0], row)) for row in rows[1:]]


def _csv_text(header, rows):
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def _jsonl_text(rows):
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def _conll_sentences(path):
    sentences, words, tags = [], [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            fields = line.split()
            if not fields or fields[0] == "-DOCSTART-":
                if words:
                    sentences.append((words, tags))
                words, tags = [], []
                continue
            words.append(fields[0])
            tags.append(fields[-1])
    if words:
        sentences.append((words, tags))
    return sentences


def samples():
    """{relative path: text} of every file."""
    glue = os.path.join(SAMPLES, "glue")
    files = {}
    sst = os.path.join(glue, "SST-2")
    for split in ("train", "dev"):
        rows = [(r["sentence"].strip(), SENTIMENT[r["label"]])
                for r in _tsv(os.path.join(sst, f"{split}.tsv"))]
        files[f"text_classification/{split}.csv"] = _csv_text(["text", "label"], rows)
    files["text_classification/test.csv"] = _csv_text(
        ["text"], [(r["sentence"].strip(),) for r in _tsv(os.path.join(sst, "test.tsv"))])
    stsb = os.path.join(glue, "STS-B")
    for split in ("train", "dev"):
        files[f"text_regression/{split}.jsonl"] = _jsonl_text(
            {"sentence": f"{r['sentence1']} {r['sentence2']}", "label": float(r["score"])}
            for r in _tsv(os.path.join(stsb, f"{split}.tsv")))
    files["text_regression/test.jsonl"] = _jsonl_text(
        {"sentence": f"{r['sentence1']} {r['sentence2']}"}
        for r in _tsv(os.path.join(stsb, "test.tsv")))
    conll = os.path.join(SAMPLES, "conll2003")
    for split, name in (("train", "train"), ("dev", "valid"), ("test", "test")):
        sentences = _conll_sentences(os.path.join(conll, f"{name}.txt"))
        files[f"token_classification/{split}.jsonl"] = _jsonl_text(
            {"tokens": w} if split == "test" else {"tokens": w, "tags": t} for w, t in sentences)
    swag = os.path.join(SAMPLES, "swag")
    for split, name in (("train", "train"), ("dev", "val"), ("test", "test")):
        with open(os.path.join(swag, f"{name}.csv"), encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f))
        endings = [f"ending{k}" for k in range(4)]
        header = ["context", *endings] + ([] if split == "test" else ["label"])
        files[f"multiple_choice/{split}.csv"] = _csv_text(header, [
            [r["sent1"], *(f"{r['sent2']} {r[e]}" for e in endings)]
            + ([] if split == "test" else [r["label"]]) for r in rows])
    return files


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=SAMPLES)
    args = parser.parse_args(argv)
    for name, text in samples().items():
        path = os.path.join(args.out, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        print(path)


if __name__ == "__main__":
    main()
