"""The nine GLUE tasks: readers for the official TSV files (and TFDS), metrics, submissions.

The files are read in the layout `download_glue_data.py` writes, the one google-research/bert's
`run_classifier.py` and HuggingFace's GLUE processors read. Where a file has a header row the
columns are found by name, so column order does not matter; CoLA's train/dev files have no
header and are read by position. Every malformed row is an `InputError` naming file and line,
with one documented exception (QQP, see `GlueTask.skip_short_rows`).

One small class, `GlueTask`, is parametrised by the table `TASKS` at the bottom.
"""

import logging
import math
import os
import warnings
from typing import Sequence

import numpy as np
from scipy import stats
from sklearn import metrics as skmetrics

from kerasbert.errors import InputError, at
from kerasbert.io_utils import atomic_write_text, iter_utf8_lines, missing_file
from kerasbert.tasks.base import CLASSIFICATION, REGRESSION, Example, Task

log = logging.getLogger(__name__)

STSB_MIN, STSB_MAX = 0.0, 5.0


class GlueTask(Task):
    """One GLUE task, described by the columns of its files rather than by code."""

    # The BERT paper's GLUE recipe (batch 32, 3 epochs, lr 2e-5 from its grid), used where the
    # user gives no flag; stated here so a change to the Task defaults does not move GLUE.
    default_learning_rate = 2e-5
    default_train_batch_size = 32
    default_num_train_epochs = 3.0

    def __init__(
        self,
        name: str,
        folder: str,  # official folder name in the GLUE download, e.g. "SST-2"
        text_a: str,  # header names of the text columns
        text_b: str | None = None,
        label_column: str | None = "label",
        label_list: Sequence[str] | None = ("0", "1"),  # None: regression (STS-B)
        main_metric: str = "accuracy",
        extra_metrics: Sequence[str] = (),  # reported next to accuracy
        index_column: str = "index",  # where test files keep the official index
        fixed_columns: Sequence[str] | None = None,  # names by position for header-less files
        dev_splits: Sequence[str] = ("dev",),
        test_splits: Sequence[str] = ("test",),
        tfds_text: tuple[str, str | None] = ("sentence1", "sentence2"),
        tfds_labels: Sequence[str] | None = None,  # our label strings in TFDS's id order
        submission_names: Sequence[str] | None = None,  # leaderboard file name per test split
        skip_short_rows: bool = False,
    ):
        self.name = name
        self.folder = folder
        self.text_a, self.text_b = text_a, text_b
        self.label_column = label_column
        self.label_list = None if label_list is None else tuple(label_list)
        self.kind = REGRESSION if label_list is None else CLASSIFICATION
        self.main_metric = main_metric
        self.extra_metrics = tuple(extra_metrics)
        self.index_column = index_column
        self.fixed_columns = None if fixed_columns is None else tuple(fixed_columns)
        self.dev_splits = tuple(dev_splits)
        self.test_splits = tuple(test_splits)
        self.tfds_text = tfds_text
        self.tfds_labels = self.label_list if tfds_labels is None else tuple(tfds_labels)
        self.submission_names = tuple(submission_names or [f"{folder}.tsv"])
        # The official readers (BERT's run_classifier.py, HF's QqpProcessor) drop QQP rows that
        # lack fields (real QQP train has a few, from questions with embedded newlines), so
        # numbers stay comparable only if we drop them too; we count them and warn.
        self.skip_short_rows = skip_short_rows

    def is_sentence_pair(self) -> bool:
        return self.text_b is not None

    def __repr__(self):
        return f"GlueTask({self.name!r})"

    @property
    def splits(self) -> tuple[str, ...]:
        return ("train", *self.dev_splits, *self.test_splits)

    def submission_name(self, split: str) -> str:
        """The file name the GLUE leaderboard expects for a test split, e.g. 'MNLI-m.tsv'."""
        return self.submission_names[self.test_splits.index(split)]

    # ---- reading ---------------------------------------------------------------------------

    def check_split(self, split: str) -> None:
        if split not in self.splits:
            raise InputError(
                f"{self.name}: unknown split {split!r}; expected one of {', '.join(self.splits)}"
            )

    def split_path(self, data_dir: str, split: str) -> str:
        """`<data_dir>/<split>.tsv`, or `<data_dir>/<FOLDER>/<split>.tsv` for a GLUE root."""
        self.check_split(split)
        folders = (data_dir, os.path.join(data_dir, self.folder))
        candidates = [os.path.join(d, f"{split}.tsv") for d in folders]
        for path in candidates:
            if os.path.isfile(path):
                return path
        raise missing_file(candidates[0], data_dir, also=candidates[1:])

    def read_examples(self, data_dir: str, split: str) -> list[Example]:
        path = self.split_path(data_dir, split)
        return self.read_file(path, split)

    def read_file(self, path: str, split: str) -> list[Example]:
        """Reads one TSV file as `split` (test splits are read without labels)."""
        return list(self.iter_file(path, split))

    def iter_file(self, path: str, split: str):
        """The examples of one TSV file, one at a time, validated as they are read (what
        --stream_train_data trains from, see kerasbert/data/streaming.py); the errors of
        read_file, each raised when its line is reached."""
        lines = _read_lines(path)
        labelled = split not in self.test_splits
        if self.fixed_columns and labelled:
            header, first_line = list(self.fixed_columns), 1  # CoLA train/dev: no header row
        else:
            first = next(lines, None)
            if first is None:
                raise InputError(f"{at(path)}empty file: expected a header row and examples")
            header, first_line = [c.strip() for c in first[1].split("\t")], 2
        required = [self.text_a, self.text_b, self.label_column if labelled else self.index_column]
        missing = [c for c in required if c is not None and c not in header]
        if missing:
            raise InputError(
                f"{at(path, 1)}missing column(s) {', '.join(map(repr, missing))} for "
                f"{self.name} {split}; the header has: {', '.join(map(repr, header))}"
            )
        col = {name: header.index(name) for name in header}  # a repeated name: the first
        count, skipped = 0, 0
        for number, line in lines:
            row = line.split("\t")
            if len(row) != len(header):
                if self.skip_short_rows and len(row) < len(header):
                    skipped += 1
                    continue
                what = "the header" if first_line == 2 else f"the {self.name} layout"
                raise InputError(
                    f"{at(path, number)}expected {len(header)} tab-separated columns as in "
                    f"{what}, found {len(row)}"
                )
            label = None
            if labelled:
                label = self._parse_label(row[col[self.label_column]], path, number)
            # guid: the official index where the file has one (test files always do), so
            # predictions can be written back by index; else the data row number.
            index = row[col[self.index_column]] if self.index_column in col else number - first_line
            count += 1
            yield Example(
                guid=f"{split}-{index}",
                text_a=row[col[self.text_a]],
                text_b=row[col[self.text_b]] if self.text_b else None,
                label=label,
            )
        if skipped:
            log.warning("%sskipped %d row(s) with missing fields, as the official %s readers do",
                        at(path), skipped, self.name.upper())
        if not count:
            raise InputError(f"{at(path)}no examples in the {split} split")

    def _parse_label(self, value: str, path: str, line: int):
        if self.label_list is not None:
            if value not in self.label_list:
                raise InputError(
                    f"{at(path, line)}label {value!r} is not a {self.name} label; "
                    f"expected one of {', '.join(self.label_list)}"
                )
            return value
        try:
            score = float(value)
        except ValueError:
            score = math.nan
        if not STSB_MIN <= score <= STSB_MAX:  # also false for nan
            raise InputError(
                f"{at(path, line)}score {value!r} is not a number from {STSB_MIN:g} to {STSB_MAX:g}"
            )
        return score

    # ---- metrics ---------------------------------------------------------------------------

    def compute_metrics(self, predictions, labels) -> dict[str, float]:
        """The official GLUE metrics, as plain floats.

        `predictions`: class ids (logits [n, num_labels] are argmax-ed) or floats for STS-B.
        Degenerate cases give 0.0 rather than nan (a constant predictor carries no information,
        and nan would break best-on-dev comparisons): sklearn's MCC already does this; scipy's
        correlations return nan (with a warning) for constant input, and we report 0.0.
        """
        predictions, labels = np.asarray(predictions), np.asarray(labels)
        if self.kind == REGRESSION:
            p, y = predictions.reshape(-1).astype(np.float64), labels.reshape(-1).astype(np.float64)
            _check_lengths(p, y)
            return {"pearson": _correlation(stats.pearsonr, p, y),
                    "spearman": _correlation(stats.spearmanr, p, y)}
        p = predictions.argmax(-1) if predictions.ndim == 2 else predictions.reshape(-1)
        y = labels.reshape(-1)
        _check_lengths(p, y)
        result = {"accuracy": float(skmetrics.accuracy_score(y, p))}
        if "f1" in self.extra_metrics:  # positive class: "1" (paraphrase / duplicate)
            positive = self.label_list.index("1")
            result["f1"] = float(skmetrics.f1_score(y, p, pos_label=positive, zero_division=0.0))
        if "matthews_corrcoef" in self.extra_metrics:
            result["matthews_corrcoef"] = _finite(skmetrics.matthews_corrcoef(y, p))
        return result

    # ---- the Task interface: thin methods over the module functions below ----------------

    def sample_dir(self) -> str:
        return sample_dir(self.name)

    def read_tfds(self, split: str, data_dir: str | None) -> list[Example]:
        return read_tfds(self, split, data_dir)

    def write_test_predictions(self, examples, predictions, path) -> None:
        write_test_predictions(self, examples, predictions, path)


