"""CoNLL decoding: one tag per input word, read at its first piece in the window that
owns it (the argmax of the head's outputs there)."""

from typing import Sequence

import numpy as np

from kerasbert.tasks.base import Features
from kerasbert.tasks.conll.reader import LABELS


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
