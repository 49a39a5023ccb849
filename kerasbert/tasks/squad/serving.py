"""SQuAD answers inside the serving graph: question + context strings in, answer text out.

The graph repeats what the Python path does (`features.build_features` then
`decoding.decode`), op for op, one question at a time (`tf.map_fn`), so a served answer is
the answer the run's own evaluation gives for the same text:

  1. the context is split on BERT's SQuAD whitespace into words (with their offsets), each
     word into word pieces; the question is cut to max_query_length pieces;
  2. windows of the passage start min(doc_stride, room) pieces apart, room being what
     [CLS] question [SEP] ... [SEP] leaves of max_seq_length (`span_answers.doc_windows`);
  3. the model scores every window; each piece counts only in the window where it has the
     most context (`span_answers.max_context_masks`); the n_best_size best starts and ends of each
     window are paired (end >= start, length <= max_answer_length, inside the passage),
     and the best pair over all windows is the answer (`decoding.decode`);
  4. its pieces are projected back onto the original words (`span_answers.get_final_text`);
  5. v2: the answer is "" when s_null - s_best exceeds the threshold, the run's tuned
     `best_f1_thresh` (a run's dev evaluation stores it in metrics.json).

Outputs per question: `answer` (the text: words joined by single spaces, as the Python
decoder writes predictions.json), `score` (start + end logit of the answer; v2: s_null when
the answer is ""; 0 when the passage is empty), `start` / `end` (character offsets of the
answer in the context, end exclusive; -1 for ""), and for v2 `null_odds` (s_null - s_best,
the value null_odds.json holds). Invalid UTF-8 bytes of the context are dropped before
anything else, so offsets then refer to the context without them.
"""

import tensorflow as tf
import tensorflow_text as tf_text

from kerasbert import run_folder
from kerasbert.tasks.base import ServingAnswer
from kerasbert.tasks.graph_ops import first_max_index
from kerasbert.tasks.squad.decoding import NO_SPAN_ODDS

_WHITESPACE = "[ \t\r\n\u202f]+"  # run_squad.py's word separators (span_answers.WORD)


def _char_length(text):
    return tf.strings.length(text, unit="UTF8_CHAR")


def final_text(pred, orig, tok):
    """`span_answers.get_final_text` in TF: (text, first char, last char) of `orig`.

    Finds the de-tokenized prediction in the basic-tokenized words `tok`, then counts
    non-space characters to find the same characters in the original words `orig`; the whole
    of `orig` when it is not found or normalisation changed the length.
    """
    parts = tf.strings.split(tf.reshape(tok, [1]), sep=pred).flat_values
    found = tf.logical_and(tf.not_equal(pred, ""), tf.size(parts) > 1)
    orig_cps = tf.strings.unicode_decode(orig, "UTF-8")
    tok_cps = tf.strings.unicode_decode(tok, "UTF-8")
    orig_nonspace = tf.not_equal(orig_cps, 32)
    same = tf.equal(tf.reduce_sum(tf.cast(orig_nonspace, tf.int32)),
                    tf.reduce_sum(tf.cast(tf.not_equal(tok_cps, 32), tf.int32)))

    def trimmed():
        start = _char_length(parts[0])
        end = start + _char_length(pred) - 1
        spaces_before = tf.cumsum(tf.cast(tf.equal(tok_cps, 32), tf.int32), exclusive=True)
        positions = tf.cast(tf.where(orig_nonspace)[:, 0], tf.int32)
        return (positions[start - spaces_before[start]],
                positions[end - spaces_before[end]])

    def whole():
        return tf.constant(0), tf.size(orig_cps) - 1

    first, last = tf.cond(tf.logical_and(found, same), trimmed, whole)
    return tf.strings.unicode_encode(orig_cps[first: last + 1], "UTF-8"), first, last


