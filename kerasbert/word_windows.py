"""Overlapping windows of whole words over a long sentence, and the window each word is read
in: how a tagging run (kerasbert/tasks/conll/features.py) and a TensorFlow-free tagging
server (kerasbert/lite/model.py) cut a sentence longer than one row. numpy only, in a module
of its own so that the server imports neither the tasks nor their dependencies."""

from typing import Sequence

import numpy as np


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