def _check_lengths(p, y):
    if len(p) != len(y):
        raise ValueError(f"{len(p)} predictions for {len(y)} labels")


def _finite(x) -> float:
    x = float(x)
    return 0.0 if math.isnan(x) else x


def _correlation(fn, p, y) -> float:
    if len(p) < 2:
        return 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy warns on constant input; we return 0.0
        return _finite(fn(p, y)[0])


def _read_lines(path: str):
    """(number, line) of the physical lines of a UTF-8 file, streamed (BOM dropped,
    trailing blank lines dropped: a blank line is yielded only when a line follows it).

    Splitting on tabs ourselves is csv.QUOTE_NONE with a tab delimiter: GLUE text contains
    unbalanced quotes that must stay literal; doing it by hand keeps line numbers physical.
    """
    blank = []
    for number, line in enumerate(iter_utf8_lines(path, "GLUE"), start=1):
        line = line.removesuffix("\n").removesuffix("\r")
        if not line:
            blank.append(number)
            continue
        yield from ((n, "") for n in blank)
        blank = []
        yield number, line


# ---- TFDS ---------------------------------------------------------------------------------


def read_tfds(task, split: str, data_dir: str | None = None) -> list[Example]:
    """Reads a split from an already prepared TFDS `glue/<name>` (no downloads here).

    Our split names map to TFDS's: dev -> validation (MNLI: dev_matched -> validation_matched),
    train and test unchanged. TFDS label ids (its own class order) become our label strings;
    test labels (-1) become None. guids use TFDS's `idx`, the row's index in the TSV.
    """
    import tensorflow_datasets as tfds  # heavy; only when asked for

    task = TASKS[task] if isinstance(task, str) else task
    task.check_split(split)
    tfds_split = "validation" + split[3:] if split.startswith("dev") else split
    name = f"glue/{task.name}"
    try:
        dataset = tfds.load(name, split=tfds_split, data_dir=data_dir, download=False)
    except (AssertionError, OSError) as e:
        raise InputError(
            f"TFDS {name} ({tfds_split}) is not prepared in "
            f"{data_dir or 'the default TFDS folder'}; "
            f"prepare it on a machine with network access (tfds build glue/{task.name}) and copy "
            f"the folder, or point at the GLUE TSV files instead ({e})"
        ) from None
    key_a, key_b = task.tfds_text
    examples = []
    for n, row in enumerate(tfds.as_numpy(dataset)):
        label = row["label"]
        if label < 0:
            label = None
        elif task.kind == REGRESSION:
            label = float(label)
        else:
            label = task.tfds_labels[int(label)]
        examples.append(
            Example(
                guid=f"{split}-{int(row['idx']) if 'idx' in row else n}",
                text_a=_text(row[key_a]),
                text_b=_text(row[key_b]) if key_b else None,
                label=label,
            )
        )
    if not examples:
        raise InputError(f"TFDS {name} ({tfds_split}): no examples")
    return examples


