"""SQuAD v1.1 and v2.0: reader, sliding-window features, span decoding, null threshold.

Follows the behaviour of google-research/bert's `run_squad.py` (read for behaviour, not
copied), so numbers are comparable with the paper:

  * Reading: each context is split on whitespace (" \\t\\r\\n" and U+202F) into words with
    their character offsets; an answer's character span becomes a word span, then a
    word-piece span, which is tightened to the word pieces of the answer text itself
    (`improve_answer_span`: "(1887)," -> "1887").
  * Features: `[CLS] question [SEP] passage window [SEP]`, question = segment A cut to
    max_query_length pieces. A passage longer than the room left is cut into windows that
    start doc_stride pieces apart (`doc_windows`); a piece seen in several windows is
    scored only in the one where it has the most context (`max_context_masks`).
  * Labels [rows, 2] = (start, end) positions of the gold answer in the row. A window that
    does not hold the whole answer, and an unanswerable question (v2), point at [CLS]
    (position 0). v1 keeps such windows too, as BERT does: the model learns to put little
    weight on spans of windows without the answer, and decoding never picks [CLS] in v1.
    Dev rows get labels the same way (first answer), only so that a loss can be computed;
    decoding works from the model outputs alone.
  * Decoding (`decode`): for each question, over all its windows, the n_best_size best
    starts and ends of each window, pairs with end >= start, length <= max_answer_length,
    both inside the passage and the start in its max-context window; score = start logit
    + end logit. The best span's word pieces are mapped back onto the original words
    (`get_final_text`), keeping the original casing, accents and punctuation.
  * v2.0: s_null = the smallest [CLS] score (start_logits[0] + end_logits[0]) over the
    question's windows; the answer is "" when s_null - s_best_span > the threshold. The
    null odds s_null - s_best_span are written to null_odds.json and searched for the
    threshold that maximises F1 (metrics best_f1 / best_f1_thresh).

Gold answers that cannot be found in the context (text differs from the context at
answer_start after whitespace normalisation, or runs past its end) are kept: the count and
the first ids are logged as a warning and listed in `features.extra["unlocated_answers"]`;
such a question trains towards [CLS] when none of its answers is located, and is still
scored against its gold texts.
"""

import dataclasses
import json
import logging
import math
import os
import re
from typing import Sequence

import numpy as np

from kerasbert.errors import InputError, at
from kerasbert.io_utils import atomic_write_text, missing_file, read_utf8_text
from kerasbert.tasks import squad_metrics
from kerasbert.tasks.base import SPAN, Example, Features, Task

log = logging.getLogger(__name__)

# BERT's run_squad.py whitespace: the four ASCII ones and NARROW NO-BREAK SPACE. Other
# Unicode spaces stay inside words (the WordPiece tokenizer splits on them later).
_WORD = re.compile("[^ \t\r\n\u202f]+")
# Null odds of a question with no valid span at all: its answer is "" whatever the
# threshold, and a finite value keeps null_odds.json standard JSON.
NO_SPAN_ODDS = 1e9
# Logit that a decoder treats as "never": rows from batches trimmed shorter are padded with it.
PADDING_LOGIT = -10000.0
_WORDS_PER_CALL = 100_000  # tokenizer batch: bounded memory, few TF calls


@dataclasses.dataclass(frozen=True)
class Answer:
    text: str
    start: int  # character offset of the answer in the context


@dataclasses.dataclass(frozen=True)
class SquadExample(Example):
    """One question. text_a is the question, text_b the context (as every Example)."""

    qas_id: str = ""
    answers: tuple[Answer, ...] = ()
    is_impossible: bool = False
    plausible_answers: tuple[Answer, ...] = ()  # v2 only; read and kept, not trained on
    title: str = ""

    @property
    def question(self) -> str:
        return self.text_a

    @property
    def context(self) -> str:
        return self.text_b


# ---- reading the official JSON ---------------------------------------------------------------

