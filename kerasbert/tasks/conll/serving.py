"""NER tags inside the serving graph: a sentence string in, one tag per whitespace word out.

The graph repeats `features.featurize_sentences` and `decoding.predict_word_tags`
op for op, one sentence at a time (`tf.map_fn`), so a served tag is the tag the run's own
evaluation gives for the same words:

  1. the sentence is split on whitespace (Python's `str.split` characters) into words,
     each word into word pieces: a word with none keeps one [UNK] position, a word with
     more than fit a window keeps its first piece;
  2. a sentence longer than max_seq_length - 2 pieces is cut into overlapping windows of
     whole words, each next one starting about half a window later (`features.windows`);
  3. each word is predicted in the window where it has the most context
     (`features.best_windows`), at its first piece;
  4. with --document_context, each window also holds the words around it in its document
     (`features.context_window`): those of the optional left and right context texts (the
     document's text before and after the sentence), and the sentence's own words outside
     the window.

Outputs: `tags` and `words` [batch, max words] (padded with ""), `num_words` [batch].
"""

import sys

import tensorflow as tf
import tensorflow_text as tf_text

from kerasbert.data.tokenization import regex_class
from kerasbert.tasks.base import ServingAnswer
from kerasbert.tasks.conll.features import context_pieces
from kerasbert.tasks.graph_ops import first_max_index

# What str.split() splits on, the way a CoNLL line's words are separated.
_WHITESPACE = regex_class([cp for cp in range(sys.maxunicode + 1) if chr(cp).isspace()]) + "+"


def greedy_windows(offsets, capacity):
    """`features.windows` in TF: (starts, ends) word ranges, from piece `offsets` [words + 1]."""
    count = tf.size(offsets) - 1
    stride = max(capacity // 2, 1)

    def step(start, starts, ends):
        base = offsets[start]
        end = tf.minimum(tf.searchsorted(offsets, [base + capacity], side="right")[0] - 1, count)
        after = tf.searchsorted(offsets, [base + stride], side="left")[0]
        following = tf.maximum(start + 1, tf.minimum(end, after))
        return (tf.where(end >= count, count + 1, following),
                starts.write(starts.size(), start), ends.write(ends.size(), end))

    _, starts, ends = tf.while_loop(
        lambda start, *_: start <= count, step,
        (tf.constant(0), tf.TensorArray(tf.int32, 0, dynamic_size=True),
         tf.TensorArray(tf.int32, 0, dynamic_size=True)))
    return starts.stack(), ends.stack()


class WordTagger:
    """Tags the whitespace words of [batch] sentences with a trained tagging model;
    `document_context` (the run's --document_context) and optional [batch] left and right
    context texts: the words before and after each sentence in its document."""

    def __init__(self, model, tokenizer, label_list, max_seq_length, document_context=0):
        self.model, self.tokenizer = model, tokenizer
        self.labels = tf.constant(list(label_list))
        self.capacity = int(max_seq_length) - 2
        self.context = context_pieces(document_context, max_seq_length)

    def __call__(self, text, left_context=None, right_context=None):
        specs = {"tags": tf.RaggedTensorSpec([None], tf.string, ragged_rank=0),
                 "words": tf.RaggedTensorSpec([None], tf.string, ragged_rank=0)}
        if left_context is None:  # no context: empty texts
            left_context = right_context = tf.fill(tf.shape(text), "")
        out = tf.map_fn(lambda texts: self._tag(*texts), (text, left_context, right_context),
                        fn_output_signature=specs)
        return {"tags": out["tags"].to_tensor(""), "words": out["words"].to_tensor(""),
                "num_words": tf.cast(out["words"].row_lengths(), tf.int32)}

    def _pieces(self, text):
        """(whitespace words, their pieces ragged [words, (pieces)]) of one text."""
        tok = self.tokenizer
        text = tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="ignore")
        words = tf_text.regex_split(tf.reshape(text, [1]), _WHITESPACE).flat_values
        pieces = tok.tokenize_ids(words)
        count = pieces.row_lengths()
        # [UNK] for a word without pieces, the first piece only for one that cannot fit:
        # append [UNK] to every word and keep the first `keep` positions.
        keep = tf.where((count == 0) | (count > self.capacity), tf.ones_like(count), count)
        padded = tf.concat([pieces, tf.fill([tf.size(count), 1], tok.unk_id)], axis=1)
        return words, tf.ragged.boolean_mask(padded, tf.ragged.range(count + 1) < keep[:, None])

    def _tag(self, text, left_context, right_context):
        tok = self.tokenizer
        words, pieces = self._pieces(text)
        lengths = tf.cast(pieces.row_lengths(), tf.int32)
        offsets = tf.concat([[0], tf.cumsum(lengths)], 0)
        starts, ends = greedy_windows(offsets, self.capacity)

        # The document as one stream of pieces: left context, the sentence, right context
        # (`features.featurize_sentences`); each row is its window plus the context around it.
        _, left_pieces = self._pieces(left_context)
        _, right_pieces = self._pieces(right_context)
        stream = tf.concat([left_pieces.flat_values, pieces.flat_values,
                            right_pieces.flat_values], 0)
        before = tf.size(left_pieces.flat_values, tf.int32)
        doc_offsets = tf.concat([[0], tf.cumsum(tf.cast(tf.concat(
            [left_pieces.row_lengths(), pieces.row_lengths(), right_pieces.row_lengths()], 0),
            tf.int32))], 0)
        own_start = before + tf.gather(offsets, starts)
        own_end = before + tf.gather(offsets, ends)
        row_start, row_end = context_windows(own_start, own_end, tf.minimum(
            self.context, self.capacity - (own_end - own_start)), doc_offsets)

        rows = tf.gather(stream, tf.ragged.range(row_start, row_end))
        column = tf.ones([tf.size(starts), 1], tf.int32)
        token_ids = tf.concat([column * tok.cls_id, rows, column * tok.sep_id], axis=1)
        logits = self.model({"token_ids": token_ids.to_tensor(tok.pad_id),
                             "segment_ids": tf.zeros_like(token_ids).to_tensor(0),
                             "padding_mask": tf.ones_like(token_ids).to_tensor(0)},
                            training=False)

        # Each word is read in the window where it has the most context, at its first piece.
        word = tf.range(tf.size(lengths))[None, :]
        s, e = starts[:, None], ends[:, None]
        left = tf.gather(offsets, word) - tf.gather(offsets, s)
        right = tf.gather(offsets, e) - tf.gather(offsets, word + 1)
        size = tf.gather(offsets, e) - tf.gather(offsets, s)
        score = tf.cast(tf.minimum(left, right), tf.float64) + 0.01 * tf.cast(size, tf.float64)
        score = tf.where((word >= s) & (word < e), score, tf.cast(-float("inf"), tf.float64))
        owner = tf.cast(first_max_index(score), tf.int32)
        position = 1 + before + offsets[:-1] - tf.gather(row_start, owner)
        word_logits = tf.gather_nd(logits, tf.stack([owner, position], axis=1))
        tags = tf.gather(self.labels, tf.argmax(word_logits, axis=-1))
        return {"tags": tags, "words": words}


