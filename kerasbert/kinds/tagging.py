"""Sequence labelling (CoNLL-2003 NER): one tag per word, on its first word piece."""

import tensorflow as tf

from kerasbert.kinds.base import Serving, TaskKind
from kerasbert.kinds.tagging_graph import WordTagger


CONTEXT_INPUTS = {"text": [None], "left_context": [None], "right_context": [None]}


def _tagger(run):
    return WordTagger(run.model, run.tokenizer, run.task.label_list, run.config.max_seq_length,
                      getattr(run.task, "document_context", "0"))


def _answer(run):
    tagger = _tagger(run)
    return lambda inputs: tagger(inputs["text"])


def _context_signatures(run):
    """A run trained with --document_context also serves `serve_with_context`: the
    sentence `text` with `left_context` and `right_context`, the text before and after it
    in its document ("" for none; whitespace words, as `text`). serving_default serves
    the sentence alone, as a document of one sentence."""
    if getattr(run.task, "document_context", "0") == "0":
        return {}
    tagger = _tagger(run)
    return {"serve_with_context": (CONTEXT_INPUTS, lambda inputs: tagger(
        inputs["text"], inputs["left_context"], inputs["right_context"]))}


def _metadata(run):
    context = getattr(run.task, "document_context", "0")
    return {"document_context": context} if context != "0" else {}


def _token_tags(task, logits):
    logits = tf.cast(logits, tf.float32)
    best = tf.argmax(logits, axis=-1, output_type=tf.int32)
    return {"probabilities": tf.nn.softmax(logits, axis=-1),
            "tag": tf.gather(tf.constant(list(task.label_list), tf.string), best)}


class TaggingKind(TaskKind):
    """Outputs [B, S, K]; labels int32 [B, S], −1 where no tag is predicted (every word
    piece but a word's first, [CLS], [SEP], padding)."""

    name = "tagging"
    description = "a tag per word (logits [B, S, K], labels int32 [B, S], -1 ignored)"
    labels_per_token = True
    row_metrics = False  # a sentence's F1 needs all its pieces
    serving = Serving(lambda task: {"text": [None]}, _token_tags, answer=_answer,
                      signatures=_context_signatures, metadata=_metadata)

    def per_example_loss(self, labels, outputs):
        # Only labelled positions count; the mean is over them, so a sentence of many
        # sub-tokens does not outweigh a short one per label.
        labels = tf.cast(labels, tf.int32)
        keep = tf.cast(labels >= 0, tf.float32)
        token_loss = tf.nn.sparse_softmax_cross_entropy_with_logits(
            tf.maximum(labels, 0), tf.cast(outputs, tf.float32)) * keep
        return tf.reduce_sum(token_loss, -1) / tf.maximum(tf.reduce_sum(keep, -1), 1.0)