def read_squad_file(path: str, version_2: bool, split: str = "dev") -> list[SquadExample]:
    """Reads an official SQuAD JSON file ({"version", "data": [articles]}).

    InputError (naming the file, the line and the JSON path, e.g. data[3].paragraphs[0].qas[2])
    for: unreadable or malformed JSON, a missing or mistyped key (data, paragraphs, context,
    qas, id, question, answers, text, answer_start), an empty id or context, a duplicate id,
    an answer_start outside its context, an empty answer text, an answerable question with
    no answers, an unanswerable one (is_impossible) that lists answers, and is_impossible
    questions read as SQuAD v1.1. Counted warnings instead (the data stays usable): answers
    whose text is not found at answer_start (see `build_features`). A missing title is "".
    The official files are one JSON line, hence the JSON path in every message.
    """
    text = _read_text(path)
    try:
        root = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(
            f"{at(path, e.lineno)}malformed JSON: {e.msg} (column {e.colno})") from None
    where = _Where(path, text)
    data = _get(root, "data", list, where, ())
    examples, seen = [], {}
    for ai, article in enumerate(data):
        apath = ("data", ai)
        _check(isinstance(article, dict), where, apath, "an article must be a JSON object")
        title = article.get("title", "")
        title = title if isinstance(title, str) else str(title)
        for pi, paragraph in enumerate(_get(article, "paragraphs", list, where, apath)):
            ppath = apath + ("paragraphs", pi)
            _check(isinstance(paragraph, dict), where, ppath, "a paragraph must be a JSON object")
            context = _get(paragraph, "context", str, where, ppath)
            _check(context.strip(), where, ppath, "empty context")
            for qi, qa in enumerate(_get(paragraph, "qas", list, where, ppath)):
                qpath = ppath + ("qas", qi)
                _check(isinstance(qa, dict), where, qpath, "a question must be a JSON object")
                example = _read_question(qa, context, title, split, version_2, where, qpath)
                if example.qas_id in seen:
                    where.fail(qpath, f"duplicate id {example.qas_id!r} (first at "
                                      f"{_json_path(seen[example.qas_id])})")
                seen[example.qas_id] = qpath
                examples.append(example)
    if not examples:
        raise InputError(f"{at(path)}no questions in the {split} split")
    return examples


def _read_question(qa, context, title, split, version_2, where, qpath) -> SquadExample:
    qid = _get(qa, "id", str, where, qpath)
    _check(qid, where, qpath, "empty id")
    question = _get(qa, "question", str, where, qpath)
    impossible = qa.get("is_impossible", False)
    _check(isinstance(impossible, bool), where, qpath, "is_impossible must be true or false")
    if impossible and not version_2:
        where.fail(qpath, f"question {qid!r} is unanswerable (is_impossible), which SQuAD v1.1 "
                          "has not; read this file with --task=squad_v2")
    answers = _read_answers(qa, "answers", context, where, qpath, required=not impossible)
    plausible = _read_answers(qa, "plausible_answers", context, where, qpath, required=False)
    if impossible and answers:
        where.fail(qpath, f"question {qid!r} is_impossible but lists answers")
    if not impossible and not answers:
        where.fail(qpath, f"question {qid!r} has no answers" + (
            " (mark unanswerable questions with \"is_impossible\": true)" if version_2 else ""))
    return SquadExample(guid=f"{split}-{qid}", text_a=question, text_b=context,
                        label=answers[0].text if answers else "", qas_id=qid,
                        answers=answers, is_impossible=impossible,
                        plausible_answers=plausible, title=title)


def _read_answers(qa, key, context, where, qpath, required) -> tuple[Answer, ...]:
    if key not in qa and not required:
        return ()
    answers = []
    for k, answer in enumerate(_get(qa, key, list, where, qpath)):
        apath = qpath + (key, k)
        _check(isinstance(answer, dict), where, apath, "an answer must be a JSON object")
        text = _get(answer, "text", str, where, apath)
        start = _get(answer, "answer_start", int, where, apath)
        _check(text, where, apath, "empty answer text")
        _check(0 <= start < len(context), where, apath,
               f"answer_start {start} is outside its context ({len(context)} characters)")
        answers.append(Answer(text, start))
    return tuple(answers)


def _read_text(path):
    return read_utf8_text(path, "SQuAD")


