"""CoNLL metrics and prediction files: conlleval's entity precision, recall and F1 (via
seqeval's default mode) and token accuracy, of predictions or of a `word gold predicted`
file."""

import re
from typing import Sequence

import numpy as np
from seqeval import metrics as seqeval_metrics  # conlleval semantics in its default mode
from seqeval.metrics.sequence_labeling import get_entities

from kerasbert.errors import InputError, at
from kerasbert.io_utils import replaced_whole
from kerasbert.tasks.conll.reader import ENTITY_TYPES, Sentence, read_columns



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


def entity_counts(sentences) -> np.ndarray:
    """float64 [sentences, 3]: (true positive, predicted, gold) entities of each (gold
    tags, predicted tags) sentence, conlleval's (seqeval's default mode) entities: summed
    over sentences they give its micro F1 (the restarts tables' per-example scores)."""
    counts = []
    for gold, predicted in sentences:
        g, p = set(get_entities(list(gold))), set(get_entities(list(predicted)))
        counts.append((len(g & p), len(p), len(g)))
    return np.asarray(counts, np.float64).reshape(-1, 3)


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
    for number, fields in read_columns(path):
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
