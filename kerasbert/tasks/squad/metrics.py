"""The official SQuAD scores: v1.1 EM/F1 and v2.0 EM/F1 with HasAns/NoAns and best thresholds.

Written from the semantics of the official `evaluate-v1.1.py` and `evaluate-v2.0.py`, which
differ in small ways that move the numbers, so both are kept:

  * answers are compared after `normalize_answer`: lower-case, drop `string.punctuation`,
    drop the whole words a/an/the, collapse whitespace;
  * F1 is the harmonic mean of token precision and recall with multiset (Counter) overlap;
    each question scores the max over its gold answers;
  * v1.1: an empty normalised answer has F1 0 against anything; a question without a
    prediction scores 0 and still counts in the total;
  * v2.0: an unanswerable question's only gold answer is "" and F1/EM are 1 exactly when
    the prediction is empty too; a question without a prediction is left out of the scores
    (the official script prints "Missing prediction" and skips it); with no-answer
    "probabilities" (BERT writes null odds s_null - s_best), any question whose value
    exceeds `na_prob_thresh` (default 1.0) is scored as if it had predicted "", and the
    best threshold is searched over those values (`find_best_thresh`).

Scores are on the official 0-100 scale. `gold` arguments are {question id: [answer texts]}
in dataset order; `gold_answers(data)` builds it from the official JSON's "data" list.
"""

import collections
import re
import string
import sys

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(text: str) -> str:
    """Lower-case, strip punctuation, drop articles, collapse whitespace (official order)."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def gold_answers(data) -> dict[str, list[str]]:
    """{id: [answer texts]} from the official JSON's "data" list (articles), in file order."""
    gold = {}
    for article in data:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                gold[qa["id"]] = [a["text"] for a in qa.get("answers", [])]
    return gold


def _token_f1(prediction_tokens, gold_tokens) -> float:
    common = collections.Counter(prediction_tokens) & collections.Counter(gold_tokens)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(prediction_tokens)
    recall = overlap / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


# ---- v1.1 -------------------------------------------------------------------------------------