class _Where:
    """Turns a JSON path into 'file:line: data[i]...: ' for messages (parsed again, slowly,
    only when there is something to report: the official files are a single line)."""

    def __init__(self, path, text):
        self.path, self.text = path, text

    def fail(self, json_path, message):
        raise InputError(f"{at(self.path, _line_of(self.text, json_path))}"
                         f"{_json_path(json_path) or 'top level'}: {message}")


def _check(ok, where, json_path, message):
    if not ok:
        where.fail(json_path, message)


def _get(obj, key, kind, where, json_path):
    if not isinstance(obj, dict) or key not in obj:
        where.fail(json_path, f"missing key {key!r}")
    value = obj[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        names = {list: "a list", str: "a string", int: "an integer"}
        where.fail(json_path, f"{key!r} must be {names[kind]}, not {type(value).__name__}")
    return value


def _json_path(parts) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else p)
    return out


class _Located(dict):
    position = 0  # offset of the object's "{" in the text


def _line_of(text, json_path) -> int:
    """Line of the innermost JSON object on `json_path` (1 when it cannot be found)."""
    decoder = json.JSONDecoder()

    def parse_object(s_and_end, *args):
        obj, end = json.decoder.JSONObject(s_and_end, *args)
        located = _Located(obj)
        located.position = s_and_end[1] - 1
        return located, end

    decoder.parse_object = parse_object
    decoder.scan_once = json.scanner.py_make_scanner(decoder)  # the pure-Python scanner calls it
    position, node = 0, decoder.decode(text)
    for part in json_path:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            break
        position = getattr(node, "position", position)
    return text.count("\n", 0, position) + 1


# ---- windows and max context ------------------------------------------------------------------

def doc_windows(num_tokens: int, max_tokens: int, doc_stride: int) -> list[tuple[int, int]]:
    """(start, length) of each window over a passage of `num_tokens` word pieces.

    Windows hold up to `max_tokens` pieces and start `doc_stride` apart (or right after the
    previous one when that is shorter than the stride); the last one ends at the passage end.
    """
    if max_tokens < 1:
        raise ValueError(f"no room for the passage (max_tokens={max_tokens})")
    windows, start = [], 0
    while start < num_tokens:
        length = min(num_tokens - start, max_tokens)
        windows.append((start, length))
        if start + length == num_tokens:
            break
        start += min(length, doc_stride)
    return windows


def max_context_masks(windows: Sequence[tuple[int, int]]) -> list[np.ndarray]:
    """For each window, which of its pieces have their maximum context in it.

    A piece's context in a window is min(pieces left of it, pieces right of it) + 0.01 x
    window length (the length breaks ties in favour of longer windows); the first window
    with the highest score owns the piece.
    """
    if not windows:
        return []
    starts = np.array([s for s, _ in windows], np.int64)[:, None]
    lengths = np.array([n for _, n in windows], np.int64)[:, None]
    ends = starts + lengths - 1
    positions = np.arange(int(ends.max()) + 1)[None, :]
    score = np.minimum(positions - starts, ends - positions) + 0.01 * lengths
    score = np.where((positions >= starts) & (positions <= ends), score, -np.inf)
    owner = score.argmax(axis=0)  # first maximum wins
    return [owner[s: s + n] == w for w, (s, n) in enumerate(windows)]


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


def split_words(context: str) -> tuple[list[str], np.ndarray]:
    """Whitespace words of a context and their character offsets."""
    matches = list(_WORD.finditer(context))
    return [m.group() for m in matches], np.array([m.start() for m in matches], np.int64)


def _tokenize_words(tokenizer, words):
    """All words in few batched calls -> (flat piece ids, pieces per word, basic tokens)."""
    import tensorflow as tf

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
                   doc_stride: int = 128, max_query_length: int = 64) -> Features:
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


# ---- decoding ---------------------------------------------------------------------------------

