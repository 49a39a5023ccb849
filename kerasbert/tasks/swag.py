"""SWAG: pick the most plausible continuation of a scene among n endings (BERT, section 4.4).

Each example becomes n sequences `[CLS] context [SEP] ending_k [SEP]`, with context = `sent1`
(segment A) and ending_k = `sent2 + " " + ending<k>` (segment B), truncated longest first.
The model scores each sequence with one learned vector, score_k = V·C_k (the `cls_linear`
head with one output), and the softmax over the n scores is the prediction.

Files are the official CSVs of rowanz/swagaf `data/` (`train.csv`, `val.csv`, `test.csv`),
read with Python's csv module (fields with commas and quotes are quoted there):

    ,video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label

The first, unnamed column is the row index the leaderboard keys predictions by; test.csv has
no label. Columns are found by name and the number of choices is the number of `ending<k>`
columns, so any multiple-choice set in this layout runs too (3 endings, 5 endings, ...).
"""

import csv
import dataclasses
import io
import logging
import os
import re
from typing import Sequence

import numpy as np

from kerasbert.errors import InputError, at
from kerasbert.io_utils import atomic_write_text, iter_utf8_lines, missing_file
from kerasbert.tasks.base import MULTIPLE_CHOICE, Example, Features, Task

log = logging.getLogger(__name__)

CONTEXT, START, LABEL = "sent1", "sent2", "label"
ENDING = re.compile(r"ending(\d+)")
ID_COLUMNS = ("", "fold-ind")  # the leading index column, else SWAG's fold index
FILES = {"train": "train.csv", "val": "val.csv", "test": "test.csv"}
TFDS_SPLITS = {"train": "train", "val": "validation", "test": "test"}


@dataclasses.dataclass(frozen=True)
class ChoiceExample(Example):
    """A context (`text_a`) with its candidate endings; `label` is the gold index or None."""

    endings: tuple[str, ...] = ()
    example_id: str = ""  # the official id, written to prediction files


