"""What a task kind is: the contract between a task's arrays and the model side.

A task declares its kind by name (`Task.kind = "classification"`); a head declares the
kinds it serves (`HeadSpec.kinds`). Everything that depends on the kind, and on nothing
else of the task, lives in one `TaskKind` object, registered through the same plugin hook
as heads and tasks (`kerasbert_kinds`, kerasbert/hookspecs.py). The built-in kinds
(kerasbert/kinds/builtin.py) register exactly as a plugin's do:

    training     per_example_loss, correct_count (accuracy on the training batches)
    decoding     decode: outputs -> predictions, what the task's metrics and prediction
                 files read (Task.predictions); greater_is_better of its tasks' main metric;
                 constant_outputs: the constant predictions (the failed-run baseline)
    data         labels_per_token (label padding), inputs_rank (choices axis)
    landscape    row_metrics: whether a task's metrics over sampled feature rows mean
                 anything (not for SQuAD windows or NER sentence pieces)
    export       serving: the raw-text signature (None: the kind cannot be exported)

Shapes (B batch, S sequence, C choices, K outputs): inputs are int32 [B, S] (or [B, C, S]
when inputs_rank is 3); the model's outputs and the labels of Features are the kind's own.

A head may bring its own loss and decoding, with no switch on its name here or in the kind:
  - `per_example_loss(labels, outputs, inputs)` on the head layer replaces the kind's in
    training (`training_loss`): `outputs` are the head's `call(training=True)` outputs,
    `inputs` the model's inputs, e.g. a CRF's likelihood needs its transitions and the
    real positions (kerasbert/heads/crf.py);
  - at inference (training=False) the head returns outputs in the kind's layout that the
    kind's own decoding reads as the head's answer: a CRF head returns scores whose argmax
    at each position is its Viterbi path, so the tagging kind's evaluation, prediction
    files and serving graph serve it unchanged.
"""

import dataclasses
from typing import Any, Callable, Mapping

import numpy as np
import tensorflow as tf

from kerasbert.errors import InputError


class TaskKind:
    """Base class of a task kind; subclasses set `name` and implement the loss."""

    name: str = ""
    description: str = ""
    # Labels [B, S] with -1 at ignored positions, padded with -1 when batches are trimmed.
    labels_per_token: bool = False
    inputs_rank: int = 2  # 3: [B, C, S], one sequence per choice
    has_accuracy: bool = False  # correct_count counts something (history's train_accuracy)
    row_metrics: bool = True  # the landscape may evaluate it on sampled feature rows
    serving: "Serving | None" = None
    # Whether a larger main metric of this kind's tasks is better, where the task does not
    # say (Task.greater_is_better); None: a guess from the metric's name (kerasbert/metrics.py).
    greater_is_better: bool | None = None

    def decode(self, outputs):
        """Predictions from the model's outputs (numpy, [rows, ...] in the kind's layout):
        what a task's `compute_metrics` and prediction files read, by default
        (`Task.predictions`). Written with ops that take numpy arrays and tensors alike
        (`outputs > 0`, tf ops), the same function serves `correct_count` and the serving
        `outputs` too, so that training, metrics, files and serving decide alike."""
        raise NotImplementedError(
            f"{type(self).__name__}.decode: the {self.name} kind does not decode its outputs; "
            "implement TaskKind.decode (or the task's Task.predictions)")

    def per_example_loss(self, labels, outputs):
        """float32 [B]: each example's loss (the loop averages it over the global batch).
        Compute it in float32 whatever the outputs' dtype (mixed precision)."""
        raise NotImplementedError

    def correct_count(self, labels, outputs):
        """float32 scalar: how many examples of the batch the outputs get right (0 when
        the kind has no accuracy)."""
        return tf.constant(0.0)

    def constant_outputs(self, features, num_outputs):
        """Model outputs (numpy, [rows, ...] in the kind's layout, one per feature row of
        `features`) for each constant prediction a task of this kind can make: the
        candidates of the constant-prediction baseline (`Task.constant_baseline`), which
        evaluates each with the task's own metrics and keeps the best. None (the default):
        the kind has no such predictions, and the baseline is unknown."""
        return None

    def dummy_inputs(self, seq_length=8, batch_size=2, num_choices=2):
        """int32 model inputs in this kind's layout, to build a model's weights."""
        shape = ([batch_size, num_choices, seq_length] if self.inputs_rank == 3
                 else [batch_size, seq_length])
        inputs = {name: np.zeros(shape, np.int32)
                  for name in ("token_ids", "segment_ids", "padding_mask")}
        inputs["padding_mask"][..., :2] = 1  # [CLS] [SEP]: no all-masked rows
        return inputs

    def __repr__(self):
        return f"<kind {self.name}>"


