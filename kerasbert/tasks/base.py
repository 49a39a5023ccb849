"""What every task provides, whatever its data looks like.

A task knows its files, its features and its metrics, never the model. The model side only
sees the feature arrays a task builds and the `kind` it declares (which heads and which loss
fit it). Tasks are registered through the same plugin hook third parties use
(`kerasbert_tasks`, see `kerasbert/hookspecs.py`); `Task` below is the contract: what a task
must implement, and the optional capabilities it may add.
"""

import dataclasses
import os
import warnings
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from kerasbert.errors import InputError, at
from kerasbert.io_utils import missing_file
from kerasbert.metrics import greater_is_better, improves
# Re-exported for tasks and plugins that import the kind names from here.
from kerasbert.kind_names import (  # noqa: F401
    CLASSIFICATION, MULTIPLE_CHOICE, PADDING_LOGIT, REGRESSION, SPAN, TAGGING)

SAMPLES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "data", "samples")


def bundled_sample(*parts: str) -> str:
    """A bundled sample's folder, `kerasbert/data/samples/<parts>` (what `sample_dir` gives)."""
    return os.path.join(SAMPLES_DIR, *parts)


def split_file(data_dir: str, *names: str) -> str:
    """`<data_dir>/<name>` for the first of `names` that is a file (a split's official file;
    a name may hold folders, e.g. GLUE's `SST-2/train.tsv` under a GLUE root); else the
    InputError naming the file and listing what the folder has."""
    candidates = [os.path.join(data_dir, name) for name in names]
    for path in candidates:
        if os.path.isfile(path):
            return path
    raise missing_file(candidates[0], data_dir, also=candidates[1:])


@dataclasses.dataclass(frozen=True)
class Example:
    """One example as read from the official files (text, not ids)."""

    guid: str  # "<split>-<line or id>", stable across runs, used in prediction files
    text_a: str
    text_b: str | None = None
    label: Any = None  # a label string for classification, a float for regression, None for test


@dataclasses.dataclass
class Features:
    """Model inputs for a list of examples, as int32 arrays of equal first dimension.

    `inputs` holds token_ids, segment_ids and padding_mask ([n, seq_len], or
    [n, choices, seq_len] for multiple choice; int32: see docs/design.md on why never bool);
    `labels` is None for unlabelled splits. One example may give several feature rows
    (SQuAD windows, long NER sentences): `extra` holds what post-processing needs to map
    rows back to examples (e.g. example index, token → character offsets).
    """

    inputs: dict[str, np.ndarray]
    labels: np.ndarray | None
    examples: Sequence[Any]
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class ServingAnswer:
    """A task's own answer inside the exported SavedModel (what `Task.serving_answer` gives).

    answer: a function of the raw-string inputs dict (the kind's `Serving.text_inputs`,
        e.g. {"question", "context"}) that returns the outputs {name: tensor}; it is traced
        into the SavedModel with autograph off, so it is TF ops only (tf.cond, tf.map_fn,
        tf.while_loop, not Python `if` on tensors), and must tokenize with the graph-safe
        tools (`tokenizer.tokenize_ids`, `kerasbert.data.tokenization.pack_inputs`);
    metadata: extra entries of the export's assets.extra/kerasbert.json;
    signatures: more raw-string signatures, {name: ({input name: shape}, function of the
        inputs dict that returns the outputs)}.
    """

    answer: Callable[[Mapping[str, Any]], Mapping[str, Any]]
    metadata: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    signatures: Mapping[str, tuple] = dataclasses.field(default_factory=dict)