class SwagTask(Task):
    name = "swag"
    kind = MULTIPLE_CHOICE
    default_head = "cls_linear"
    # The head emits one score per sequence (num_outputs = 1); the number of choices comes
    # from the data (`features.extra["num_choices"]`), so there is no fixed label list.
    label_list = None
    main_metric = "accuracy"
    dev_splits = ("val",)
    test_splits = ("test",)
    # The paper's recipe for SWAG (BERT, section 4.4).
    default_learning_rate = 2e-5
    default_train_batch_size = 16
    default_num_train_epochs = 3.0

    # ---- reading ---------------------------------------------------------------------------

    def sample_dir(self) -> str:
        data = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")
        return os.path.join(data, "samples", "swag")

    def split_path(self, data_dir: str, split: str) -> str:
        """`<data_dir>/<split>.csv` (val.csv for dev), which must exist."""
        if split not in FILES:
            raise InputError(f"swag: unknown split {split!r}; expected one of {', '.join(FILES)}")
        path = os.path.join(data_dir, FILES[split])
        if not os.path.isfile(path):
            raise missing_file(path, data_dir)
        return path

    def read_examples(self, data_dir: str, split: str) -> list[ChoiceExample]:
        return self.read_file(self.split_path(data_dir, split), split)

    def read_file(self, path: str, split: str) -> list[ChoiceExample]:
        """Reads one SWAG-layout CSV as `split` (test splits are read without labels)."""
        return list(self.iter_file(path, split))

    def iter_file(self, path: str, split: str):
        """The examples of one SWAG-layout CSV, one at a time, validated as they are read
        (for --stream_train_data); the errors of read_file, each raised at its line."""
        labelled = split not in self.test_splits
        records = _iter_csv(path)
        first = next(records, None)
        if first is None:
            raise InputError(f"{at(path)}empty file: expected a header row and examples")
        _, header = first
        header = [name.strip() for name in header]
        col = {name: i for i, name in reversed(list(enumerate(header)))}  # first one wins
        num_choices = _count_endings(header, path)
        required = [CONTEXT, START, "ending0", "ending1"] + ([LABEL] if labelled else [])
        missing = [c for c in required if c not in col]
        if missing:
            raise InputError(
                f"{at(path, 1)}missing column(s) {', '.join(map(repr, missing))} for swag "
                f"{split}; the header has: {', '.join(map(repr, header))}")
        id_column = next((c for c in ID_COLUMNS if c in col), None)
        count = 0
        for number, row in records:
            if len(row) != len(header):
                raise InputError(f"{at(path, number)}expected {len(header)} comma-separated "
                                 f"fields as in the header, found {len(row)}")
            endings = []
            for k in range(num_choices):
                ending = row[col[f"ending{k}"]].strip()
                if not ending:
                    raise InputError(f"{at(path, number)}ending{k} is empty")
                endings.append(_ending(row[col[START]], ending))
            label = _parse_label(row[col[LABEL]], num_choices, path, number) if labelled else None
            # The official index where the file has one, else the data row number.
            example_id = (row[col[id_column]].strip() if id_column is not None
                          else "") or str(count)
            count += 1
            yield ChoiceExample(
                guid=f"{split}-{example_id}", text_a=row[col[CONTEXT]].strip(), label=label,
                endings=tuple(endings), example_id=example_id)
        if not count:
            raise InputError(f"{at(path)}no examples in the {split} split")

    def read_tfds(self, split: str, data_dir: str | None) -> list[ChoiceExample]:
        """Reads a split from a prepared TFDS `swag` dataset (no downloads here).

        tensorflow_datasets 4.9 has no SWAG builder (only `hellaswag`, a different set), so
        this says so unless a `swag` builder is registered (a newer TFDS or the user's own);
        that one is expected to carry the CSV's fields: sent1, sent2, ending<k>, label.
        """
        import tensorflow_datasets as tfds  # heavy; only when asked for

        if split not in TFDS_SPLITS:
            raise InputError(f"swag: unknown split {split!r}; expected one of {', '.join(FILES)}")
        if "swag" not in tfds.list_builders(with_community_datasets=False):
            raise InputError(
                f"--use_tfds: tensorflow_datasets {tfds.__version__} has no 'swag' dataset "
                "(its 'hellaswag' is a different set); download train.csv, val.csv and "
                "test.csv from github.com/rowanz/swagaf (folder data/) and pass --data_dir")
        tfds_split = TFDS_SPLITS[split]
        try:
            dataset = tfds.load("swag", split=tfds_split, data_dir=data_dir, download=False)
        except (AssertionError, OSError) as e:
            raise InputError(
                f"TFDS swag ({tfds_split}) is not prepared in "
                f"{data_dir or 'the default TFDS folder'}; prepare it on a machine with network "
                f"access (tfds build swag) and copy the folder, or pass --data_dir with the "
                f"official CSV files instead ({e})") from None
        examples = []
        for n, row in enumerate(tfds.as_numpy(dataset)):
            keys = sorted((int(m.group(1)), key) for key in row if (m := ENDING.fullmatch(key)))
            if CONTEXT not in row or len(keys) < 2:
                raise InputError(f"TFDS swag ({tfds_split}): expected the fields {CONTEXT}, "
                                 f"{START}, ending0, ending1, ...; found {', '.join(sorted(row))}")
            endings = tuple(_ending(_text(row.get(START, b"")), _text(row[k])) for _, k in keys)
            label = int(row[LABEL]) if LABEL in row and split not in self.test_splits else None
            if label is not None and not 0 <= label < len(endings):
                label = None  # TFDS marks unlabelled rows with -1
            examples.append(ChoiceExample(guid=f"{split}-{n}", text_a=_text(row[CONTEXT]).strip(),
                                          label=label, endings=endings, example_id=str(n)))
        if not examples:
            raise InputError(f"TFDS swag ({tfds_split}): no examples")
        return examples

    # ---- features --------------------------------------------------------------------------

    def encode_labels(self, examples: Sequence[ChoiceExample]) -> np.ndarray | None:
        if not examples or any(e.label is None for e in examples):
            return None
        return np.array([e.label for e in examples], np.int32)

    def featurize(self, examples: Sequence[ChoiceExample], tokenizer, max_seq_length: int,
                  batch_size: int = 1024) -> Features:
        """int32 token_ids / segment_ids / padding_mask [n, choices, max_seq_length]."""
        import tensorflow as tf

        from kerasbert.data.tokenization import pack_inputs

        num_choices = len(examples[0].endings) if examples else 0
        if any(len(e.endings) != num_choices for e in examples):
            raise ValueError("swag: all examples of a split need the same number of endings")
        chunks, truncated = [], 0
        for i in range(0, len(examples), batch_size):
            chunk = examples[i: i + batch_size]
            # One tokenizer call per chunk (each call runs TF ops); each context is tokenized
            # once and repeated for its endings.
            contexts = tokenizer.tokenize_ids([e.text_a for e in chunk])
            endings = tokenizer.tokenize_ids([x for e in chunk for x in e.endings])
            contexts = tf.gather(contexts, np.repeat(np.arange(len(chunk)), num_choices))
            lengths = contexts.row_lengths() + endings.row_lengths() + 3
            truncated += int(tf.reduce_sum(tf.cast(lengths > max_seq_length, tf.int32)))
            packed = pack_inputs(tokenizer, contexts, endings, max_seq_length)
            chunks.append({k: v.numpy().reshape(len(chunk), num_choices, max_seq_length)
                           for k, v in packed.items()})
        keys = ("token_ids", "segment_ids", "padding_mask")
        inputs = {k: (np.concatenate([c[k] for c in chunks]) if chunks
                      else np.zeros([0, num_choices, max_seq_length])).astype(np.int32)
                  for k in keys}
        if truncated:
            log.info("swag: %d of %d sequences truncated to %d tokens", truncated,
                     len(examples) * num_choices, max_seq_length)
        return Features(inputs=inputs, labels=self.encode_labels(examples), examples=examples,
                        extra={"num_choices": num_choices, "num_truncated": truncated})

    # ---- metrics and predictions -----------------------------------------------------------

    def compute_metrics(self, predictions, labels) -> dict[str, float]:
        """Accuracy from predicted indices [n] or choice scores [n, choices]."""
        predictions, labels = np.asarray(predictions), np.asarray(labels).reshape(-1)
        if predictions.ndim == 2:
            predictions = predictions.argmax(-1)
        if len(predictions) != len(labels):
            raise ValueError(f"{len(predictions)} predictions for {len(labels)} labels")
        return {"accuracy": float(np.mean(predictions == labels)) if len(labels) else 0.0}

    def evaluate(self, outputs, features: Features, output_dir: str | None = None,
                 split: str = "val") -> dict[str, float]:
        """Accuracy; with `output_dir`, also writes `<split>_predictions.csv`."""
        logits = _choice_scores(outputs, features)
        if features.labels is None:
            raise ValueError(f"swag {split}: no labels to evaluate against")
        if output_dir is not None:
            _write_predictions_csv(os.path.join(output_dir, f"{split}_predictions.csv"),
                                   features.examples, logits)
        return self.compute_metrics(logits, features.labels)

    def write_predictions(self, outputs, features: Features, output_dir: str, split: str) -> str:
        """Writes `<split>_predictions.csv`: id, prediction, prob_0..prob_{n-1}."""
        path = os.path.join(output_dir, f"{split}_predictions.csv")
        _write_predictions_csv(path, features.examples, _choice_scores(outputs, features))
        return path


