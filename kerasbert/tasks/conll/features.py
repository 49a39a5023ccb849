"""CoNLL features: each word word-pieced on its own, its first piece labelled (-1 for the
others), long sentences cut into overlapping windows of whole words, each word predicted in
the window where it has the most context; with --document_context, the words around it."""

import logging
from typing import Sequence

import numpy as np

from kerasbert.errors import InputError
from kerasbert.tasks.base import Features
from kerasbert.tasks.conll.reader import LABELS, Sentence
from kerasbert.word_windows import best_windows, windows  # noqa: F401  (re-exported)

log = logging.getLogger(__name__)

# ---- word pieces and windows -----------------------------------------------------------------


def word_pieces(tokenizer, words: Sequence[str], chunk: int = 65536):
    """Word-piece ids of many words: (flat int32 ids, row_splits), one TF call per chunk."""
    ids, splits = [], [np.zeros([1], np.int64)]
    for i in range(0, len(words), chunk):
        ragged = tokenizer.tokenize_ids(list(words[i: i + chunk]))
        ids.append(ragged.flat_values.numpy().astype(np.int32))
        splits.append(ragged.row_splits.numpy()[1:] + splits[-1][-1])
    return (np.concatenate(ids) if ids else np.zeros([0], np.int32)), np.concatenate(splits)


def _capacity(max_seq_length: int) -> int:
    """Word pieces a row holds: all but [CLS] and [SEP]."""
    if max_seq_length - 2 < 1:
        raise InputError(f"--max_seq_length={max_seq_length} leaves no room for word pieces")
    return max_seq_length - 2


def _sentence_pieces(sentences: Sequence[Sentence], tokenizer, capacity: int, counts: dict):
    """Per sentence, the word pieces of each of its words as its rows hold them: a word with
    no pieces is [UNK], a word longer than a window keeps its first piece only (counted in
    `counts`: empty, cut, dropped pieces)."""
    flat_ids, splits = word_pieces(tokenizer, [w for s in sentences for w in s.words])
    start = 0
    for sentence in sentences:
        pieces = []
        for k in range(start, start + len(sentence.words)):
            p = flat_ids[splits[k]: splits[k + 1]]
            if len(p) == 0:  # e.g. a lone zero-width space: keep a position to predict it
                p = np.array([tokenizer.unk_id], np.int32)
                counts["empty"] += 1
            elif len(p) > capacity:  # keep the labelled first piece only
                counts["cut"] += 1
                counts["dropped"] += len(p) - 1
                p = p[:1]
            pieces.append(p)
        start += len(sentence.words)
        yield pieces


def count_rows(sentences: Sequence[Sentence], tokenizer, max_seq_length: int) -> int:
    """The feature rows featurize_sentences makes of `sentences` (one per window), without
    making them: what a streamed training split counts before its first epoch."""
    capacity = _capacity(max_seq_length)
    _, splits = word_pieces(tokenizer, [w for s in sentences for w in s.words])
    lengths = np.diff(splits)
    # As _sentence_pieces: no pieces is [UNK], more than a window keeps its first piece.
    lengths[(lengths == 0) | (lengths > capacity)] = 1
    starts = np.cumsum([0] + [len(s.words) for s in sentences])
    totals = np.concatenate([[0], np.cumsum(lengths)])[starts]
    totals = totals[1:] - totals[:-1]  # pieces of each sentence
    rows = 0
    for n in range(len(sentences)):  # most fit one row; the others as featurize cuts them
        rows += 1 if totals[n] <= capacity else len(
            windows(lengths[starts[n]: starts[n + 1]], capacity))
    return rows


def context_pieces(document_context, max_seq_length: int) -> int:
    """The word pieces of document context a row may hold (--document_context): 0, N, or
    "max" (as many as the row holds), never more than a row holds besides [CLS] [SEP]."""
    capacity = _capacity(max_seq_length)
    value = str(document_context if document_context is not None else 0)
    return capacity if value == "max" else min(int(value), capacity)


def context_window(own_start: int, own_end: int, room: int, offsets) -> tuple[int, int]:
    """The pieces [start, end) of a row whose own pieces are [own_start, own_end) of a
    document, with up to `room` pieces of the document around them: whole words only
    (`offsets`: the piece offsets of the document's words, the own bounds among them),
    half of `room` before (the odd piece too) and half after, and what one side lacks (at
    the document's start or end) goes to the other."""
    total = offsets[-1]
    half_left = room - room // 2
    left = min(own_start, max(half_left, room - (total - own_end)))
    start = offsets[np.searchsorted(offsets, own_start - left, side="left")]
    right = room - (own_start - start)
    end = offsets[np.searchsorted(offsets, own_end + right, side="right") - 1]
    return int(start), int(end)


def documents(sentences: Sequence[Sentence]) -> list[range]:
    """The runs of consecutive sentences of one document (a sentence whose `document` is
    None is a document of its own)."""
    runs, first = [], 0
    for n in range(1, len(sentences) + 1):
        if n == len(sentences) or sentences[n].document is None or (
                sentences[n].document != sentences[n - 1].document):
            runs.append(range(first, n))
            first = n
    return runs


