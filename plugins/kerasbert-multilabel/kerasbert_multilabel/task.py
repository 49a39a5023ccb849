"""topic_tags: which of five topics a short text mentions (multi_label kind).

File format: UTF-8, tab-separated, a header row naming the columns (any order):

    id<TAB>text<TAB>labels
    7<TAB>Maria played tennis and the bank reported higher profits.<TAB>money,sports
    8<TAB>The bus was late on monday.<TAB>

    text    the text (no tabs or newlines inside)
    labels  the labels that apply, comma-separated, each one of label_list; empty when
            none applies. Required in train and dev files; a test file needs none (its
            labels, if it has the column, are not read)
    id      optional: the example's id in prediction files (default: its row number,
            from 0 for the first row after the header)

Blank lines are skipped. Any other malformed row is an InputError naming file and line.
Splits: <data_dir>/train.tsv, dev.tsv, test.tsv; the bundled sample
(kerasbert_multilabel/data/, made by tools/make_sample.py) is used without --data_dir.

Metrics (scikit-learn, on the kind's decisions, probability > 0.5: `Task.predictions`
decodes with `MultiLabelKind.decode`): micro_f1 (the main metric, higher is better:
F1 over all (example, label) decisions pooled), macro_f1 (the unweighted mean of the
per-label F1s; a label that is neither gold nor predicted anywhere in the split scores 0,
sklearn's zero_division=0) and exact_match (the fraction of examples whose whole label set
is right).

Test predictions (test_results.tsv): `id<TAB>labels<TAB>` then one column per label with
its probability; `labels` is in the input format, so the file reads back as labels.
"""

import os

import numpy as np

from kerasbert.errors import InputError, at
from kerasbert.io_utils import atomic_write_text, iter_utf8_lines
from kerasbert.tasks.base import Example, Task

KIND = "multi_label"