def context_windows(own_start, own_end, room, offsets):
    """`features.context_window` in TF, for [rows] own piece ranges: (row starts, row ends)."""
    total = offsets[-1]
    half_left = room - room // 2
    left = tf.minimum(own_start, tf.maximum(half_left, room - (total - own_end)))
    start = tf.gather(offsets, tf.searchsorted(offsets, own_start - left, side="left"))
    right = room - (own_start - start)
    end = tf.gather(offsets, tf.searchsorted(offsets, own_end + right, side="right") - 1)
    return start, end


# The sentence with the text before and after it in its document (serve_with_context).
CONTEXT_INPUTS = {"text": [None], "left_context": [None], "right_context": [None]}


def serving_answer(task, run) -> ServingAnswer:
    """`ConllTask.serving_answer`: a sentence in, its words and tags out. A run trained
    with --document_context also serves `serve_with_context`: the sentence `text` with
    `left_context` and `right_context`, the text before and after it in its document (""
    for none; whitespace words, as `text`); serving_default then serves the sentence
    alone, as a document of one sentence."""
    context = getattr(task, "document_context", "0")
    tagger = WordTagger(run.model, run.tokenizer, task.label_list, run.config.max_seq_length,
                        context)
    if context == "0":
        return ServingAnswer(answer=lambda inputs: tagger(inputs["text"]))
    return ServingAnswer(
        answer=lambda inputs: tagger(inputs["text"]),
        metadata={"document_context": context},
        signatures={"serve_with_context": (CONTEXT_INPUTS, lambda inputs: tagger(
            inputs["text"], inputs["left_context"], inputs["right_context"]))})
