"""The squad_v1 and squad_v2 tasks: BERT's recipe and options over the stages of this
package (reader, features, decoding, metrics, serving)."""

import json
import logging
import math
import os

from kerasbert.errors import InputError
from kerasbert.io_utils import atomic_write_text
from kerasbert.tasks.base import SPAN, Features, Task, bundled_sample, split_file
from kerasbert.tasks.squad import metrics as squad_metrics
from kerasbert.tasks.squad.decoding import Decoded, decode
from kerasbert.tasks.squad.features import OPTIONS, build_features
from kerasbert.tasks.squad.reader import SquadExample, read_squad_file, read_tfds_split

log = logging.getLogger(__name__)


class SquadTask(Task):
    """SQuAD v1.1 (`squad_v1`) or v2.0 (`squad_v2`) with BERT's recipe and options.

    Options (attributes, also set through `configure`): doc_stride, max_query_length,
    n_best_size, max_answer_length, null_score_diff_threshold (v2: answer "" when
    s_null - s_best > threshold). `evaluate` on dev returns the official metrics; for v2 it
    adds best_f1_thresh, the threshold that maximises dev F1, to pass back through
    `configure(null_score_diff_threshold=...)` for later predictions.
    """

    kind = SPAN
    default_head = "span"
    label_list = None
    dev_splits = ("dev",)
    test_splits = ()  # SQuAD's test set is hidden; predictions are written for dev
    default_max_seq_length = 384  # BERT's run_squad.py default
    option_names = tuple(OPTIONS)

    def __init__(self, version_2: bool):
        self.version_2 = version_2
        self.name = "squad_v2" if version_2 else "squad_v1"
        self.file_version = "v2.0" if version_2 else "v1.1"
        self.description = f"SQuAD {self.file_version[1:]} extractive question answering"
        # v2: model selection on the F1 at the best dev threshold, what BERT reports.
        self.main_metric = "best_f1" if version_2 else "f1"
        # Paper recipe (BERT, sections 4.2 and 4.3).
        self.default_learning_rate = 5e-5
        self.default_train_batch_size = 48 if version_2 else 32
        self.default_num_train_epochs = 2.0 if version_2 else 3.0
        for name, value in OPTIONS.items():
            setattr(self, name, value)

    def __repr__(self):
        return f"SquadTask({self.name!r})"

    def configure(self, **options) -> "SquadTask":
        """Sets options by their BERT flag names (None leaves one as it is); InputError
        naming the flag on bad values."""
        for name, value in options.items():
            if name not in OPTIONS:
                raise InputError(f"{self.name}: unknown option {name!r}; expected one of "
                                 f"{', '.join(OPTIONS)}")
            if value is None:
                continue
            if name == "null_score_diff_threshold":
                ok = isinstance(value, (int, float)) and math.isfinite(value)
                value = float(value)
            else:
                ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
            if not ok:
                raise InputError(f"--{name}={value}: must be "
                                 + ("a finite number" if name.startswith("null") else
                                    "a positive integer"))
            setattr(self, name, value)
        return self

    # ---- data ----

    def check_config(self, config) -> None:
        if config.max_seq_length <= config.max_query_length + 3:
            raise InputError(
                f"--max_seq_length={config.max_seq_length}: must exceed --max_query_length="
                f"{config.max_query_length} + 3 ([CLS] and two [SEP]) to leave room for the "
                "passage")

    def file_name(self, split: str) -> str:
        if split not in ("train", *self.dev_splits):
            raise InputError(f"{self.name}: unknown split {split!r}; expected train or dev "
                             "(SQuAD's test set is not public)")
        return f"{split}-{self.file_version}.json"

    def split_path(self, data_dir: str, split: str) -> str:
        """`<data_dir>/train-v1.1.json` (dev-v2.0.json, ...), which must exist."""
        return split_file(data_dir, self.file_name(split))

    def read_examples(self, data_dir: str, split: str) -> list[SquadExample]:
        return self.read_file(self.split_path(data_dir, split), split)

    def read_file(self, path: str, split: str) -> list[SquadExample]:
        """Reads one official SQuAD JSON file as `split` (--train_file, --predict_file)."""
        return read_squad_file(path, self.version_2, split)

    def sample_dir(self) -> str:
        return bundled_sample("squad")

    def read_tfds(self, split: str, data_dir: str | None) -> list[SquadExample]:
        """Reads `squad/v1.1` or `squad/v2.0` from a prepared TFDS folder (no downloads);
        our dev split is TFDS's validation split."""
        return read_tfds_split(self.file_version, split, data_dir, self.file_name(split))

    # ---- features and evaluation ----

    def featurize(self, examples, tokenizer, max_seq_length: int) -> Features:
        return build_features(examples, tokenizer, max_seq_length, self.doc_stride,
                              self.max_query_length)

    def decode(self, outputs, features: Features) -> Decoded:
        return decode(outputs, features, self.n_best_size, self.max_answer_length,
                      self.version_2, self.null_score_diff_threshold)

    def constant_baseline(self, features: Features, split: str = "dev", kind=None):
        """The main metric of answering every question with nothing: v1.1 0; v2.0 the
        share of unanswerable questions (best_f1 as f1: no answer is given to threshold)."""
        gold = {e.qas_id: [a.text for a in e.answers] for e in features.examples}
        empty = {qid: "" for qid in gold}
        if not self.version_2:
            return squad_metrics.evaluate_v1(gold, empty)["f1"]
        return squad_metrics.evaluate_v2(gold, empty)["f1"]

    def evaluate(self, outputs, features: Features, output_dir: str | None = None,
                 split: str = "dev") -> dict[str, float]:
        """Official metrics (0-100); writes the prediction files when output_dir is given.

        v1: exact_match, f1. v2: exact, f1, total, HasAns_*, NoAns_* of predictions.json as
        written (what `python -m kerasbert.evaluate squad_v2 dev-v2.0.json predictions.json`
        prints), and best_exact/best_f1 with their thresholds searched by the official
        algorithm over null_odds.json and the best non-null answers (so thresholds above
        the current one are found too); subsequent decoding with
        null_score_diff_threshold = best_f1_thresh gives best_f1 (up to ties in the odds).
        Where answering no question is best, the threshold is min(odds) - 1 rather than the
        official script's 0.0, which would not reproduce it.
        """
        decoded = self.decode(outputs, features)
        if output_dir is not None:
            self._write(decoded, output_dir, split)
        gold = {e.qas_id: [a.text for a in e.answers] for e in features.examples}
        if not self.version_2:
            return squad_metrics.evaluate_v1(gold, decoded.predictions, warn=log.warning)
        metrics = squad_metrics.evaluate_v2(gold, decoded.predictions, warn=log.warning)
        exact_raw, f1_raw = squad_metrics.raw_scores_v2(gold, decoded.best_non_null, log.warning)
        has = {qid: squad_metrics.has_answer(a) for qid, a in gold.items()}
        # When answering nothing is best, a threshold below every odds value says so.
        none = min(decoded.null_odds.values(), default=1.0) - 1.0
        metrics.update(squad_metrics.best_thresholds(decoded.best_non_null, exact_raw, f1_raw,
                                                     decoded.null_odds, has, none))
        return metrics

    def serving_answer(self, run):
        """The served answer is decoded in the graph as `decode` decodes (serving.py)."""
        from kerasbert.tasks.squad import serving  # lazy: TF and its text ops

        return serving.serving_answer(self, run)

    def write_predictions(self, outputs, features: Features, output_dir: str, split: str) -> str:
        return self._write(self.decode(outputs, features), output_dir, split)

    def _write(self, decoded: Decoded, output_dir: str, split: str) -> str:
        """predictions.json, nbest_predictions.json and (v2) null_odds.json; other splits
        than dev get a "<split>_" prefix. Returns the predictions file."""
        prefix = "" if split == "dev" else f"{split}_"
        files = {"predictions.json": decoded.predictions, "nbest_predictions.json": decoded.nbest}
        if self.version_2:
            files["null_odds.json"] = decoded.null_odds
        for name, content in files.items():
            atomic_write_text(os.path.join(output_dir, prefix + name),
                              json.dumps(content, indent=2, ensure_ascii=False) + "\n")
        return os.path.join(output_dir, prefix + "predictions.json")


TASKS: dict[str, SquadTask] = {t.name: t for t in (SquadTask(False), SquadTask(True))}