class Task:
    """Base class of a task: the contract every task, built-in or plugin, implements.

    Required (a registered task that leaves one to this class is refused at start, with a
    line naming it, see `unimplemented`): `read_examples`, `sample_dir`, the metrics
    (`compute_metrics`, or `evaluate` where scoring needs the features) and, for a task
    with test splits, the prediction file (`write_test_predictions`, or
    `write_predictions`). Everything else has a default here: the attributes below,
    featurizing text (pairs), and the optional capabilities, each of which says what its
    default does: `read_file` (--train_file, --validation_file,
    --test_file), `data_options`, `read_tfds` (--use_tfds),
    `split_path` + `iter_file` + `count_rows` + `keeps_together`
    (--stream_train_data), `option_names` +
    `configure` and `check_config` (run settings), `predictions` (decoding, by default
    the kind's `decode`), `per_example_scores` (the restarts tables' bootstrap over
    examples), `constant_baseline` (the failed-run check), `is_sentence_pair` and
    `serving_answer` (the export).

    Attributes a task may override: `name` and `description` (one line, what --list_tasks
    shows), `kind`, `default_head`, `label_list`, `num_outputs` (a property: the head's
    outputs, by default one per label), `main_metric` and `greater_is_better` (its
    direction), the splits, the recipe (`default_*`, `sample_recipe`) and `option_names`.

    Not an `abc.ABC`: an abstract method would make an incomplete plugin task fail inside
    the plugin's hook (a TypeError that loses every task of the plugin, and the name of the
    task), where the registry can instead drop that one task and say what it lacks.
    """

    name: str = ""
    description: str = ""  # one line, what --list_tasks shows beside the name
    kind: str = CLASSIFICATION
    default_head: str = "cls_linear"
    label_list: Sequence[str] | None = None  # None for regression
    main_metric: str = "accuracy"  # picked for best-on-dev selection
    # Whether a larger main_metric is better (HuggingFace's `greater_is_better`): the
    # sweep's best run, --frozen_patience early stopping, the restarts tables and the
    # reports rank runs by it. None: the kind's `TaskKind.greater_is_better`, else a guess
    # from the metric's name (kerasbert/metrics.py). Declare False for `mae`, `rmse`, ...
    greater_is_better: bool | None = None
    dev_splits: Sequence[str] = ("dev",)  # MNLI has dev_matched and dev_mismatched
    test_splits: Sequence[str] = ("test",)
    # Test splits whose files carry gold labels (CoNLL-2003's test.txt): --do_predict also
    # scores them with `evaluate`, as `<split>_<metric>` beside the dev metrics.
    scored_test_splits: Sequence[str] = ()
    # Paper recipe defaults, used where the user gave no flag.
    default_learning_rate: float = 2e-5
    default_train_batch_size: int = 32
    default_num_train_epochs: float = 3.0
    default_max_seq_length: int = 128
    # Overrides of the recipe for the bundled sample only (a demo, not the paper's data):
    # any of learning_rate, train_batch_size, num_train_epochs (another key is refused,
    # kerasbert/config.py SAMPLE_RECIPE_KEYS).
    sample_recipe: Mapping[str, Any] = {}
    # The RunConfig fields the run hands to `configure` (SQuAD's doc_stride, ...).
    option_names: Sequence[str] = ()
    # The TaskKind named by `kind`, handed to the task by the registry that accepts it
    # (kerasbert/plugins.py): what `predictions` decodes with. A task sets none itself.
    registered_kind = None

    @property
    def num_outputs(self) -> int:
        """The head's outputs (per position, for a per-token kind): one per label, 1
        without a label list (regression; multiple choice scores each choice's sequence).
        Override it where the kind's outputs are not one per label (K - 1 cumulative
        logits of an ordinal kind): heads are then told no label names (HeadContext.labels
        names the outputs only when there is one per output)."""
        return 1 if self.label_list is None else len(self.label_list)

    # ---- required ------------------------------------------------------------------------

    def read_examples(self, data_dir: str, split: str) -> list[Example]:
        """Reads a split ('train', one of dev_splits, one of test_splits) from the official
        files in `data_dir`; a bad or missing file is an InputError naming it."""
        raise NotImplementedError("Task.read_examples")

    def sample_dir(self) -> str:
        """The bundled sample in the official format, used when no --data_dir is given."""
        raise NotImplementedError("Task.sample_dir")

    def compute_metrics(self, predictions: np.ndarray, labels: np.ndarray) -> Mapping[str, float]:
        """Official metrics from model predictions (class ids or floats) and gold labels
        (what the default `evaluate` reports); must include `main_metric`."""
        raise NotImplementedError("Task.compute_metrics")

    def evaluate(self, outputs, features: Features, output_dir: str | None = None,
                 split: str = "dev") -> dict[str, float]:
        """Official metrics of a labelled split from the model's raw outputs.

        Tasks with post-processing (span decoding, word re-alignment) override this and
        may write their prediction files for the split into `output_dir`.
        """
        return dict(self.compute_metrics(self.predictions(outputs), features.labels))

    def write_test_predictions(self, examples, predictions, path) -> None:
        """Writes predictions for an unlabelled split in the task's submission format (what
        the default `write_predictions` writes)."""
        raise NotImplementedError("Task.write_test_predictions")

    def write_predictions(self, outputs, features: Features, output_dir: str, split: str) -> str:
        """Writes an unlabelled split's predictions (--do_predict); returns the file written."""
        name = "test_results.tsv" if split == "test" else f"{split}_results.tsv"
        path = os.path.join(output_dir, name)
        self.write_test_predictions(features.examples, self.predictions(outputs), path)
        return path

    # ---- optional capabilities -------------------------------------------------------------

    def read_file(self, path: str, split: str) -> list[Example]:
        """Reads one official file as the given split (--train_file, --predict_file). By
        default a task reads whole folders only."""
        raise InputError(f"{at(path)}the {self.name} task reads its splits from a folder "
                         "(--data_dir), not from one file (--train_file, --predict_file)")

    def read_tfds(self, split: str, data_dir: str | None) -> list[Example]:
        """Reads a split from a prepared tensorflow_datasets folder (--use_tfds). By default
        a task has no TFDS reader."""
        raise InputError(f"--use_tfds: the {self.name} task has no tensorflow_datasets "
                         "reader; pass --data_dir with its official files")

    def split_path(self, data_dir: str, split: str) -> str | None:
        """The one file of `data_dir` a split is read from (an InputError when missing), or
        None (the default) for a task whose splits are not one file each."""
        return None

    def iter_file(self, path: str, split: str):
        """The examples of one file, one at a time, validated as `read_file` validates them
        (--stream_train_data trains from it, see kerasbert/data/streaming.py). By default a
        task reads its files whole: see `can_stream`."""
        raise InputError(f"{at(path)}the {self.name} task reads its training file whole; "
                         "it cannot stream it (--stream_train_data=false)")

    @property
    def can_stream(self) -> bool:
        """Whether the training file can be streamed: the task implements `iter_file`, and
        `split_path` to find the file in --data_dir."""
        return _overrides(self, "iter_file") and _overrides(self, "split_path")

    def count_rows(self, examples: Sequence[Example], tokenizer, max_seq_length: int) -> int:
        """The feature rows `featurize` makes of `examples`, without making them (streaming
        counts them for the steps and the accuracy weights). By default one per example; a
        task whose example may make several (a long CoNLL sentence) overrides this."""
        return len(examples)

    def keeps_together(self, example: Example, following: Example) -> bool:
        """Whether two consecutive examples must be featurized in one `featurize` call (a
        streamed split then never cuts a chunk between them): CoNLL's sentences of one
        document with --document_context. By default never."""
        return False

    def configure(self, **options) -> "Task":
        """Takes the run's values of `option_names` (e.g. SQuAD's doc_stride); most tasks
        have none."""
        return self

    def check_config(self, config) -> None:
        """Refuses run settings this task cannot work with (an InputError naming the flag),
        before any data is read; most tasks accept every valid RunConfig."""

    def data_options(self, config) -> Mapping[str, Any]:
        """RunConfig values the run's data decides, read (and checked) before the encoder
        loads; the run keeps them in run_config.json, so the run is rebuilt with the same
        task (the generic tasks' label list, taken from the training file). By default
        none."""
        return {}

    def is_sentence_pair(self) -> bool:
        """Whether the task reads text_a and text_b (the export's `serving_default` then
        takes both). By default one example of the bundled sample tells; a task that knows
        (GLUE's `text_b` column) says so instead."""
        try:
            examples = self.read_examples(self.sample_dir(), "train")
        except (NotImplementedError, InputError, OSError):
            raise InputError(
                f"--task={self.name}: cannot tell whether it takes one text or a pair; "
                "override Task.is_sentence_pair") from None
        return bool(examples) and examples[0].text_b is not None

    def serving_answer(self, run) -> ServingAnswer | None:
        """The task's own post-processing inside the exported SavedModel, for a kind whose
        answer needs more than one model call or decoding of its own (SQuAD's windows and
        n-best spans, CoNLL's word re-alignment): the span and tagging kinds' serving calls
        it (kerasbert/kinds/base.py `task_serving`). `run` is the loaded run
        (kerasbert.export.saved_model.LoadedRun: model, tokenizer, task, config, run_dir).
        By default None: the kind serves the task from its own `encode` and `outputs`."""
        return None

    # ---- features ----------------------------------------------------------------------

    def predictions(self, outputs: np.ndarray) -> np.ndarray:
        """What `compute_metrics` and the prediction files read, from raw model outputs:
        by default the kind's decoding (`TaskKind.decode`: class ids, regression values,
        ...), so a task of a new kind decodes as its kind does. A task outside any registry
        (no `registered_kind`) of a built-in sentence kind decodes as those kinds do."""
        if self.registered_kind is not None:
            return np.asarray(self.registered_kind.decode(outputs))
        if self.kind not in (CLASSIFICATION, MULTIPLE_CHOICE, REGRESSION):
            raise NotImplementedError(
                f"Task.predictions: the {self.kind} task {self.name!r} decodes through its "
                "kind (TaskKind.decode), which its registry hands it")
        outputs = np.asarray(outputs)
        return outputs[:, 0] if self.kind == REGRESSION else outputs.argmax(axis=-1)

    def constant_baseline(self, features: Features, split: str = "dev", kind=None):
        """The best value of `main_metric` over constant predictions on a labelled split
        (the majority class's accuracy, the all-positive F1, a constant score's correlation
        0): what a run that learned nothing reaches, the failed-run check's baseline
        (Mosbach et al. 2021). By default each constant prediction of the kind
        (`TaskKind.constant_outputs`; `kind`: the run's, else `registered_kind`) is scored
        by `evaluate`, and the best kept; a metric undefined for a constant prediction
        (NaN: a correlation) counts as 0 where higher is better. None: unknown (a kind with
        no constant predictions, an undefined metric where lower is better). A task whose
        decoding gives no constant answer from them (SQuAD: empty answers) overrides it."""
        kind = kind if kind is not None else self.registered_kind
        candidates = kind.constant_outputs(features, self.num_outputs) if kind else None
        if not candidates or features.labels is None:
            return None
        greater = greater_is_better(self.main_metric, self, kind)
        best = None
        for outputs in candidates:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")  # scipy: "an input array is constant"
                value = self.evaluate(outputs, features, None, split).get(self.main_metric)
            if not isinstance(value, (int, float, np.floating, np.integer)):
                return None
            value = float(value)
            if not np.isfinite(value):
                if not greater:
                    return None
                value = 0.0
            if improves(self.main_metric, value, best, greater):
                best = value
        return best

    def per_example_scores(self, run_dir: str, metric: str, split: str):
        """A finished run's per-example scores of `split` for `metric`, read from the files
        the run keeps (its prediction files): (float array [examples, columns], statistic),
        where statistic names how the summed columns give the metric
        (kerasbert.analysis.stats.STATISTICS: "mean", one 0/1 or score column; "f1",
        columns true positives, predicted, gold). The restarts tables then bootstrap over
        seeds and examples (kerasbert/restarts.py). None (the default): the run keeps no
        such scores, and the tables' intervals are over seeds only."""
        return None

    def encode_labels(self, examples: Sequence[Example]) -> np.ndarray | None:
        """Class ids (int32) or regression targets (float32); None for unlabelled splits."""
        if any(e.label is None for e in examples):
            return None
        if self.label_list is None:
            return np.array([float(e.label) for e in examples], np.float32)
        index = {label: i for i, label in enumerate(self.label_list)}
        return np.array([index[e.label] for e in examples], np.int32)

    def featurize(self, examples: Sequence[Example], tokenizer, max_seq_length: int) -> Features:
        """[CLS] A [SEP] (B [SEP]) ids for sentence and sentence-pair tasks."""
        # Lazy: the tokenizer loads TensorFlow, which the standalone scorers
        # (kerasbert/evaluate.py → tasks.conll → this module) do not need.
        from kerasbert.data.tokenization import encode_texts

        pairs = bool(examples) and examples[0].text_b is not None
        inputs = encode_texts(tokenizer, [e.text_a for e in examples],
                              [e.text_b for e in examples] if pairs else None, max_seq_length)
        return Features(inputs=inputs, labels=self.encode_labels(examples), examples=examples)


def _overrides(task, method: str) -> bool:
    """Whether the task's class implements `method` rather than inheriting Task's."""
    return getattr(type(task), method, None) is not getattr(Task, method)


def unimplemented(task) -> list[str]:
    """The required methods `task` leaves to Task, e.g. ["Task.read_examples"]; a pair
    "Task.compute_metrics or Task.evaluate" where overriding either one will do."""
    needs = [("read_examples",), ("sample_dir",), ("compute_metrics", "evaluate")]
    if task.test_splits:
        needs.append(("write_test_predictions", "write_predictions"))
    return [" or ".join(f"Task.{m}" for m in methods) for methods in needs
            if not any(_overrides(task, m) for m in methods)]
