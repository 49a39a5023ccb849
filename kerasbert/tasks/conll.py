"""CoNLL-2003 named entity recognition: reader, word-piece alignment, windows, entity F1.

Files: `<data_dir>/train.txt`, `valid.txt`, `test.txt` in the shared-task layout, one word a
line (`word POS chunk NER`, the NER tag last), a blank line between sentences, `-DOCSTART-`
lines between documents. Tags are read in IOB1 or IOB2 and always kept as IOB2 (see
`fix_scheme`).

Words become BERT inputs as in the paper (section 4.3) and tf-models' `tasks/tagging.py`:
every word is word-pieced on its own; its first piece carries the word's label and the other
pieces get -1, which the loss and the predictions ignore. Sentences longer than
`max_seq_length - 2` pieces are never truncated: they are cut into overlapping windows at
word boundaries (see `windows`), and each word is labelled and predicted in exactly one
window, the one where it has the most context on both sides (SQuAD's max-context rule).
Predictions are mapped back to every input word, so a prediction file has exactly one tag
per word of the input.

Document context (--document_context, FLERT-style): a row may also hold the words around
its own in the sentence's `-DOCSTART-` document (`context_window`), unlabelled, so a word
is still labelled and predicted once, in its own window; 0 (the default) gives the rows
of each sentence alone.

Metric: entity-level precision, recall and F1 as conlleval computes them (an entity counts
only if its type and both boundaries match; an I- tag after O or after another type starts
an entity), via seqeval's default mode. Values are fractions in [0, 1] like seqeval's
(conlleval prints percentages), overall and per type (`PER_f1`, `PER_precision`,
`PER_recall`, `PER_support` = gold entities of the type); `accuracy` is conlleval's
token accuracy.
"""

import dataclasses
import logging
import os
import re
from typing import Sequence

import numpy as np
from seqeval import metrics as seqeval_metrics  # conlleval semantics in its default mode

from kerasbert.errors import InputError, at
from kerasbert.io_utils import iter_utf8_lines, replaced_whole
from kerasbert.tasks.base import TAGGING, Example, Features, Task, bundled_sample, split_file

log = logging.getLogger(__name__)

LABELS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC")
ENTITY_TYPES = ("PER", "ORG", "LOC", "MISC")
# tensorflow_datasets' conll2003 `ner` ClassLabel names, in its id order
# (tensorflow_datasets/core/dataset_builders/conll/conll_dataset_builder_utils.py NER_TAGS).
TFDS_NER_TAGS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC")
TFDS_SPLITS = {"train": "train", "valid": "dev", "test": "test"}
SCHEMES = ("auto", "iob1", "iob2")
DOCSTART = "-DOCSTART-"
_FIELDS = re.compile(r"[ \t]+")  # columns are space-separated; a word never holds a space
DOCUMENT_BREAK = ()  # what _parse_columns yields for a -DOCSTART- line


@dataclasses.dataclass(frozen=True)
class Sentence(Example):
    """One sentence: `words`, IOB2 tags in `label` (a tuple, None if unknown), and the file
    line of its first word (`line`) for messages. `text_a` is the words joined by spaces.
    `document`: the number of its `-DOCSTART-` document in the file (0, 1, ...; consecutive
    sentences with the same number share a document, what --document_context reads); None
    for a sentence of no document (it gets no context)."""

    words: tuple[str, ...] = ()
    line: int = 0
    document: int | None = None


# ---- reading ---------------------------------------------------------------------------------


def _read_lines(path: str):
    return iter_utf8_lines(path, "CoNLL")  # streamed: one line in memory at a time


def _parse_columns(path: str, lines):
    """Yields (line number, fields) of word lines, (line number, None) at blank lines and
    (line number, DOCUMENT_BREAK) at -DOCSTART- lines (both end a sentence).
    Every word line has as many columns as the first (conlleval refuses a file that mixes
    them): another count is an InputError (a one-column line is left to the caller)."""
    first = None  # (columns, line number) of the first word line
    for number, line in enumerate(lines, start=1):
        line = line.strip(" \t\r\n")
        fields = _FIELDS.split(line) if line else []
        if not fields or fields[0] == DOCSTART:
            yield number, DOCUMENT_BREAK if fields else None
            continue
        if len(fields) > 1:
            first = first or (len(fields), number)
            if len(fields) != first[0]:
                raise InputError(
                    f"{at(path, number)}{len(fields)} columns, but line {first[1]} has "
                    f"{first[0]}; every line of the file has the same columns (`word POS "
                    f"chunk NER`, the tag last): {line!r}")
        yield number, fields