# ---- helpers ------------------------------------------------------------------------------


def _iter_csv(path: str):
    """(line, fields) of each non-blank CSV record; `line` is where the record starts."""
    # Streamed: csv takes the lines one at a time (line ends kept, as newline="" would).
    reader = csv.reader(iter_utf8_lines(path, "SWAG"), strict=True)
    line = 1
    try:
        for row in reader:
            if row:  # csv yields [] for blank lines
                yield line, row
            line = reader.line_num + 1
    except csv.Error as e:
        raise InputError(f"{at(path, line)}malformed CSV record ({e})") from None


def _count_endings(header: list[str], path: str) -> int:
    """The number of choices: ending0..ending{n-1} must all be there, with no gaps."""
    ks = sorted(int(m.group(1)) for name in header if (m := ENDING.fullmatch(name)))
    n = 0
    while n in ks:
        n += 1
    if ks and ks[-1] >= n and n >= 1:
        raise InputError(f"{at(path, 1)}the header has ending{ks[-1]} but no ending{n}; "
                         "endings must be numbered ending0, ending1, ... without gaps")
    return n


def _ending(start: str, ending: str) -> str:
    """Segment B of one choice: sent2 (the start of the next sentence) + " " + ending."""
    return " ".join(filter(None, [start.strip(), ending.strip()]))


def _parse_label(value: str, num_choices: int, path: str, line: int) -> int:
    value = value.strip()
    if not re.fullmatch(r"\d+", value, re.ASCII) or int(value) >= num_choices:
        raise InputError(f"{at(path, line)}label {value!r} is not an ending index; expected an "
                         f"integer from 0 to {num_choices - 1}")
    return int(value)


def _choice_scores(outputs, features: Features) -> np.ndarray:
    """The model's outputs as [n, choices] scores (also accepts them flattened)."""
    n, choices = len(features.examples), features.extra.get("num_choices")
    scores = np.asarray(outputs, np.float64).reshape(n, -1)
    if choices is not None and scores.shape[1] != choices:
        raise ValueError(f"outputs have {scores.shape[1]} scores per example, "
                         f"the features {choices} choices")
    return scores


def softmax(scores: np.ndarray) -> np.ndarray:
    z = np.exp(scores - scores.max(axis=-1, keepdims=True))  # shifted: no overflow
    return z / z.sum(axis=-1, keepdims=True)


def _write_predictions_csv(path: str, examples: Sequence[ChoiceExample], scores) -> None:
    probs = softmax(np.asarray(scores, np.float64))
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["id", "prediction"] + [f"prob_{k}" for k in range(probs.shape[1])])
    for example, p in zip(examples, probs):
        writer.writerow([example.example_id, int(p.argmax())] + [f"{x:.6f}" for x in p])
    atomic_write_text(path, buffer.getvalue())


def _text(value) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


TASK = SwagTask()