class MultiLabelTsvTask(Task):
    """A multi-label task read from `id, text, labels` TSV files, for a fixed label list."""

    kind = KIND
    default_head = "multi_label_linear"
    main_metric = "micro_f1"
    greater_is_better = True  # the sweep, early stopping and the reports rank by it
    dev_splits = ("dev",)
    test_splits = ("test",)
    default_learning_rate = 5e-5
    default_train_batch_size = 32
    default_num_train_epochs = 3.0
    default_max_seq_length = 64

    def __init__(self, name, label_list, sample_folder, description="", sample_recipe=None):
        self.name = name
        self.label_list = tuple(label_list)
        self.sample_folder = sample_folder
        self.description = description
        self.sample_recipe = dict(sample_recipe or {})
        self._index = {label: i for i, label in enumerate(self.label_list)}

    def __repr__(self):
        return f"MultiLabelTsvTask({self.name!r})"

    def is_sentence_pair(self):
        return False

    # ---- reading ---------------------------------------------------------------------

    @property
    def splits(self):
        return ("train", *self.dev_splits, *self.test_splits)

    def split_path(self, data_dir, split):
        if split not in self.splits:
            raise InputError(f"{self.name}: unknown split {split!r}; expected one of "
                             f"{', '.join(self.splits)}")
        path = os.path.join(data_dir, f"{split}.tsv")
        if not os.path.isfile(path):
            listing = (", ".join(sorted(os.listdir(data_dir))) or "nothing"
                       if os.path.isdir(data_dir) else "the folder does not exist")
            raise InputError(f"{at(path)}no such file ({data_dir} has: {listing})")
        return path

    def sample_dir(self):
        return self.sample_folder

    def read_examples(self, data_dir, split):
        return self.read_file(self.split_path(data_dir, split), split)

    def read_file(self, path, split):
        """One TSV file as `split` (a test split is read without labels)."""
        return list(self.iter_file(path, split))

    def iter_file(self, path, split):
        """The examples of one file, validated as they are read (--stream_train_data
        streams from this)."""
        labelled = split not in self.test_splits
        header, count = None, 0
        for number, line in enumerate(iter_utf8_lines(path, self.name), start=1):
            line = line.removesuffix("\n").removesuffix("\r")
            if not line.strip():
                continue
            row = line.split("\t")
            if header is None:
                header = [c.strip() for c in row]
                required = ["text", "labels"] if labelled else ["text"]
                missing = [c for c in required if c not in header]
                if missing:
                    raise InputError(
                        f"{at(path, number)}missing column(s) {', '.join(map(repr, missing))} "
                        f"for {self.name} {split}; the header has: "
                        f"{', '.join(map(repr, header))} (expected id, text, labels)")
                col = {name: header.index(name) for name in header}  # a repeated name: the first
                continue
            if len(row) != len(header):
                raise InputError(f"{at(path, number)}expected {len(header)} tab-separated "
                                 f"columns as in the header, found {len(row)}")
            label = self.parse_labels(row[col["labels"]], path, number) if labelled else None
            guid = row[col["id"]].strip() if "id" in col else str(count)
            count += 1
            yield Example(guid=f"{split}-{guid}", text_a=row[col["text"]], label=label)
        if header is None:
            raise InputError(f"{at(path)}empty file: expected a header row (id, text, labels) "
                             "and examples")
        if not count:
            raise InputError(f"{at(path)}no examples in the {split} split")

    def parse_labels(self, value, path, line):
        """'a,b' -> ('a', 'b') in label_list order; '' -> () (no label applies)."""
        value = value.strip()
        if not value:
            return ()
        names = [name.strip() for name in value.split(",")]
        for name in names:
            if not name:
                raise InputError(f"{at(path, line)}empty label in {value!r} (labels are "
                                 "comma-separated names; an empty column means none)")
            if name not in self._index:
                raise InputError(f"{at(path, line)}label {name!r} is not a {self.name} label; "
                                 f"expected some of {', '.join(self.label_list)}")
        if len(set(names)) != len(names):
            raise InputError(f"{at(path, line)}a label is listed twice in {value!r}")
        return tuple(sorted(names, key=self._index.get))

    def read_tfds(self, split, data_dir):
        raise InputError(f"--use_tfds: {self.name} has no TFDS dataset; give --data_dir "
                         "(train.tsv, dev.tsv, test.tsv) or --train_file / --predict_file")

    # ---- features, predictions, metrics ----------------------------------------------

    def encode_labels(self, examples):
        """Multi-hot float32 [n, K]; None for an unlabelled split."""
        if any(e.label is None for e in examples):
            return None
        labels = np.zeros([len(examples), len(self.label_list)], np.float32)
        for i, example in enumerate(examples):
            labels[i, [self._index[name] for name in example.label]] = 1.0
        return labels

    def compute_metrics(self, predictions, labels):
        from sklearn import metrics as skmetrics

        p = np.asarray(predictions).astype(np.int32)
        y = (np.asarray(labels) > 0.5).astype(np.int32)
        if p.shape != y.shape or p.ndim != 2:
            raise ValueError(f"predictions {p.shape} and labels {y.shape}: expected the "
                             "same [n, num_labels] shape")
        return {
            "micro_f1": float(skmetrics.f1_score(y, p, average="micro", zero_division=0.0)),
            "macro_f1": float(skmetrics.f1_score(y, p, average="macro", zero_division=0.0)),
            "exact_match": float(np.mean(np.all(p == y, axis=1))) if len(y) else 0.0,
        }

    def write_predictions(self, outputs, features, output_dir, split):
        name = "test_results.tsv" if split == "test" else f"{split}_results.tsv"
        path = os.path.join(output_dir, name)
        outputs = np.asarray(outputs, np.float32)
        self.write_test_predictions(features.examples, self.predictions(outputs), path,
                                    probabilities=1.0 / (1.0 + np.exp(-outputs)))
        return path

    def write_test_predictions(self, examples, predictions, path, probabilities=None):
        predictions = np.asarray(predictions)
        if len(predictions) != len(examples):
            raise ValueError(f"{len(predictions)} predictions for {len(examples)} examples")
        header = ["id", "labels", *(self.label_list if probabilities is not None else ())]
        rows = ["\t".join(header) + "\n"]
        for i, example in enumerate(examples):
            labels = ",".join(n for n, on in zip(self.label_list, predictions[i]) if on)
            extra = [f"{p:.6f}" for p in probabilities[i]] if probabilities is not None else []
            rows.append("\t".join([example.guid.split("-", 1)[1], labels, *extra]) + "\n")
        atomic_write_text(path, "".join(rows))


TASK = MultiLabelTsvTask(
    "topic_tags",
    label_list=("food", "money", "music", "sports", "weather"),
    sample_folder=os.path.join(os.path.dirname(os.path.abspath(__file__)), "data"),
    description="Which of five topics a short text mentions (multi-label; micro-F1)",
    # The bundled sample is small: a higher learning rate and more epochs let even a
    # random tiny encoder learn its topic words visibly.
    sample_recipe={"learning_rate": 1e-4, "train_batch_size": 16, "num_train_epochs": 3.0},
)