def iter_document_sentences(path: str, labels: Sequence[str] = LABELS):
    """The (document, words, tags, line numbers) of a CoNLL file one sentence at a time,
    tags as written; a bad line is an InputError when it is reached. `document` counts the
    -DOCSTART- lines that follow a sentence (0 up to the first such line)."""
    words, tags, lines = [], [], []
    document, in_document = 0, False  # in_document: a sentence of `document` was seen
    for number, fields in _parse_columns(path, _read_lines(path)):
        if not fields:
            if words:
                yield document, words, tags, lines
                words, tags, lines = [], [], []
                in_document = True
            if fields == DOCUMENT_BREAK and in_document:
                document, in_document = document + 1, False
            continue
        if len(fields) < 2:
            raise InputError(
                f"{at(path, number)}expected a word and its NER tag (`word POS chunk NER`, the "
                f"tag last), found one column: {fields[0]!r}")
        if fields[-1] not in labels:
            raise InputError(
                f"{at(path, number)}{fields[-1]!r} is not a CoNLL-2003 NER tag; expected one of "
                f"{', '.join(labels)}")
        words.append(fields[0])
        tags.append(fields[-1])
        lines.append(number)
    if words:  # the last sentence may lack its trailing blank line
        yield document, words, tags, lines


def iter_sentences(path: str, labels: Sequence[str] = LABELS):
    """The (words, tags, line numbers) of a CoNLL file one sentence at a time, tags as
    written; a bad line is an InputError when it is reached."""
    for _, words, tags, lines in iter_document_sentences(path, labels):
        yield words, tags, lines


def read_sentences(path: str, labels: Sequence[str] = LABELS):
    """Reads a CoNLL file into a list of (words, tags, line numbers), tags as written."""
    return list(iter_sentences(path, labels))


def _entity_starts(tags):
    """Indices where an I- tag starts an entity, and where a B- tag follows O / another type.

    The first kind exists only in IOB1 (or is an error in IOB2); the second only in IOB2 (in
    IOB1, B- appears only between two adjacent entities of the same type).
    """
    i_starts, b_starts = [], []
    previous = "O"
    for i, tag in enumerate(tags):
        same_type = previous != "O" and previous[2:] == tag[2:]
        if tag.startswith("I-") and not same_type:
            i_starts.append(i)
        elif tag.startswith("B-") and not same_type:
            b_starts.append(i)
        previous = tag
    return i_starts, b_starts


class SchemeCheck:
    """The tag scheme of sentences seen one at a time (see fix_scheme for the rules):
    `add` each sentence's tags, then `finish` (the verdict needs every sentence)."""

    def __init__(self, where: str, scheme: str = "auto"):
        if scheme not in SCHEMES:
            raise InputError(f"tag scheme {scheme!r}: expected one of {', '.join(SCHEMES)}")
        self.where, self.scheme, self.found = where, scheme, None
        self.i_count, self.first_i, self.first_b = 0, None, None  # (line, tag) of the first

    def add(self, tags, lines) -> list[int]:
        """Records one sentence; returns the indices of its I- tags that start an entity
        (the ones IOB2 spells B-)."""
        i, b = _entity_starts(tags)
        self.i_count += len(i)
        if i and self.first_i is None:
            self.first_i = lines[i[0]], tags[i[0]]
        if b and self.first_b is None:
            self.first_b = lines[b[0]], tags[b[0]]
        return i

    def finish(self) -> str:
        """Returns "IOB1" or "IOB2"; an InputError where a declared scheme is contradicted."""
        where = self.where
        if self.scheme == "iob2" and self.first_i:
            line, tag = self.first_i
            raise InputError(f"{at(where, line)}{tag} starts an entity, which IOB2 does not "
                             f"allow (it would be B-{tag[2:]}); is the file IOB1?")
        if self.scheme == "iob1" and self.first_b:
            line, tag = self.first_b
            raise InputError(f"{at(where, line)}{tag} starts an entity after O or another type, "
                             f"which IOB1 does not allow; is the file IOB2?")
        found = "IOB1" if self.first_i and not self.first_b else "IOB2"
        if found == "IOB2" and self.first_i:
            log.warning("%s%d I- tag(s) start an entity in IOB2 data (first at line %d); read "
                        "as B- tags, as conlleval does", at(where), self.i_count,
                        self.first_i[0])
        log.info("%stag scheme %s%s", at(where), found,
                 ", converted to IOB2" if found == "IOB1" else "")
        self.found = found
        return found


