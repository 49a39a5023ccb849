"""Extractive question answering (SQuAD): start and end logits over the window."""

import tensorflow as tf

from kerasbert import run_folder
from kerasbert.kinds.base import Serving, TaskKind
from kerasbert.kinds.span_graph import SpanAnswerer


def null_threshold(run):
    """SQuAD 2.0: the threshold tuned on dev (best_f1_thresh) when the run evaluated, else
    the one it was given (--null_score_diff_threshold). A run exports before it writes
    metrics.json (so that a kill during export resumes), hence eval_results.txt first."""
    if run.task.version_2:
        tuned = run_folder.read_eval_results(run.run_dir).get("best_f1_thresh")
        if tuned is None:
            tuned = run_folder.read_metrics(run.run_dir).get("best_f1_thresh")
        if isinstance(tuned, (int, float)):
            return float(tuned)
    return float(run.config.null_score_diff_threshold)


def _answer(run):
    answerer = SpanAnswerer(run.model, run.tokenizer, run.task, run.config.max_seq_length,
                            null_threshold(run))
    return lambda inputs: answerer(inputs["question"], inputs["context"])


def _logits(task, logits):
    logits = tf.cast(logits, tf.float32)
    return {"start_logits": logits[:, :, 0], "end_logits": logits[:, :, 1]}


def _metadata(run):
    return {"squad_options": {name: getattr(run.task, name) for name in (
                "doc_stride", "max_query_length", "n_best_size", "max_answer_length")},
            "null_score_diff_threshold": null_threshold(run)}


class SpanKind(TaskKind):
    """Outputs [B, S, 2] start/end logits; labels int32 [B, 2] (0, 0: no answer in the
    window); the paper's loss, the mean of the start and end log-likelihoods."""

    name = "span"
    description = "an answer span in the passage (logits [B, S, 2], labels int32 [B, 2])"
    row_metrics = False  # a question's answer needs all its windows
    serving = Serving(lambda task: {"question": [None], "context": [None]}, _logits,
                      answer=_answer, metadata=_metadata)

    def per_example_loss(self, labels, outputs):
        logits = tf.cast(outputs, tf.float32)
        labels = tf.cast(labels, tf.int32)
        start = tf.nn.sparse_softmax_cross_entropy_with_logits(labels[:, 0], logits[:, :, 0])
        end = tf.nn.sparse_softmax_cross_entropy_with_logits(labels[:, 1], logits[:, :, 1])
        return (start + end) / 2.0
