"""SQuAD answers around a LiteRT span model, in numpy: question + context in, answer out.

The same steps, in the same order, as the SavedModel's graph (kerasbert/tasks/squad/
serving.py), which repeats the run's own features and decoding op for op:

  1. the context is split on BERT's SQuAD whitespace into words with their character
     offsets, each word into word pieces; the question is cut to max_query_length pieces;
  2. windows of the passage start min(doc_stride, room) pieces apart (room: what
     [CLS] question [SEP] ... [SEP] leaves of max_seq_length);
  3. the model scores every window; a piece counts only in the window where it has the
     most context; the n_best_size best starts and ends of each window are paired (end >=
     start, shorter than max_answer_length, inside the passage), and the best pair over
     all windows is the answer (the first one on a tie: window, then start rank, then end);
  4. its pieces are projected back onto the original words (`get_final_text`);
  5. v2: the answer is "" when s_null - s_best exceeds the export's threshold.

Windows, max context and the projection are kerasbert/span_answers.py, shared with
training's features and decoding.
"""

import dataclasses

import numpy as np

from kerasbert.span_answers import (NO_SPAN_ODDS, detokenize, doc_windows, final_span,
                                    max_context_masks, split_words)


@dataclasses.dataclass
class Question:
    """One question about one context, cut into the rows the model reads."""

    words: list  # the context's whitespace words
    word_starts: np.ndarray  # character offset of each word in the context
    piece_ids: list  # the context's word pieces
    piece_to_word: np.ndarray  # the word of each piece
    offset: int  # where the passage starts in a row: len(question pieces) + 2
    windows: list  # (start, length) in pieces
    rows: list  # (token ids, segment ids) per window


def cut(wordpiece, question, context, max_seq_length, doc_stride, max_query_length):
    """A question and its context as model rows (steps 1 and 2)."""
    words, word_starts = split_words(context)
    word_pieces = [wordpiece.ids(word) for word in words]
    piece_ids = [i for pieces in word_pieces for i in pieces]
    piece_to_word = np.repeat(np.arange(len(words)), [len(p) for p in word_pieces])
    query = wordpiece.ids(question)[:max_query_length]
    room = max_seq_length - len(query) - 3
    windows = doc_windows(len(piece_ids), room, doc_stride)
    head = [wordpiece.cls_id, *query, wordpiece.sep_id]
    rows = [([*head, *piece_ids[start: start + length], wordpiece.sep_id],
             [0] * len(head) + [1] * (length + 1)) for start, length in windows]
    return Question(words, word_starts, piece_ids, piece_to_word, len(head), windows, rows)


def answer(question, logits, vocab, words_of, n_best_size, max_answer_length,
           version_2=False, threshold=0.0):
    """The answer to one cut question from its windows' logits [windows, >= row, 2]
    (steps 3 to 5): {"answer", "score", "start", "end", "null_odds"} as the SavedModel's
    outputs (start/end: character offsets in the context, end exclusive; -1 for "")."""
    q = question
    if not q.windows:  # an empty passage: the decoder's n-best holds ("", 0, 0)
        return {"answer": "", "score": 0.0, "start": -1, "end": -1, "null_odds": NO_SPAN_ODDS}
    logits = np.asarray(logits, np.float64)  # sums in float64, as the Python decoder
    best, owned = None, max_context_masks(q.windows)  # best: (score, window, start, end)
    for w, (_, length) in enumerate(q.windows):
        starts = np.argsort(-logits[w, :, 0], kind="stable")[:n_best_size]  # ties: lower
        ends = np.argsort(-logits[w, :, 1], kind="stable")[:n_best_size]
        start_ok = (starts >= q.offset) & (starts < q.offset + length)
        start_ok[start_ok] = owned[w][starts[start_ok] - q.offset]
        end_ok = (ends >= q.offset) & (ends < q.offset + length)
        s, e = starts[:, None], ends[None, :]
        valid = start_ok[:, None] & end_ok[None, :] & (e >= s) & (e - s < max_answer_length)
        if not valid.any():
            continue
        scores = np.where(valid, logits[w, starts, 0][:, None] + logits[w, ends, 1][None, :],
                          -np.inf)
        a, b = np.unravel_index(int(scores.argmax()), scores.shape)  # first maximum
        if best is None or scores[a, b] > best[0]:
            best = (float(scores[a, b]), w, int(starts[a]), int(ends[b]))
    null_score = float((logits[:, 0, 0] + logits[:, 0, 1]).min())
    null_odds = NO_SPAN_ODDS if best is None else null_score - best[0]
    answered = best is not None and (not version_2 or null_odds <= threshold)
    if not answered:
        return {"answer": "", "score": null_score if version_2 else 0.0, "start": -1,
                "end": -1, "null_odds": null_odds}
    score, w, s, e = best
    window_start = q.windows[w][0]
    first_piece, last_piece = window_start + s - q.offset, window_start + e - q.offset
    text, start, end = _span_text(q, first_piece, last_piece, vocab, words_of)
    return {"answer": text, "score": score, "start": start, "end": end, "null_odds": null_odds}


def _span_text(q, first_piece, last_piece, vocab, words_of):
    """(text, first character, end character) of pieces first..last in the context."""
    pred = detokenize([vocab[i] for i in q.piece_ids[first_piece: last_piece + 1]])
    first_word, last_word = int(q.piece_to_word[first_piece]), int(q.piece_to_word[last_piece])
    span_words = q.words[first_word: last_word + 1]
    orig = " ".join(span_words)
    tok = " ".join(b for b in (" ".join(words_of(w)) for w in span_words) if b)
    first, last = final_span(pred, orig, tok)
    # `orig` joins the words by single spaces: map its characters to the context's.
    starts_in_orig = np.cumsum([0] + [len(w) + 1 for w in span_words[:-1]])

    def in_context(char):
        k = int(np.searchsorted(starts_in_orig, char, side="right")) - 1
        return int(q.word_starts[first_word + k]) + char - int(starts_in_orig[k])

    return orig[first: last + 1], in_context(first), in_context(last) + 1