def get_final_text(pred_text: str, orig_text: str, tok_text: str) -> str:
    """Projects a de-tokenized prediction back onto the original words.

    `orig_text`: the original words the predicted pieces came from, joined by spaces;
    `tok_text`: the same words through BERT's basic tokenizer (lower-cased, accents and
    punctuation split off when uncased), joined by spaces; `pred_text`: the predicted
    pieces joined ("##" merged). "Steve Smith's" with pred_text "steve smith" gives "Steve
    Smith". Positions are matched by counting non-space characters, so when normalisation
    changed the length (a soft hyphen or zero-width space dropped, a no-break space split
    on) or the prediction is not found in tok_text (an [UNK] piece), the whole original
    words are returned, as in BERT.
    """
    start = tok_text.find(pred_text)
    if start == -1 or not pred_text:
        return orig_text
    end = start + len(pred_text) - 1
    if len(orig_text) - orig_text.count(" ") != len(tok_text) - tok_text.count(" "):
        return orig_text
    if tok_text[start] == " " or tok_text[end] == " ":
        return orig_text
    first = _nth_non_space(orig_text, start - tok_text.count(" ", 0, start))
    last = _nth_non_space(orig_text, end - tok_text.count(" ", 0, end))
    return orig_text[first: last + 1]


def _nth_non_space(text: str, n: int) -> int:
    """Offset in `text` of its n-th (0-based) character that is not a space."""
    position = 0
    for part in text.split(" "):
        if n < len(part):
            return position + n
        n -= len(part)
        position += len(part) + 1
    raise IndexError(n)


def _softmax(scores):
    scores = np.asarray(scores, np.float64)
    e = np.exp(scores - scores.max())
    return e / e.sum()


@dataclasses.dataclass
class Decoded:
    predictions: dict  # id -> answer text (v2: "" when the null score wins)
    nbest: dict  # id -> [{text, probability, start_logit, end_logit}]
    null_odds: dict  # v2: id -> s_null - best non-null score; {} for v1
    best_non_null: dict  # v2: id -> best non-empty answer ("" if none); {} for v1


def as_logits(outputs, num_rows: int, seq_length: int) -> np.ndarray:
    """Head outputs as float32 [rows, seq_length, 2]; batches trimmed to their own longest
    row (or a list of such batches) are padded back with PADDING_LOGIT."""
    parts = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    padded = []
    for part in parts:
        part = np.asarray(part, np.float32)
        if part.ndim != 3 or part.shape[-1] != 2 or part.shape[1] > seq_length:
            raise ValueError(f"span outputs must be [rows, <= {seq_length}, 2], got {part.shape}")
        pad = seq_length - part.shape[1]
        padded.append(np.pad(part, [(0, 0), (0, pad), (0, 0)], constant_values=PADDING_LOGIT))
    logits = np.concatenate(padded) if padded else np.zeros([0, seq_length, 2], np.float32)
    if len(logits) != num_rows:
        raise ValueError(f"{len(logits)} output rows for {num_rows} feature rows")
    return logits