def _text(value) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


# ---- submissions --------------------------------------------------------------------------


def write_test_predictions(task, examples: Sequence[Example], predictions, path: str) -> None:
    """Writes a GLUE leaderboard file: `index<TAB>prediction`, one row per test example.

    Classification writes the label string, STS-B the score clipped to [0, 5] with 3 decimals.
    The index is the official one, kept in the guid ("test-<index>").
    """
    task = TASKS[task] if isinstance(task, str) else task
    predictions = np.asarray(predictions)
    if task.kind == REGRESSION:
        predictions = predictions.reshape(-1)
    elif predictions.ndim == 2:
        predictions = predictions.argmax(-1)
    if len(predictions) != len(examples):
        raise ValueError(f"{len(predictions)} predictions for {len(examples)} examples")
    rows = ["index\tprediction\n"]
    for example, prediction in zip(examples, predictions):
        if task.kind == REGRESSION:
            value = f"{min(max(float(prediction), STSB_MIN), STSB_MAX):.3f}"
        else:
            value = task.label_list[int(prediction)]
        rows.append(f"{example.guid.rsplit('-', 1)[-1]}\t{value}\n")
    atomic_write_text(path, "".join(rows))


def sample_dir(task_name: str) -> str:
    """The bundled sample folder of a task (train/dev/test in the official layout)."""
    if task_name not in TASKS:
        raise InputError(f"unknown GLUE task {task_name!r}; expected one of {', '.join(TASKS)}")
    data = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")
    return os.path.join(data, "samples", "glue", TASKS[task_name].folder)