def featurize_sentences(sentences: Sequence[Sentence], tokenizer, max_seq_length: int,
                        label_list: Sequence[str] = LABELS, document_context=0) -> Features:
    """[CLS] pieces [SEP] rows, first-piece labels, windows for long sentences.

    `extra` maps predictions back to words: for the k-th word of all sentences (in order),
    `word_row[k]` / `word_position[k]` is the row and position of its first piece in the
    window that predicts it; `sentence_starts[n]` is the index of sentence n's first word.
    `row_sentence` is the sentence of each row. Labels are set only at those positions (each
    word trains once, in the same window that predicts it); -1 elsewhere.

    `document_context` (--document_context: word pieces, or "max"; see `context_pieces`):
    each row also holds up to that many pieces of the words around its own in the
    sentence's document (`context_window`): the neighbouring sentences, and for a window of
    a long sentence its own words outside the window. They are never labelled, so each word
    is still labelled and predicted once, in its window; `extra["own_positions"]` [rows, 2]
    is where each row's own pieces start and end. 0: rows of the sentence alone.
    """
    capacity = _capacity(max_seq_length)
    context = context_pieces(document_context, max_seq_length)
    label_id = {label: i for i, label in enumerate(label_list)}
    labelled = bool(sentences) and all(s.label is not None for s in sentences)
    num_words = sum(len(s.words) for s in sentences)
    sentence_starts = np.concatenate([[0], np.cumsum([len(s.words) for s in sentences])])

    rows, row_labels, row_sentence, own_positions = [], [], [], []
    word_row = np.zeros(num_words, np.int32)
    word_position = np.zeros(num_words, np.int32)
    counts = {"empty": 0, "cut": 0, "dropped": 0}
    windowed = with_context = 0
    all_pieces = list(_sentence_pieces(sentences, tokenizer, capacity, counts))
    for document in documents(sentences):
        # The document as one stream of pieces; `doc_offsets` are its words' piece offsets.
        words = [p for n in document for p in all_pieces[n]]
        stream = np.concatenate(words) if words else np.zeros([0], np.int32)
        doc_offsets = np.concatenate([[0], np.cumsum([len(p) for p in words])]).astype(np.int64)
        for n in document:
            sentence, pieces = sentences[n], all_pieces[n]
            first = sentence_starts[n]
            in_document = first - sentence_starts[document.start]  # its first word's index
            lengths = [len(p) for p in pieces]
            spans = windows(lengths, capacity)
            windowed += len(spans) > 1
            owner = best_windows(lengths, spans)
            for w, (s, e) in enumerate(spans):
                row = len(rows)
                own_start, own_end = doc_offsets[in_document + s], doc_offsets[in_document + e]
                start, end = context_window(own_start, own_end,
                                            min(context, capacity - (own_end - own_start)),
                                            doc_offsets)
                with_context += (start, end) != (own_start, own_end)
                rows.append(np.concatenate([[tokenizer.cls_id], stream[start:end],
                                            [tokenizer.sep_id]]))
                own_positions.append((1 + own_start - start, 1 + own_end - start))
                labels = np.full(max_seq_length, -1, np.int32)
                for i in np.flatnonzero(owner == w):
                    position = 1 + doc_offsets[in_document + i] - start
                    word_row[first + i], word_position[first + i] = row, position
                    if labelled:
                        labels[position] = label_id[sentence.label[i]]
                row_labels.append(labels)
                row_sentence.append(n)

    token_ids = np.full([len(rows), max_seq_length], tokenizer.pad_id, np.int32)
    padding_mask = np.zeros([len(rows), max_seq_length], np.int32)
    for r, ids in enumerate(rows):
        token_ids[r, : len(ids)] = ids
        padding_mask[r, : len(ids)] = 1
    empty, cut, dropped = counts["empty"], counts["cut"], counts["dropped"]
    if windowed:
        log.info("%d sentence(s) longer than %d word pieces were split into overlapping "
                 "windows (%d rows for %d sentences)", windowed, capacity, len(rows),
                 len(sentences))
    if cut:
        log.warning("%d word(s) had more word pieces than fit a window of %d; each keeps only "
                    "its first piece (%d pieces dropped)", cut, capacity, dropped)
    if empty:
        log.info("%d word(s) had no word pieces (e.g. only control characters) and are "
                 "read as [UNK]", empty)
    extra = {}
    if context:
        log.info("document context of up to %d word pieces: %d of %d rows hold some",
                 context, with_context, len(rows))
        extra["own_positions"] = np.asarray(own_positions, np.int32).reshape(-1, 2)
    return Features(
        inputs={"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids),
                "padding_mask": padding_mask},
        labels=np.stack(row_labels) if labelled and rows else (
            np.zeros([0, max_seq_length], np.int32) if labelled else None),
        examples=list(sentences),
        extra={"word_row": word_row, "word_position": word_position,
               "sentence_starts": sentence_starts.astype(np.int64),
               "row_sentence": np.asarray(row_sentence, np.int32),
               "dropped_pieces": dropped, **extra},
    )
