"""A passage's windows and an answer span's text: how SQuAD's features and decoding
(kerasbert/tasks/squad/) and a TensorFlow-free answer server (kerasbert/lite/spans.py) cut
a long context and map predicted word pieces back onto the original words. numpy and the
standard library only, in a module of its own so that the server imports no task."""

import re
from typing import Sequence

import numpy as np

# BERT's run_squad.py whitespace: the four ASCII ones and NARROW NO-BREAK SPACE. Other
# Unicode spaces stay inside words (the WordPiece tokenizer splits on them later).
WORD = re.compile("[^ \t\r\n\u202f]+")

# Null odds of a question with no valid span at all: its answer is "" whatever the
# threshold, and a finite value keeps null_odds.json standard JSON.
NO_SPAN_ODDS = 1e9


def split_words(context: str) -> tuple[list[str], np.ndarray]:
    """Whitespace words of a context and their character offsets."""
    matches = list(WORD.finditer(context))
    return [m.group() for m in matches], np.array([m.start() for m in matches], np.int64)


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


def detokenize(pieces: Sequence[str]) -> str:
    """Word pieces as text, "##" continuations merged (BERT's run_squad.py)."""
    text = " ".join(pieces)
    return " ".join(text.replace(" ##", "").replace("##", "").split())


def final_span(pred_text: str, orig_text: str, tok_text: str) -> tuple[int, int]:
    """(first, last) character of `orig_text` that `get_final_text` returns."""
    whole = (0, len(orig_text) - 1)
    start = tok_text.find(pred_text)
    if start == -1 or not pred_text:
        return whole
    end = start + len(pred_text) - 1
    if len(orig_text) - orig_text.count(" ") != len(tok_text) - tok_text.count(" "):
        return whole
    if tok_text[start] == " " or tok_text[end] == " ":
        return whole
    return (_nth_non_space(orig_text, start - tok_text.count(" ", 0, start)),
            _nth_non_space(orig_text, end - tok_text.count(" ", 0, end)))


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
    first, last = final_span(pred_text, orig_text, tok_text)
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