class SpanAnswerer:
    """Answers [batch] questions about [batch] contexts with a trained span model."""

    def __init__(self, model, tokenizer, task, max_seq_length, null_score_diff_threshold):
        self.model, self.tokenizer = model, tokenizer
        self.version_2 = task.version_2
        self.max_seq_length = int(max_seq_length)
        self.doc_stride = int(task.doc_stride)
        self.max_query_length = int(task.max_query_length)
        self.n_best_size = int(task.n_best_size)
        self.max_answer_length = int(task.max_answer_length)
        self.threshold = float(null_score_diff_threshold)

    def output_names(self):
        return ("answer", "score", "start", "end") + (("null_odds",) if self.version_2 else ())

    def __call__(self, question, context):
        tf.debugging.assert_equal(tf.size(question), tf.size(context),
                                  message="question and context need the same number of texts")
        specs = {"answer": tf.TensorSpec([], tf.string), "score": tf.TensorSpec([], tf.float32),
                 "start": tf.TensorSpec([], tf.int32), "end": tf.TensorSpec([], tf.int32),
                 "null_odds": tf.TensorSpec([], tf.float32)}
        out = tf.map_fn(self._answer, (question, context), fn_output_signature=specs)
        return {k: out[k] for k in self.output_names()}

    # --- one question ----------------------------------------------------------------------

    def _answer(self, pair):
        question, context = pair
        tok = self.tokenizer
        context = tf.strings.unicode_transcode(context, "UTF-8", "UTF-8", errors="ignore")
        words, begins, _ = tf_text.regex_split_with_offsets(tf.reshape(context, [1]),
                                                            _WHITESPACE)
        words, begins = words.flat_values, begins.flat_values
        # Character offset of each word (the regex gives bytes).
        word_chars = _char_length(tf.strings.substr(
            tf.fill(tf.shape(begins), context), tf.zeros_like(begins), begins))
        pieces = tok.tokenize_ids(words)  # [words, (pieces)]
        piece_ids, piece_to_word = pieces.flat_values, tf.cast(pieces.value_rowids(), tf.int32)
        n = tf.size(piece_ids)
        query = tok.tokenize_ids(tf.reshape(question, [1])).flat_values[: self.max_query_length]

        # Windows over the passage (span_answers.doc_windows); an empty passage gets one empty
        # window, where no span is valid, as the Python decoder finds no span.
        q_len = tf.size(query)
        room = self.max_seq_length - q_len - 3
        stride = tf.minimum(room, self.doc_stride)
        k = tf.where(n <= room, 1, 1 + (n - room + stride - 1) // stride)
        starts = tf.range(k) * stride
        lengths = tf.minimum(room, n - starts)
        passage = tf.gather(piece_ids, tf.ragged.range(starts, starts + lengths))
        column = tf.ones([k, 1], tf.int32)
        question_rows = tf.RaggedTensor.from_tensor(tf.tile(query[None], [k, 1]))
        token_ids = tf.concat([column * tok.cls_id, question_rows, column * tok.sep_id,
                               passage, column * tok.sep_id], axis=1)
        segment_ids = tf.concat([tf.zeros_like(column), tf.zeros_like(question_rows),
                                 tf.zeros_like(column), tf.ones_like(passage), column], axis=1)
        logits = self.model({"token_ids": token_ids.to_tensor(tok.pad_id),
                             "segment_ids": segment_ids.to_tensor(0),
                             "padding_mask": tf.ones_like(token_ids).to_tensor(0)},
                            training=False)
        logits = tf.cast(logits, tf.float64)  # sums in float64, as the Python decoder

        # Each piece belongs to the window where it has the most context.
        position = tf.range(n)[None, :]
        first, last = starts[:, None], (starts + lengths - 1)[:, None]
        context_score = (tf.cast(tf.minimum(position - first, last - position), tf.float64)
                         + 0.01 * tf.cast(lengths[:, None], tf.float64))
        inside = (position >= first) & (position <= last)
        owner = tf.cast(first_max_index(
            tf.where(inside, context_score, tf.cast(-float("inf"), tf.float64))), tf.int32)

        # Best (start, end) pair over the n-best starts and ends of every window.
        offset = q_len + 2
        nb = tf.minimum(self.n_best_size, tf.shape(logits)[1])
        start_logits, start_at = tf.math.top_k(logits[:, :, 0], nb)
        end_logits, end_at = tf.math.top_k(logits[:, :, 1], nb)
        def in_window(at):
            return (at >= offset) & (at < offset + lengths[:, None])

        # A start counts only in the window that owns its piece (-1: outside the passage).
        start_piece = tf.where(in_window(start_at), starts[:, None] + start_at - offset, n)
        start_ok = tf.equal(tf.gather(tf.concat([owner, [-1]], 0), start_piece),
                            tf.range(k)[:, None])
        s, e = start_at[:, :, None], end_at[:, None, :]
        valid = (start_ok[:, :, None] & in_window(end_at)[:, None, :] & (e >= s)
                 & (e - s < self.max_answer_length))
        pair_score = tf.where(valid, start_logits[:, :, None] + end_logits[:, None, :],
                              tf.cast(-float("inf"), tf.float64))
        flat = tf.reshape(pair_score, [-1])
        best = tf.cast(first_max_index(flat), tf.int32)
        has_span = tf.reduce_any(valid)
        window, a, b = best // (nb * nb), (best // nb) % nb, best % nb
        best_score = flat[best]
        null_score = tf.reduce_min(logits[:, 0, 0] + logits[:, 0, 1])
        null_odds = tf.where(has_span, null_score - best_score, NO_SPAN_ODDS)
        answered = has_span & (null_odds <= self.threshold) if self.version_2 else has_span

        def span_text():
            first_piece = starts[window] + start_at[window, a] - offset
            last_piece = starts[window] + end_at[window, b] - offset
            return self._text(words, word_chars, piece_ids, piece_to_word,
                              first_piece, last_piece)

        def no_text():
            return tf.constant(""), tf.constant(-1), tf.constant(-1)

        answer, start, end = tf.cond(answered, span_text, no_text)
        # No window at all (an empty passage): the decoder's n-best holds ("", 0, 0).
        no_answer_score = tf.where(n > 0, null_score, 0.0) if self.version_2 else 0.0
        score = tf.where(answered, best_score, no_answer_score)
        return {"answer": answer, "score": tf.cast(score, tf.float32), "start": start,
                "end": end, "null_odds": tf.cast(null_odds, tf.float32)}

    def _text(self, words, word_chars, piece_ids, piece_to_word, first_piece, last_piece):
        """Answer text and its character span in the context (`decoding._span_text`)."""
        vocab = tf.constant(self.tokenizer.vocab)
        pred = tf.strings.reduce_join(tf.gather(vocab, piece_ids[first_piece: last_piece + 1]),
                                      separator=" ")
        pred = tf.strings.regex_replace(tf.strings.regex_replace(pred, " ##", ""), "##", "")
        pred = tf.strings.strip(tf.strings.regex_replace(pred, r"\s+", " "))
        first_word, last_word = piece_to_word[first_piece], piece_to_word[last_piece]
        span_words = words[first_word: last_word + 1]
        orig = tf.strings.reduce_join(span_words, separator=" ")
        basic = tf.strings.reduce_join(self.tokenizer.words(span_words), axis=1, separator=" ")
        text, first, last = final_text(pred, orig, tf.strings.reduce_join(basic, separator=" "))
        # `orig` is the words joined by single spaces: map its characters to the context's.
        word_lengths = _char_length(span_words)
        word_starts = tf.cumsum(word_lengths + 1, exclusive=True)

        def in_context(char):
            w = tf.searchsorted(word_starts, [char], side="right")[0] - 1
            return word_chars[first_word + w] + char - word_starts[w]

        return text, in_context(first), in_context(last) + 1


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


def serving_answer(task, run) -> ServingAnswer:
    """`SquadTask.serving_answer`: question + context in, the answer out; the options and
    the threshold it answers with in the export's metadata."""
    threshold = null_threshold(run)
    answerer = SpanAnswerer(run.model, run.tokenizer, task, run.config.max_seq_length,
                            threshold)
    return ServingAnswer(
        answer=lambda inputs: answerer(inputs["question"], inputs["context"]),
        metadata={"squad_options": {name: getattr(task, name) for name in (
                      "doc_stride", "max_query_length", "n_best_size", "max_answer_length")},
                  "null_score_diff_threshold": threshold})