def exact_match_v1(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1_v1(prediction: str, gold: str) -> float:
    """v1.1: no overlap (including an empty side) is 0, even when both are empty."""
    return _token_f1(normalize_answer(prediction).split(), normalize_answer(gold).split())


def evaluate_v1(gold: dict, predictions: dict, warn=None) -> dict[str, float]:
    """{"exact_match", "f1"} as evaluate-v1.1.py; unanswered questions score 0 (and are named
    through `warn`, by default on stderr, like the official script)."""
    warn = warn or (lambda message: print(message, file=sys.stderr))
    exact = f1 = 0.0
    for qid, answers in gold.items():
        if qid not in predictions:
            warn(f"Unanswered question {qid} will receive score 0.")
            continue
        prediction = predictions[qid]
        # max() over an empty list is an error in the official script; a question without
        # gold answers simply scores 0 here.
        exact += max((exact_match_v1(prediction, a) for a in answers), default=0.0)
        f1 += max((f1_v1(prediction, a) for a in answers), default=0.0)
    total = len(gold)
    return {"exact_match": 100.0 * exact / total if total else 0.0,
            "f1": 100.0 * f1 / total if total else 0.0}


# ---- v2.0 -------------------------------------------------------------------------------------

def exact_v2(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1_v2(prediction: str, gold: str) -> float:
    """v2.0: when either side is empty (no answer) F1 is 1 if both are, else 0."""
    prediction_tokens = normalize_answer(prediction).split() if prediction else []
    gold_tokens = normalize_answer(gold).split() if gold else []
    if not prediction_tokens or not gold_tokens:
        return float(prediction_tokens == gold_tokens)
    return _token_f1(prediction_tokens, gold_tokens)


def has_answer(answers) -> bool:
    """v2.0's HasAns split: the question lists any answer at all (even one that normalises
    to "", which is then scored against [""] like an unanswerable question)."""
    return bool(answers)


def raw_scores_v2(gold: dict, predictions: dict, warn=None):
    """Per-question (exact, f1) dicts, max over gold answers; unpredicted questions skipped."""
    warn = warn or (lambda message: print(message, file=sys.stderr))
    exact, f1 = {}, {}
    for qid, answers in gold.items():
        answers = [a for a in answers if normalize_answer(a)] or [""]
        if qid not in predictions:
            warn(f"Missing prediction for {qid}")
            continue
        prediction = predictions[qid]
        exact[qid] = max(exact_v2(prediction, a) for a in answers)
        f1[qid] = max(f1_v2(prediction, a) for a in answers)
    return exact, f1


def apply_no_answer_threshold(scores, na_probs, qid_has_answer, na_prob_thresh):
    """Questions whose no-answer value exceeds the threshold score as if they predicted ""."""
    return {qid: float(not qid_has_answer[qid]) if na_probs[qid] > na_prob_thresh else s
            for qid, s in scores.items()}


def find_best_thresh(predictions, scores, na_probs, qid_has_answer, none_thresh=0.0):
    """The official search: start from "every question predicts no answer" (score = number of
    unanswerable questions), then answer questions in increasing na_prob order (ties in the
    order of `na_probs`); an answerable one adds its score, an unanswerable one with a
    non-empty prediction loses its point. Returns (best score 0-100, na_prob of the last
    question answered at the best point). When answering none is best the official script
    says 0.0, which does not mean "answer none"; pass `none_thresh` (below every na_prob)
    to get a threshold that does."""
    score = best = sum(1 for has in qid_has_answer.values() if not has)
    threshold = none_thresh
    for qid in sorted(na_probs, key=lambda k: na_probs[k]):  # stable: file order breaks ties
        if qid not in scores:
            continue
        if qid_has_answer[qid]:
            score += scores[qid]
        elif predictions[qid]:
            score -= 1
        if score > best:
            best, threshold = score, na_probs[qid]
    return 100.0 * best / len(scores) if scores else 0.0, threshold


def _summary(exact, f1, qids=None):
    qids = list(exact) if qids is None else qids
    total = len(qids)
    return {"exact": 100.0 * sum(exact[q] for q in qids) / total if total else 0.0,
            "f1": 100.0 * sum(f1[q] for q in qids) / total if total else 0.0,
            "total": total}


def evaluate_v2(gold: dict, predictions: dict, na_probs: dict | None = None,
                na_prob_thresh: float = 1.0, warn=None) -> dict:
    """The dict evaluate-v2.0.py prints, keys in its order.

    Without `na_probs` every question gets 0.0 (so the threshold never applies) and the
    best_* keys are absent, as in the official script. HasAns_* / NoAns_* are present only
    when such questions exist. Deviation: where the official script raises KeyError (a
    question missing from the predictions is also in the HasAns/NoAns list), we leave it out
    of those lists as it is left out of the totals.
    """
    exact_raw, f1_raw = raw_scores_v2(gold, predictions, warn)
    has = {qid: has_answer(answers) for qid, answers in gold.items()}
    probs = na_probs if na_probs is not None else {qid: 0.0 for qid in predictions}
    missing = [qid for qid in exact_raw if qid not in probs]
    if missing:
        raise ValueError(f"no no-answer probability for question {missing[0]!r} "
                       f"({len(missing)} question(s) in all)")
    exact = apply_no_answer_threshold(exact_raw, probs, has, na_prob_thresh)
    f1 = apply_no_answer_threshold(f1_raw, probs, has, na_prob_thresh)
    result = _summary(exact, f1)
    for name, wanted in (("HasAns", True), ("NoAns", False)):
        qids = [qid for qid in gold if has[qid] == wanted and qid in exact]
        if any(has[qid] == wanted for qid in gold):
            result.update({f"{name}_{k}": v for k, v in _summary(exact, f1, qids).items()})
    if na_probs is not None:
        result.update(best_thresholds(predictions, exact_raw, f1_raw, na_probs, has))
    return result


def best_thresholds(predictions, exact_raw, f1_raw, na_probs, qid_has_answer,
                    none_thresh=0.0) -> dict:
    best_exact, exact_thresh = find_best_thresh(predictions, exact_raw, na_probs, qid_has_answer,
                                                none_thresh)
    best_f1, f1_thresh = find_best_thresh(predictions, f1_raw, na_probs, qid_has_answer,
                                          none_thresh)
    return {"best_exact": best_exact, "best_exact_thresh": exact_thresh,
            "best_f1": best_f1, "best_f1_thresh": f1_thresh}