def decode(outputs, features: Features, n_best_size: int = 20, max_answer_length: int = 30,
           version_2: bool = False, null_score_diff_threshold: float = 0.0) -> Decoded:
    """Answers, n-best lists and (v2) null odds from the head's raw outputs (see module doc)."""
    token_ids = features.inputs["token_ids"]
    logits = as_logits(outputs, *token_ids.shape)
    x = features.extra
    vocab, docs = x["vocab"], x["documents"]
    example_index, window_start = x["example_index"], x["window_start"]
    window_length, passage_offset = x["window_length"], x["passage_offset"]
    # BERT's _get_best_indexes: all positions by logit, ties to the lower index.
    best_starts = np.argsort(-logits[:, :, 0], axis=1, kind="stable")[:, :n_best_size]
    best_ends = np.argsort(-logits[:, :, 1], axis=1, kind="stable")[:, :n_best_size]
    bounds = np.searchsorted(example_index, np.arange(len(features.examples) + 1))
    out = Decoded({}, {}, {}, {})
    for i, example in enumerate(features.examples):
        rows = range(bounds[i], bounds[i + 1])
        doc = docs[x["doc_index"][i]]
        owned = max_context_masks([(window_start[r], window_length[r]) for r in rows])
        cands, null = [], None  # cands: arrays of (row, start, end) per window
        for k, r in enumerate(rows):
            if version_2:
                score = float(logits[r, 0, 0]) + float(logits[r, 0, 1])
                if null is None or score < null[0]:
                    null = (score, r, float(logits[r, 0, 0]), float(logits[r, 0, 1]))
            off, n = passage_offset[r], window_length[r]
            starts, ends = best_starts[r], best_ends[r]
            start_ok = (starts >= off) & (starts < off + n)
            start_ok[start_ok] = owned[k][starts[start_ok] - off]
            end_ok = (ends >= off) & (ends < off + n)
            s, e = starts[:, None], ends[None, :]
            valid = start_ok[:, None] & end_ok[None, :] & (e >= s) & (e - s < max_answer_length)
            a, b = np.nonzero(valid)  # start-major order, as BERT builds its list
            cands.append(np.stack([np.full(len(a), r), starts[a], ends[b]], axis=1))
        if null is not None:
            cands.append(np.array([[null[1], 0, 0]]))
        cands = np.concatenate(cands) if cands else np.zeros([0, 3], np.int64)
        start_l = logits[cands[:, 0], cands[:, 1], 0].astype(np.float64)
        end_l = logits[cands[:, 0], cands[:, 2], 1].astype(np.float64)
        nbest, seen = [], set()
        for c in np.argsort(-(start_l + end_l), kind="stable"):  # ties keep list order
            if len(nbest) >= n_best_size:
                break
            r, s, e = cands[c]
            text = "" if s == 0 else _span_text(r, s, e, token_ids, vocab, doc,
                                                window_start[r], passage_offset[r])
            if text in seen:
                continue
            seen.add(text)
            nbest.append((text, float(start_l[c]), float(end_l[c])))
        if version_2 and "" not in seen and null is not None:
            nbest.append(("", null[2], null[3]))
        if not nbest:  # no window, or no valid span in v1 (BERT writes the nonce "empty")
            nbest.append(("", 0.0, 0.0))
        probs = _softmax([sl + el for _, sl, el in nbest])
        qid = example.qas_id
        out.nbest[qid] = [{"text": t, "probability": float(p), "start_logit": sl, "end_logit": el}
                          for (t, sl, el), p in zip(nbest, probs)]
        if not version_2:
            out.predictions[qid] = nbest[0][0]
            continue
        best = next(((t, sl + el) for t, sl, el in nbest if t), None)
        odds = NO_SPAN_ODDS if best is None or null is None else null[0] - best[1]
        out.null_odds[qid] = odds
        out.best_non_null[qid] = best[0] if best else ""
        out.predictions[qid] = "" if best is None or odds > null_score_diff_threshold else best[0]
    return out


def _span_text(r, s, e, token_ids, vocab, doc, window_start, offset):
    """The original text of pieces s..e of row r (BERT's detokenize + get_final_text)."""
    pred = " ".join([vocab[t] for t in token_ids[r, s: e + 1].tolist()])
    pred = " ".join(pred.replace(" ##", "").replace("##", "").split())
    first = doc.piece_to_word[window_start + s - offset]
    last = doc.piece_to_word[window_start + e - offset]
    orig = " ".join(doc.words[first: last + 1])
    tok = " ".join([b for b in doc.basic[first: last + 1] if b])
    return get_final_text(pred, orig, tok)


# ---- the tasks --------------------------------------------------------------------------------

OPTIONS = {  # BERT's run_squad.py flag names and defaults
    "doc_stride": 128,
    "max_query_length": 64,
    "n_best_size": 20,
    "max_answer_length": 30,
    "null_score_diff_threshold": 0.0,
}


