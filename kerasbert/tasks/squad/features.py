"""SQuAD features: `[CLS] question [SEP] passage window [SEP]` rows, windows over long
passages, and the labels of the gold answer in each window."""

import dataclasses
import logging
from typing import Sequence

import numpy as np

from kerasbert.config import RunConfig
from kerasbert.errors import InputError
from kerasbert.span_answers import (  # noqa: F401  (re-exported)
    doc_windows, max_context_masks, split_words)
from kerasbert.tasks.base import Features
from kerasbert.tasks.squad.reader import Answer, SquadExample

log = logging.getLogger(__name__)

# BERT's run_squad.py options, under its flag names; their defaults are declared once, on
# RunConfig (kerasbert/config.py), which also makes them flags.
_DEFAULTS = {f.name: f.default for f in dataclasses.fields(RunConfig)}
OPTIONS = {name: _DEFAULTS[name] for name in ("doc_stride", "max_query_length", "n_best_size",
                                              "max_answer_length", "null_score_diff_threshold")}
_WORDS_PER_CALL = 100_000  # tokenizer batch: bounded memory, few TF calls


# ---- features ---------------------------------------------------------------------------------

@dataclasses.dataclass
class Document:
    """A context as whitespace words and word pieces (shared by its questions)."""

    num_chars: int  # length of the context
    words: list[str]  # whitespace-split context
    word_starts: np.ndarray  # character offset of each word
    piece_ids: np.ndarray  # int32 word-piece ids of the whole context
    word_to_piece: np.ndarray  # first piece of each word, plus the total at the end
    piece_to_word: np.ndarray  # word of each piece
    basic: list[str]  # per word: BERT's basic tokens joined by " ", for get_final_text


def _tokenize_words(tokenizer, words):
    """All words in few batched calls -> (flat piece ids, pieces per word, basic tokens)."""
    import tensorflow as tf  # lazy: the standalone scorers (kerasbert/evaluate.py) need no TF

    ids, counts, basic = [], [], []
    for i in range(0, len(words), _WORDS_PER_CALL):
        chunk = words[i: i + _WORDS_PER_CALL]
        pieces = tokenizer.tokenize_ids(chunk)
        ids.append(pieces.flat_values.numpy())
        counts.append(pieces.row_lengths().numpy())
        basic.append(tf.strings.reduce_join(tokenizer.words(chunk), axis=1, separator=" ").numpy())
    if not ids:
        return np.zeros([0], np.int32), np.zeros([0], np.int64), np.zeros([0], object)
    return (np.concatenate(ids).astype(np.int32), np.concatenate(counts).astype(np.int64),
            np.concatenate(basic))


def _tokenize_texts(tokenizer, texts) -> list[np.ndarray]:
    if not texts:
        return []
    pieces = tokenizer.tokenize_ids(list(texts))
    flat, splits = pieces.flat_values.numpy(), pieces.row_splits.numpy()
    return [flat[splits[i]: splits[i + 1]] for i in range(len(texts))]


def build_documents(contexts: Sequence[str], tokenizer) -> list[Document]:
    split = [split_words(c) for c in contexts]
    flat = [w for words, _ in split for w in words]
    ids, counts, basic = _tokenize_words(tokenizer, flat)
    piece_offsets = np.concatenate([[0], np.cumsum(counts)])
    docs, w = [], 0
    for context, (words, starts) in zip(contexts, split):
        n = len(words)
        word_to_piece = piece_offsets[w: w + n + 1] - piece_offsets[w]
        doc_counts = counts[w: w + n]
        docs.append(Document(
            num_chars=len(context), words=words, word_starts=starts,
            piece_ids=ids[piece_offsets[w]: piece_offsets[w + n]],
            word_to_piece=word_to_piece.astype(np.int64),
            piece_to_word=np.repeat(np.arange(n, dtype=np.int32), doc_counts),
            basic=[b.decode("utf-8") for b in basic[w: w + n]]))
        w += n
    return docs


def locate_answer(doc: Document, answer: Answer) -> tuple[int, int] | None:
    """The answer's (first, last) word, or None when its text is not found there.

    As BERT: the words covering the answer's characters must contain the answer text with
    its whitespace collapsed to single spaces.
    """
    end = answer.start + len(answer.text) - 1
    cleaned = " ".join(answer.text.split())
    if not cleaned or end >= doc.num_chars:
        return None
    first = max(int(np.searchsorted(doc.word_starts, answer.start, "right")) - 1, 0)
    last = int(np.searchsorted(doc.word_starts, end, "right")) - 1
    if last < first or cleaned not in " ".join(doc.words[first: last + 1]):
        return None
    return first, last