# ---- the table ----------------------------------------------------------------------------

_NLI = ("entailment", "not_entailment")

TASKS: dict[str, GlueTask] = {
    t.name: t
    for t in [
        # CoLA train/dev: source, label, the original "*" mark, sentence; no header row.
        GlueTask("cola", "CoLA", text_a="sentence", main_metric="matthews_corrcoef",
                 extra_metrics=["matthews_corrcoef"],
                 fixed_columns=["source", "label", "author_mark", "sentence"],
                 tfds_text=("sentence", None)),
        GlueTask("sst2", "SST-2", text_a="sentence", tfds_text=("sentence", None)),
        GlueTask("mrpc", "MRPC", text_a="#1 String", text_b="#2 String", label_column="Quality",
                 main_metric="f1", extra_metrics=["f1"]),
        # STS-B: Pearson as the main metric because it is the STS Benchmark's official metric
        # and the first of the two the GLUE leaderboard shows; Spearman (what the BERT paper
        # quotes) is always reported next to it.
        GlueTask("stsb", "STS-B", text_a="sentence1", text_b="sentence2", label_column="score",
                 label_list=None, main_metric="pearson"),
        GlueTask("qqp", "QQP", text_a="question1", text_b="question2",
                 label_column="is_duplicate", main_metric="f1", extra_metrics=["f1"],
                 index_column="id", tfds_text=("question1", "question2"), skip_short_rows=True),
        # MNLI: model selection uses accuracy on dev_matched (the first dev split).
        GlueTask("mnli", "MNLI", text_a="sentence1", text_b="sentence2", label_column="gold_label",
                 label_list=("contradiction", "entailment", "neutral"),
                 dev_splits=["dev_matched", "dev_mismatched"],
                 test_splits=["test_matched", "test_mismatched"],
                 tfds_text=("premise", "hypothesis"),
                 tfds_labels=("entailment", "neutral", "contradiction"),
                 submission_names=["MNLI-m.tsv", "MNLI-mm.tsv"]),
        GlueTask("qnli", "QNLI", text_a="question", text_b="sentence", label_list=_NLI,
                 tfds_text=("question", "sentence")),
        GlueTask("rte", "RTE", text_a="sentence1", text_b="sentence2", label_list=_NLI),
        # WNLI: TFDS names its classes not_entailment/entailment, the TSV says 0/1.
        GlueTask("wnli", "WNLI", text_a="sentence1", text_b="sentence2"),
    ]
}