class SquadTask(Task):
    """SQuAD v1.1 (`squad_v1`) or v2.0 (`squad_v2`) with BERT's recipe and options.

    Options (attributes, also set through `configure`): doc_stride, max_query_length,
    n_best_size, max_answer_length, null_score_diff_threshold (v2: answer "" when
    s_null - s_best > threshold). `evaluate` on dev returns the official metrics; for v2 it
    adds best_f1_thresh, the threshold that maximises dev F1, to pass back through
    `configure(null_score_diff_threshold=...)` for later predictions.
    """

    kind = SPAN
    default_head = "span"
    label_list = None
    dev_splits = ("dev",)
    test_splits = ()  # SQuAD's test set is hidden; predictions are written for dev
    default_max_seq_length = 384  # BERT's run_squad.py default

    def __init__(self, version_2: bool):
        self.version_2 = version_2
        self.name = "squad_v2" if version_2 else "squad_v1"
        self.file_version = "v2.0" if version_2 else "v1.1"
        self.description = f"SQuAD {self.file_version[1:]} extractive question answering"
        # v2: model selection on the F1 at the best dev threshold, what BERT reports.
        self.main_metric = "best_f1" if version_2 else "f1"
        # Paper recipe (BERT, sections 4.2 and 4.3).
        self.default_learning_rate = 5e-5
        self.default_train_batch_size = 48 if version_2 else 32
        self.default_num_train_epochs = 2.0 if version_2 else 3.0
        for name, value in OPTIONS.items():
            setattr(self, name, value)

    def __repr__(self):
        return f"SquadTask({self.name!r})"

    def configure(self, **options) -> "SquadTask":
        """Sets options by their BERT flag names (None leaves one as it is); InputError
        naming the flag on bad values."""
        for name, value in options.items():
            if name not in OPTIONS:
                raise InputError(f"{self.name}: unknown option {name!r}; expected one of "
                                 f"{', '.join(OPTIONS)}")
            if value is None:
                continue
            if name == "null_score_diff_threshold":
                ok = isinstance(value, (int, float)) and math.isfinite(value)
                value = float(value)
            else:
                ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
            if not ok:
                raise InputError(f"--{name}={value}: must be "
                                 + ("a finite number" if name.startswith("null") else
                                    "a positive integer"))
            setattr(self, name, value)
        return self

    # ---- data ----

    def check_config(self, config) -> None:
        if config.max_seq_length <= config.max_query_length + 3:
            raise InputError(
                f"--max_seq_length={config.max_seq_length}: must exceed --max_query_length="
                f"{config.max_query_length} + 3 ([CLS] and two [SEP]) to leave room for the "
                "passage")

    def file_name(self, split: str) -> str:
        if split not in ("train", *self.dev_splits):
            raise InputError(f"{self.name}: unknown split {split!r}; expected train or dev "
                             "(SQuAD's test set is not public)")
        return f"{split}-{self.file_version}.json"

    def read_examples(self, data_dir: str, split: str) -> list[SquadExample]:
        path = os.path.join(data_dir, self.file_name(split))
        if not os.path.isfile(path):
            raise missing_file(path, data_dir)
        return read_squad_file(path, self.version_2, split)

    def sample_dir(self) -> str:
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        return os.path.join(here, "data", "samples", "squad")

    def read_tfds(self, split: str, data_dir: str | None) -> list[SquadExample]:
        """Reads `squad/v1.1` or `squad/v2.0` from a prepared TFDS folder (no downloads).

        Our dev split is TFDS's validation split. Fields: id, title, context, question,
        answers{text, answer_start}; v2 also is_impossible and plausible_answers.
        """
        import tensorflow_datasets as tfds  # heavy; only when asked for

        self.file_name(split)  # checks the split name
        name, tfds_split = f"squad/{self.file_version}", "validation" if split == "dev" else split
        try:
            dataset = tfds.load(name, split=tfds_split, data_dir=data_dir, download=False)
        except Exception as e:  # TFDS raises assorted types for "not prepared"
            raise InputError(
                f"TFDS {name} ({tfds_split}) is not prepared in "
                f"{data_dir or 'the default TFDS folder'}: prepare it on a machine with network "
                f"access (tfds build squad --config={self.file_version}) and copy the folder, or "
                f"pass --data_dir with the official {self.file_name(split)} ({e})") from None
        examples, seen = [], set()
        for row in tfds.as_numpy(dataset):
            qid = _text(row["id"])
            context = _text(row["context"])
            impossible = bool(row.get("is_impossible", False))
            answers = _tfds_answers(row.get("answers"), context, name, qid)
            plausible = _tfds_answers(row.get("plausible_answers"), context, name, qid)
            if qid in seen:
                raise InputError(f"TFDS {name} ({tfds_split}): duplicate id {qid!r}")
            if not impossible and not answers:
                raise InputError(f"TFDS {name} ({tfds_split}): question {qid!r} has no answers")
            seen.add(qid)
            examples.append(SquadExample(
                guid=f"{split}-{qid}", text_a=_text(row["question"]), text_b=context,
                label=answers[0].text if answers else "", qas_id=qid, answers=answers,
                is_impossible=impossible, plausible_answers=plausible,
                title=_text(row.get("title", b""))))
        if not examples:
            raise InputError(f"TFDS {name} ({tfds_split}): no examples")
        return examples

    # ---- features and evaluation ----

    def featurize(self, examples, tokenizer, max_seq_length: int) -> Features:
        return build_features(examples, tokenizer, max_seq_length, self.doc_stride,
                              self.max_query_length)

    def decode(self, outputs, features: Features) -> Decoded:
        return decode(outputs, features, self.n_best_size, self.max_answer_length,
                      self.version_2, self.null_score_diff_threshold)

    def evaluate(self, outputs, features: Features, output_dir: str | None = None,
                 split: str = "dev") -> dict[str, float]:
        """Official metrics (0-100); writes the prediction files when output_dir is given.

        v1: exact_match, f1. v2: exact, f1, total, HasAns_*, NoAns_* of predictions.json as
        written (what `python -m kerasbert.evaluate squad_v2 dev-v2.0.json predictions.json`
        prints), and best_exact/best_f1 with their thresholds searched by the official
        algorithm over null_odds.json and the best non-null answers (so thresholds above
        the current one are found too); subsequent decoding with
        null_score_diff_threshold = best_f1_thresh gives best_f1 (up to ties in the odds).
        Where answering no question is best, the threshold is min(odds) - 1 rather than the
        official script's 0.0, which would not reproduce it.
        """
        decoded = self.decode(outputs, features)
        if output_dir is not None:
            self._write(decoded, output_dir, split)
        gold = {e.qas_id: [a.text for a in e.answers] for e in features.examples}
        if not self.version_2:
            return squad_metrics.evaluate_v1(gold, decoded.predictions, warn=log.warning)
        metrics = squad_metrics.evaluate_v2(gold, decoded.predictions, warn=log.warning)
        exact_raw, f1_raw = squad_metrics.raw_scores_v2(gold, decoded.best_non_null, log.warning)
        has = {qid: squad_metrics.has_answer(a) for qid, a in gold.items()}
        # When answering nothing is best, a threshold below every odds value says so.
        none = min(decoded.null_odds.values(), default=1.0) - 1.0
        metrics.update(squad_metrics.best_thresholds(decoded.best_non_null, exact_raw, f1_raw,
                                                     decoded.null_odds, has, none))
        return metrics

    def write_predictions(self, outputs, features: Features, output_dir: str, split: str) -> str:
        return self._write(self.decode(outputs, features), output_dir, split)

    def _write(self, decoded: Decoded, output_dir: str, split: str) -> str:
        """predictions.json, nbest_predictions.json and (v2) null_odds.json; other splits
        than dev get a "<split>_" prefix. Returns the predictions file."""
        prefix = "" if split == "dev" else f"{split}_"
        files = {"predictions.json": decoded.predictions, "nbest_predictions.json": decoded.nbest}
        if self.version_2:
            files["null_odds.json"] = decoded.null_odds
        for name, content in files.items():
            atomic_write_text(os.path.join(output_dir, prefix + name),
                              json.dumps(content, indent=2, ensure_ascii=False) + "\n")
        return os.path.join(output_dir, prefix + "predictions.json")


def _text(value) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _tfds_answers(answers, context, name, qid) -> tuple[Answer, ...]:
    if answers is None:
        return ()
    out = []
    for text, start in zip(answers["text"], answers["answer_start"]):
        text, start = _text(text), int(start)
        if not text or not 0 <= start < len(context):
            raise InputError(f"TFDS {name}: question {qid!r} has an answer outside its context "
                             f"(answer_start {start}, text {text!r})")
        out.append(Answer(text, start))
    return tuple(out)


TASKS: dict[str, SquadTask] = {t.name: t for t in (SquadTask(False), SquadTask(True))}