def improve_answer_span(doc_pieces, start, end, answer_pieces) -> tuple[int, int]:
    """The first sub-span of pieces [start, end] equal to the answer's own pieces, if any.

    The word span of "1887" in "(1887)," is the whole word, whose pieces are "( 1887 ) ,";
    the answer tokenizes to "1887", which is then the span.
    """
    n = len(answer_pieces)
    if n:
        for s in range(start, end - n + 2):
            if np.array_equal(doc_pieces[s: s + n], answer_pieces):
                return s, s + n - 1
    return start, end


def build_features(examples: Sequence[SquadExample], tokenizer, max_seq_length: int,
                   doc_stride: int = OPTIONS["doc_stride"],
                   max_query_length: int = OPTIONS["max_query_length"]) -> Features:
    """Examples -> one row per passage window (see the module docstring).

    extra: example_index / window_start / window_length / passage_offset per row (int32),
    doc_index per example, documents and the vocab (for decoding), unlocated_answers
    [(id, answer index)] and num_answers.
    """
    doc_ids: dict[str, int] = {}
    doc_index = np.array([doc_ids.setdefault(e.context, len(doc_ids)) for e in examples], np.int32)
    docs = build_documents(list(doc_ids), tokenizer)
    questions = [q[:max_query_length]
                 for q in _tokenize_texts(tokenizer, [e.question for e in examples])]

    # Gold spans in word pieces: the first located answer of each question.
    unlocated, num_answers, spans, to_improve = [], 0, [None] * len(examples), []
    for i, example in enumerate(examples):
        doc = docs[doc_index[i]]
        for k, answer in enumerate(example.answers):
            num_answers += 1
            words = locate_answer(doc, answer)
            if words is None:
                unlocated.append((example.qas_id, k))
            elif spans[i] is None:
                first = int(doc.word_to_piece[words[0]])
                last = int(doc.word_to_piece[words[1] + 1]) - 1
                if last >= first:
                    spans[i] = (first, last)
                    to_improve.append((i, answer.text))
    answer_pieces = _tokenize_texts(tokenizer, [text for _, text in to_improve])
    for (i, _), pieces in zip(to_improve, answer_pieces):
        spans[i] = improve_answer_span(docs[doc_index[i]].piece_ids, *spans[i], pieces)
    if unlocated:
        shown = ", ".join(f"{qid} (answer {k})" for qid, k in unlocated[:5])
        log.warning("%d of %d gold answers could not be located in their context (text not "
                    "found at answer_start): %s%s. Their questions are kept; one with no "
                    "located answer trains towards [CLS].", len(unlocated), num_answers,
                    shown, ", ..." if len(unlocated) > 5 else "")

    # Windows: the passage gets what the question and [CLS] [SEP] [SEP] leave.
    windows = []
    for i, question in enumerate(questions):
        room = max_seq_length - len(question) - 3
        if room < 1:
            raise InputError(
                f"--max_seq_length={max_seq_length} leaves no room for the passage after a "
                f"{len(question)}-piece question (--max_query_length={max_query_length}); "
                f"max_seq_length must exceed max_query_length + 3")
        windows.append(doc_windows(len(docs[doc_index[i]].piece_ids), room, doc_stride))
    rows = sum(len(w) for w in windows)
    token_ids = np.full([rows, max_seq_length], tokenizer.pad_id, np.int32)
    segment_ids = np.zeros([rows, max_seq_length], np.int32)
    padding_mask = np.zeros([rows, max_seq_length], np.int32)
    labels = np.zeros([rows, 2], np.int32)
    extra_rows = np.zeros([4, rows], np.int32)  # example index, window start, length, offset
    r = 0
    for i, question in enumerate(questions):
        pieces, offset = docs[doc_index[i]].piece_ids, len(question) + 2
        for start, length in windows[i]:
            end = offset + length  # the closing [SEP]
            token_ids[r, 0] = tokenizer.cls_id
            token_ids[r, 1: offset - 1] = question
            token_ids[r, offset - 1] = tokenizer.sep_id
            token_ids[r, offset: end] = pieces[start: start + length]
            token_ids[r, end] = tokenizer.sep_id
            segment_ids[r, offset: end + 1] = 1
            padding_mask[r, : end + 1] = 1
            span = spans[i]
            if span is not None and start <= span[0] and span[1] < start + length:
                labels[r] = (span[0] - start + offset, span[1] - start + offset)
            extra_rows[:, r] = (i, start, length, offset)
            r += 1
    return Features(
        inputs={"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask},
        labels=labels,
        examples=list(examples),
        extra={"example_index": extra_rows[0], "window_start": extra_rows[1],
               "window_length": extra_rows[2], "passage_offset": extra_rows[3],
               "doc_index": doc_index, "documents": docs, "vocab": list(tokenizer.vocab),
               "unlocated_answers": unlocated, "num_answers": num_answers})