def _as_iob2(tags, i_starts):
    for k in i_starts:  # in both schemes, an I-X that starts an entity is B-X in IOB2
        tags[k] = "B-" + tags[k][2:]


def fix_scheme(sentences, where: str, scheme: str = "auto") -> str:
    """Detects the tag scheme of `sentences` (see read_sentences) and rewrites them to IOB2.

    IOB1 (the original CoNLL-2003 release): I-X throughout, B-X only for an entity right after
    another X. IOB2 (most copies today, incl. the usual train/valid/test.txt): every entity
    starts with B-. "auto" reads IOB1 when some I- tag starts an entity and no B- tag starts
    one after O or another type (which IOB1 never does); otherwise IOB2.
    In both, an I-X that starts an entity becomes B-X, which is how conlleval reads it anyway.
    Auto-detected IOB2 data with such I- tags is repaired with one counted warning; a declared
    scheme ("iob1" / "iob2") that the data contradicts is an InputError at the first bad line.
    Returns "IOB1" or "IOB2", the scheme found.
    """
    check = SchemeCheck(where, scheme)
    starts = [check.add(tags, lines) for _, tags, lines in sentences]
    found = check.finish()
    for (_, tags, _), i_starts in zip(sentences, starts):
        _as_iob2(tags, i_starts)
    return found


def iter_conll_file(path: str, split: str, check: SchemeCheck):
    """The Sentences of one CoNLL-2003 file one at a time, tags rewritten to IOB2 as they
    are read (the rewrite does not depend on the scheme), each added to `check`; the errors
    of read_conll_file as their lines are reached, except the scheme's, which need the whole
    file: call `check.finish()` after the last sentence. What --stream_train_data reads."""
    n = -1
    for n, (document, words, tags, lines) in enumerate(iter_document_sentences(path)):
        _as_iob2(tags, check.add(tags, lines))
        yield Sentence(guid=f"{split}-{n}", text_a=" ".join(words), label=tuple(tags),
                       words=tuple(words), line=lines[0], document=document)
    if n < 0:
        raise InputError(f"{at(path)}no sentences (expected `word POS chunk NER` lines)")


def read_conll_file(path: str, split: str = "train", scheme: str = "auto"):
    """Reads one CoNLL-2003 file. Returns (list of Sentence with IOB2 tags, scheme found)."""
    check = SchemeCheck(path, scheme)
    sentences = list(iter_conll_file(path, split, check))
    return sentences, check.finish()


# ---- word pieces and windows -----------------------------------------------------------------