@dataclasses.dataclass(frozen=True)
class Serving:
    """How a kind is served from a SavedModel (kerasbert/export/saved_model.py).

    text_inputs(task) -> {input name: shape} of the raw-string `serving_default`;
    encode(tokenizer, inputs, max_seq_length) -> int32 model inputs, padded to the
        maximum length (the export trims all-padding columns after it). `tokenizer` is the
        run's kerasbert.data.tokenization.WordPieceTokenizer; `inputs` the raw-string
        tensors of `text_inputs`. It is traced into the SavedModel with autograph=False, so
        it is TF ops only (no Python `if`/`for` on tensors), and it must tokenize with the
        graph-safe tools: `tokenizer.tokenize_ids` (ragged word-piece ids) and
        `kerasbert.data.tokenization.pack_inputs` ([CLS] A [SEP] (B [SEP]) packing);
        `encode_texts` is eager-only (it returns numpy);
    outputs(task, model_outputs) -> {name: tensor}, what both signatures return;
    answer(run) -> for kinds whose answer needs more than one model call or
        post-processing (span, tagging): a function of the raw-string inputs dict that
        returns the outputs; `encode` is then unused and `outputs` serves only
        `serve_token_ids`. Such a kind leaves the answer to its task (`task_serving`
        below, the task's `serving_answer`). `run` is a kerasbert.export.saved_model.LoadedRun (model,
        tokenizer, task, config, run_dir);
    metadata(run) -> extra entries of the export's assets.extra/kerasbert.json;
    signatures(run) -> more raw-string signatures: {name: ({input name: shape}, function of
        the inputs dict that returns the outputs)} (a tagging run with document context:
        `serve_with_context`).
    """

    text_inputs: Callable[[Any], Mapping[str, list]]
    outputs: Callable
    encode: Callable | None = None
    answer: Callable | None = None
    metadata: Callable = lambda run: {}
    signatures: Callable = lambda run: {}


def training_loss(kind, model):
    """(labels, outputs, inputs) -> float32 [B], the loss `model` trains with: its head's
    `per_example_loss` when the head defines one, else the kind's."""
    head_loss = getattr(getattr(model, "head", None), "per_example_loss", None)
    if head_loss is not None:
        return head_loss
    return lambda labels, outputs, inputs: kind.per_example_loss(labels, outputs)


def task_serving(text_inputs, outputs) -> Serving:
    """The Serving of a kind whose answer each task brings (span, tagging): `answer`,
    `metadata` and `signatures` are those of the task's `Task.serving_answer(run)`; a task
    of the kind without one cannot be exported (an InputError naming it)."""

    def served(run):
        answer = run.task.serving_answer(run)
        if answer is None:
            raise InputError(f"--task={run.task.name}: a {run.task.kind} task is served by its "
                             "own decoding; implement Task.serving_answer to export it")
        return answer

    return Serving(text_inputs, outputs, answer=lambda run: served(run).answer,
                   metadata=lambda run: dict(served(run).metadata),
                   signatures=lambda run: dict(served(run).signatures))
