"""text_classification and text_regression: one text (or a pair) and a label per row of a
user's CSV, TSV or JSON Lines file, named as HuggingFace's run_glue.py names them."""

import dataclasses
import math
import warnings

import numpy as np
from scipy import stats
from sklearn import metrics as skmetrics

from kerasbert.errors import InputError, at
from kerasbert.io_utils import atomic_write_text
from kerasbert.tasks.base import CLASSIFICATION, REGRESSION, Example, Task, bundled_sample
from kerasbert.tasks.own_files.files import OwnFiles
from kerasbert.tasks.own_files.labels import LabelTypes, as_name, label_kind, label_names
from kerasbert.tasks.own_files.table import column, read_table, value

TEXT_OPTIONS = ("text_column", "text_pair_column", "label_column")


@dataclasses.dataclass(frozen=True)
class RowExample(Example):
    """One row of a user's file; `line` is its line in the file, for messages."""

    line: int = 0


class TextTask(OwnFiles, Task):
    """One label per text or text pair, from the user's files (classification or
    regression)."""

    option_names = (*TEXT_OPTIONS, "data_dir", "train_file", "validation_file",
                    "predict_file", "test_file", "label_list")
    # A user's data has no paper recipe: HuggingFace Trainer's learning rate (5e-5) and
    # epochs (3), BERT's batch of 32. (2e-5, GLUE's, left the default MiniLM at chance
    # after one epoch of a 2,000-row SST-2 CSV: dev accuracy 0.509, 2026-12-06.)
    default_learning_rate = 5e-5
    default_train_batch_size = 32
    default_num_train_epochs = 3.0
    # The 64-row bundled sample learns visibly only with more, larger steps.
    sample_recipe = {"learning_rate": 1e-4, "train_batch_size": 16, "num_train_epochs": 3.0}

    def __init__(self, kind):
        self.kind = kind
        self.decides_labels = kind == CLASSIFICATION
        self.name = "text_classification" if self.decides_labels else "text_regression"
        self.description = ("one label per text or pair, from your CSV, TSV or JSON Lines files"
                            if self.decides_labels else
                            "one number per text or pair, from your CSV, TSV or JSON Lines files")
        self.main_metric = "accuracy" if self.decides_labels else "pearson"
        self.text_column = self.text_pair_column = self.label_column = None
        self.label_list = None
        self.files = {}

    def __repr__(self):
        return f"TextTask({self.name!r})"

    def configure(self, **options) -> "TextTask":
        options = self.configure_files(options)
        for name in TEXT_OPTIONS:
            setattr(self, name, options.pop(name, None))
        if options:
            raise InputError(f"{self.name}: unknown option(s) {', '.join(options)}")
        if self.decides_labels and self.files.get("label_list"):
            self.label_list = label_names(self.files["label_list"])
        return self

    def check_config(self, config) -> None:
        super().check_config(config)
        if not self.decides_labels and config.label_list:
            raise InputError(f"--label_list={config.label_list}: --task={self.name} predicts "
                             "a number, it has no label names")

    def sample_dir(self) -> str:
        return bundled_sample(self.name)

    def is_sentence_pair(self) -> bool:
        return bool(self.text_pair_column)

    # ---- reading ----

    def read_split_file(self, path: str, split: str) -> list[RowExample]:
        columns, rows = read_table(path)
        text = self.text_column or ("text" if "text" in columns or "sentence" not in columns
                                    else "sentence")
        column(path, columns, text, "--text_column" + ("" if self.text_column else
                                                       "; default text, else sentence"))
        pair = self.text_pair_column and column(path, columns, self.text_pair_column,
                                                "--text_pair_column")
        label_name = self.label_column or "label"
        labelled = split not in self.test_splits
        if labelled:
            column(path, columns, label_name, "--label_column" + ("" if self.label_column
                                                                  else "; default label"))
        types = LabelTypes(path)
        examples = []
        for n, (line, row) in enumerate(rows):
            label = None
            if labelled:
                raw = value(path, line, row, label_name)
                label = self._label(raw, path, line, types)
            examples.append(RowExample(
                guid=f"{split}-{n}", text_a=_text(value(path, line, row, text), path, line),
                text_b=_text(value(path, line, row, pair), path, line) if pair else None,
                label=label, line=line))
        return examples

    def _label(self, raw, path, line, types):
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            raise InputError(f"{at(path, line)}empty label")
        if not self.decides_labels:
            if label_kind(raw) != "number":
                raise InputError(f"{at(path, line)}label {raw!r} is not a number "
                                 f"(--task={self.name} reads numbers)")
            number = float(raw)
            if not math.isfinite(number):
                raise InputError(f"{at(path, line)}label {raw!r} is not a finite number")
            return number
        types.add(raw.strip() if isinstance(raw, str) else raw, line)
        return as_name(raw.strip() if isinstance(raw, str) else raw)

    def labels_of(self, examples, path):
        return [(e.label, e.line) for e in examples if e.label is not None]

    # ---- metrics and predictions ----

    def compute_metrics(self, predictions, labels) -> dict[str, float]:
        p, y = np.asarray(predictions), np.asarray(labels)
        if not self.decides_labels:
            p, y = p.reshape(-1).astype(np.float64), y.reshape(-1).astype(np.float64)
            return {"pearson": _correlation(stats.pearsonr, p, y),
                    "spearman": _correlation(stats.spearmanr, p, y)}
        p = p.argmax(-1) if p.ndim == 2 else p.reshape(-1)
        y = y.reshape(-1)
        return {"accuracy": float(skmetrics.accuracy_score(y, p)),
                "macro_f1": float(skmetrics.f1_score(
                    y, p, labels=range(len(self.label_list)), average="macro",
                    zero_division=0.0))}

    def write_test_predictions(self, examples, predictions, path) -> None:
        """`index<TAB>prediction`: the row's number in the test file (0-based, as
        HuggingFace's run_glue.py writes it) and the label's name (or the number)."""
        predictions = np.asarray(predictions).reshape(len(examples), -1)
        rows = ["index\tprediction\n"]
        for example, prediction in zip(examples, predictions):
            answer = (self.label_list[int(prediction[0])] if self.decides_labels
                      else f"{float(prediction[0]):.6g}")
            rows.append(f"{example.guid.rsplit('-', 1)[-1]}\t{answer}\n")
        atomic_write_text(path, "".join(rows))


def _text(raw, path, line) -> str:
    if not isinstance(raw, str):
        raise InputError(f"{at(path, line)}the text {raw!r} is not a string")
    return raw


def _correlation(fn, p, y) -> float:
    if len(p) < 2:
        return 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant input: nan, reported as 0.0
        r = float(fn(p, y)[0])
    return 0.0 if math.isnan(r) else r


CLASSIFICATION_TASK = TextTask(CLASSIFICATION)
REGRESSION_TASK = TextTask(REGRESSION)