def windows(lengths: Sequence[int], capacity: int) -> list[tuple[int, int]]:
    """Word ranges [start, end) of the windows of one sentence.

    `lengths` are the word-piece counts of its words (each <= capacity). A window holds as
    many whole words as fit `capacity` pieces; the next one starts at the first word at
    least capacity // 2 pieces after the previous start (but no later than the first word
    left out), so consecutive windows overlap by about half and every word sits well inside
    some window. One window when the sentence fits.
    """
    if max(lengths, default=0) > capacity:
        raise ValueError(f"a word of {max(lengths)} pieces does not fit a window of {capacity}")
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    stride = max(capacity // 2, 1)
    out, start, count = [], 0, len(lengths)
    while True:
        end = start
        while end < count and offsets[end + 1] - offsets[start] <= capacity:
            end += 1
        out.append((start, end))
        if end >= count:
            return out
        nxt = start + 1
        while nxt < end and offsets[nxt] - offsets[start] < stride:
            nxt += 1
        start = nxt


def best_windows(lengths: Sequence[int], spans: Sequence[tuple[int, int]]) -> np.ndarray:
    """For each word, the index of the window where it has the most context.

    Score of word i in window [s, e): min(pieces left of it, pieces right of it) in the window,
    plus 0.01 x the window's size to break ties toward fuller windows; the first max wins.
    This is BERT's `_check_is_max_context` for SQuAD, on words instead of tokens.
    """
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    best = np.full(len(lengths), -1)
    score = np.full(len(lengths), -np.inf)
    for w, (s, e) in enumerate(spans):
        i = np.arange(s, e)
        left = offsets[i] - offsets[s]
        right = offsets[e] - offsets[i + 1]
        value = np.minimum(left, right) + 0.01 * (offsets[e] - offsets[s])
        better = value > score[s:e]
        best[s:e][better] = w
        score[s:e][better] = value[better]
    return best


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


def _as_array(outputs, rows: int) -> np.ndarray:
    """Raw outputs as one [rows, seq, labels] array; per-batch arrays (whose seq may differ
    when batches are trimmed to their longest row) are right-padded and stacked."""
    if isinstance(outputs, (list, tuple)):
        width = max((o.shape[1] for o in outputs), default=0)
        outputs = [np.pad(np.asarray(o), [(0, 0), (0, width - o.shape[1]), (0, 0)])
                   for o in outputs]
        outputs = np.concatenate(outputs) if outputs else np.zeros([0, 0, 0])
    outputs = np.asarray(outputs)
    if outputs.ndim != 3 or len(outputs) != rows:
        raise ValueError(f"expected tagging outputs [{rows}, seq, labels], got {outputs.shape}")
    return outputs


def predict_word_tags(outputs, features: Features,
                      label_list: Sequence[str] = LABELS) -> list[list[str]]:
    """One predicted tag per input word (argmax at its first piece), grouped by sentence."""
    extra = features.extra
    logits = _as_array(outputs, len(features.inputs["token_ids"]))
    if len(extra["word_position"]) and extra["word_position"].max() >= logits.shape[1]:
        raise ValueError(f"outputs have {logits.shape[1]} positions, the features need "
                         f"{extra['word_position'].max() + 1}")
    ids = logits[extra["word_row"], extra["word_position"]].argmax(-1)
    tags = [label_list[i] for i in ids]
    starts = extra["sentence_starts"]
    return [tags[starts[n]: starts[n + 1]] for n in range(len(starts) - 1)]


# ---- metrics and prediction files ------------------------------------------------------------


def entity_metrics(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]],
                   types: Sequence[str] = ENTITY_TYPES) -> dict[str, float]:
    """conlleval's entity precision / recall / F1 (fractions), overall and per type.

    Per-type keys are reported for `types` and for any other type found in the data, so the
    keys stay the same from one evaluation to the next.
    """
    if len(gold) != len(predicted) or any(len(g) != len(p) for g, p in zip(gold, predicted)):
        raise ValueError("gold and predicted tags differ in shape")
    gold, predicted = [list(g) for g in gold], [list(p) for p in predicted]
    tokens = sum(len(g) for g in gold)
    correct = sum(a == b for g, p in zip(gold, predicted) for a, b in zip(g, p))
    result = {
        "precision": float(seqeval_metrics.precision_score(gold, predicted, zero_division=0)),
        "recall": float(seqeval_metrics.recall_score(gold, predicted, zero_division=0)),
        "f1": float(seqeval_metrics.f1_score(gold, predicted, zero_division=0)),
        "accuracy": correct / tokens if tokens else 0.0,
    }
    found = {t[2:] for seq in (*gold, *predicted) for t in seq if t != "O"}
    report = seqeval_metrics.classification_report(gold, predicted, output_dict=True, zero_division=0) \
        if found else {}
    for name in list(types) + sorted(found - set(types)):
        row = report.get(name, {})
        result[f"{name}_precision"] = float(row.get("precision", 0.0))
        result[f"{name}_recall"] = float(row.get("recall", 0.0))
        result[f"{name}_f1"] = float(row.get("f1-score", 0.0))
        result[f"{name}_support"] = float(row.get("support", 0))
    return result


def write_conll_predictions(path: str, sentences: Sequence[Sentence],
                            predicted: Sequence[Sequence[str]]) -> str:
    """`word gold predicted` lines (`word predicted` when gold is unknown), a blank line
    between sentences: conlleval's input format. Written to a temporary name, then renamed."""
    with replaced_whole(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as f:
        for sentence, tags in zip(sentences, predicted):
            gold = sentence.label if sentence.label is not None else [None] * len(tags)
            for word, g, p in zip(sentence.words, gold, tags):
                f.write(f"{word} {p}\n" if g is None else f"{word} {g} {p}\n")
            f.write("\n")
    return path


_TAG = re.compile(r"^(O|[BI]-\S+)$")


def evaluate_file(path: str) -> dict[str, float]:
    """Scores a prediction file like conlleval: the last two columns of each line are the
    gold and predicted tags (other columns ignored), blank lines end sentences."""
    gold, predicted, g, p = [], [], [], []
    for number, fields in _parse_columns(path, _read_lines(path)):
        if not fields:
            if g:
                gold.append(g)
                predicted.append(p)
                g, p = [], []
            continue
        if len(fields) < 2:
            raise InputError(f"{at(path, number)}expected `word gold predicted`, found one "
                             f"column: {fields[0]!r}")
        for tag in fields[-2:]:
            if not _TAG.match(tag):
                raise InputError(
                    f"{at(path, number)}{tag!r} is not an IOB tag; the last two columns must "
                    f"be the gold and predicted tags (`word gold predicted`)")
        g.append(fields[-2])
        p.append(fields[-1])
    if g:
        gold.append(g)
        predicted.append(p)
    if not gold:
        raise InputError(f"{at(path)}no tagged words to score")
    return entity_metrics(gold, predicted)


# ---- the task --------------------------------------------------------------------------------


class ConllTask(Task):
    """CoNLL-2003 English NER, the BERT paper's section 4.3 / 5.3 task."""

    name = "conll2003"
    kind = TAGGING
    default_head = "tagger"
    label_list = LABELS
    main_metric = "f1"
    dev_splits = ("valid",)
    test_splits = ("test",)
    scored_test_splits = ("test",)  # the official testb, gold-tagged: the paper's number
    # The paper gives no NER-specific recipe: like every fine-tuning task, NER is tuned on dev
    # over its Appendix A.3 grid (batch 16 / 32, lr 5e-5 / 3e-5 / 2e-5, 2 / 3 / 4 epochs).
    # The defaults are one point of that grid: batch 32, lr 5e-5, 3 epochs.
    default_learning_rate = 5e-5
    default_train_batch_size = 32
    default_num_train_epochs = 3.0
    # On the 200-sentence bundled sample the paper recipe is only 21 steps, too few for
    # MiniLM to leave the all-"O" solution (dev F1 ~0); this gives ~0.9 there.
    sample_recipe = {"learning_rate": 1e-4, "train_batch_size": 16, "num_train_epochs": 6.0}
    option_names = ("document_context",)
    document_context = "0"  # --document_context: pieces of context per row, or "max"

    def __init__(self, scheme: str = "auto"):
        if scheme not in SCHEMES:
            raise ValueError(f"scheme must be one of {SCHEMES}")
        self.scheme = scheme
        self.schemes_found: dict[str, str] = {}  # split -> "IOB1" / "IOB2", for reports

    def __repr__(self):
        return "ConllTask()"

    @property
    def splits(self) -> tuple[str, ...]:
        return ("train", *self.dev_splits, *self.test_splits)

    def _check_split(self, split):
        if split not in self.splits:
            raise InputError(f"{self.name}: unknown split {split!r}; expected one of "
                             f"{', '.join(self.splits)}")

    def split_path(self, data_dir: str, split: str) -> str:
        """`<data_dir>/<split>.txt`, which must exist."""
        self._check_split(split)
        return split_file(data_dir, f"{split}.txt")

    def read_examples(self, data_dir: str, split: str) -> list[Sentence]:
        return self.read_file(self.split_path(data_dir, split), split)

    def read_file(self, path: str, split: str) -> list[Sentence]:
        """Reads one CoNLL-2003 file as `split` (--train_file, --predict_file)."""
        sentences, self.schemes_found[split] = read_conll_file(path, split, self.scheme)
        return sentences

    def iter_file(self, path: str, split: str):
        """The sentences of one file one at a time, IOB2, validated as read_file validates
        them; the tag scheme is checked after the last one (--stream_train_data's counting
        pass reads to the end, see kerasbert/data/streaming.py)."""
        check = SchemeCheck(path, self.scheme)
        yield from iter_conll_file(path, split, check)
        self.schemes_found[split] = check.finish()

    def count_rows(self, examples, tokenizer, max_seq_length: int) -> int:
        """Feature rows of `examples` (a long sentence makes several), for streaming."""
        return count_rows(examples, tokenizer, max_seq_length)

    def sample_dir(self) -> str:
        return bundled_sample("conll2003")

    def configure(self, document_context=None, **options) -> "ConllTask":
        if options:
            raise InputError(f"{self.name}: unknown option(s) {', '.join(options)}; expected "
                             "document_context")
        if document_context is not None:  # RunConfig checked it: "max" or digits
            value = str(document_context)
            self.document_context = value if value == "max" else str(int(value))
        return self

    def check_config(self, config) -> None:
        # (N <= --max_seq_length is RunConfig's check.)
        value = self.document_context
        if value != "0" and config.use_tfds:
            raise InputError(f"--document_context={value}: TFDS conll2003 has no -DOCSTART- "
                             "documents to take context from; read the CoNLL files "
                             "(--data_dir) instead of --use_tfds")

    def keeps_together(self, example, following) -> bool:
        """With document context, a document's sentences are featurized together (each
        row's context comes from its neighbours), also when streamed."""
        return (self.document_context != "0" and example.document is not None
                and example.document == following.document)

    def read_tfds(self, split: str, data_dir: str | None = None) -> list[Sentence]:
        """Reads a split of a prepared TFDS `conll2003` (train / dev / test; no downloads)."""
        import tensorflow_datasets as tfds  # heavy; only when asked for

        self._check_split(split)
        tfds_split = TFDS_SPLITS[split]
        where = f"tfds conll2003 ({tfds_split})"
        try:
            dataset = tfds.load("conll2003", split=tfds_split, data_dir=data_dir, download=False)
        except (AssertionError, OSError) as e:
            raise InputError(
                f"TFDS conll2003 ({tfds_split}) is not prepared in "
                f"{data_dir or 'the default TFDS folder'}; prepare it on a machine with network "
                f"access (tfds build conll2003) and copy the folder, or point --data_dir at the "
                f"CoNLL train/valid/test.txt files instead ({e})") from None
        sentences = []
        for n, row in enumerate(tfds.as_numpy(dataset)):
            words = [w.decode("utf-8") if isinstance(w, bytes) else str(w) for w in row["tokens"]]
            tags = [TFDS_NER_TAGS[int(i)] for i in row["ner"]]
            if words:  # "line" = the example's number in the split, for messages
                sentences.append((words, tags, [n + 1] * len(words)))
        if not sentences:
            raise InputError(f"{where}: no sentences")
        self.schemes_found[split] = fix_scheme(sentences, where, self.scheme)
        return [Sentence(guid=f"{split}-{n}", text_a=" ".join(w), label=tuple(t),
                         words=tuple(w), line=lines[0])
                for n, (w, t, lines) in enumerate(sentences)]

    def featurize(self, examples, tokenizer, max_seq_length: int) -> Features:
        return featurize_sentences(examples, tokenizer, max_seq_length, self.label_list,
                                   self.document_context)

    def predict_tags(self, outputs, features: Features) -> list[list[str]]:
        return predict_word_tags(outputs, features, self.label_list)

    def evaluate(self, outputs, features: Features, output_dir: str | None = None,
                 split: str = "valid") -> dict[str, float]:
        """Entity P/R/F1 of a labelled split; writes `<split>_predictions.txt` to output_dir."""
        predicted = self.predict_tags(outputs, features)
        if output_dir is not None:
            write_conll_predictions(os.path.join(output_dir, f"{split}_predictions.txt"),
                                    features.examples, predicted)
        return entity_metrics([s.label for s in features.examples], predicted)

    def write_predictions(self, outputs, features: Features, output_dir: str, split: str) -> str:
        """Writes `<split>_predictions.txt` (`word gold predicted`, or `word predicted`)."""
        path = os.path.join(output_dir, f"{split}_predictions.txt")
        return write_conll_predictions(path, features.examples,
                                       self.predict_tags(outputs, features))


TASK = ConllTask()
