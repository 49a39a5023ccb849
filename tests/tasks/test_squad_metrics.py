"""The official SQuAD v1.1 / v2.0 scoring, on hand-written cases with hand-computed numbers."""

import pytest

from kerasbert.tasks.squad import metrics as m


@pytest.mark.parametrize("text, expected", [
    ("The  Cat's-Hat!", "catshat"),      # punctuation is deleted, not replaced by a space
    ("An apple a day", "apple day"),     # articles go as whole words only ...
    ("theatre Anatomy", "theatre anatomy"),  # ... not inside words
    ("  the\tRed\nHouse. ", "red house"),
    ("A", ""),
    ("Émile — “Ferrand”", "émile — “ferrand”"),  # only ASCII string.punctuation is removed
])
def test_normalize_answer(text, expected):
    assert m.normalize_answer(text) == expected


def test_token_f1_by_hand():
    # pred [quick, brown, fox] vs gold [quick, fox, jumps]: overlap 2, P = R = 2/3, F1 = 2/3.
    assert m.f1_v1("the quick brown fox", "quick fox jumps") == pytest.approx(2 / 3)
    # Multiset overlap: cat x1, dog x1 = 2; P = 2/3, R = 2/4; F1 = 2PR/(P+R) = (2/3)/(7/6) = 4/7.
    assert m.f1_v1("cat cat dog", "cat dog dog dog") == pytest.approx(4 / 7)
    assert m.f1_v2("cat cat dog", "cat dog dog dog") == pytest.approx(4 / 7)


def test_empty_answers_differ_between_versions():
    # v1.1: no overlap is F1 0 even when both sides normalise to nothing; EM still matches.
    assert m.f1_v1("", "") == 0.0 and m.exact_match_v1("", "the") == 1.0
    # v2.0: an empty side scores 1 only against another empty side.
    assert m.f1_v2("", "") == 1.0 and m.f1_v2("The", "") == 1.0  # "The" normalises to ""
    assert m.f1_v2("", "Paris") == 0.0 and m.f1_v2("Paris", "") == 0.0


def test_evaluate_v1_by_hand():
    gold = {"q1": ["Denver Broncos", "The Denver Broncos"], "q2": ["1887"], "q3": ["blue cat"]}
    predictions = {"q1": "the Denver Broncos!", "q2": "in 1887"}
    warnings = []
    result = m.evaluate_v1(gold, predictions, warn=warnings.append)
    # q1 exact (EM 1, F1 1); q2: [in, 1887] vs [1887]: P 1/2, R 1, F1 2/3; q3 missing: 0.
    assert result == pytest.approx({"exact_match": 100 / 3, "f1": 100 * (1 + 2 / 3) / 3})
    assert list(result) == ["exact_match", "f1"]
    assert warnings == ["Unanswered question q3 will receive score 0."]


# v2 case: a, b, e answerable (e's only answer "an" normalises to "", so it is scored against
# [""] yet counted in HasAns, as the official script does); c, d unanswerable.
GOLD_V2 = {"a": ["Paris"], "b": ["the red house"], "c": [], "d": [], "e": ["an"]}
PREDS_V2 = {"a": "Paris", "b": "red house door", "c": "", "d": "something", "e": ""}
# Raw scores:  exact a1 b0 c1 d0 e1;  f1 a1 b0.8 (P 2/3, R 1) c1 d0 e1.


def test_evaluate_v2_without_na_probs():
    result = m.evaluate_v2(GOLD_V2, PREDS_V2)
    assert list(result) == ["exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total",
                            "NoAns_exact", "NoAns_f1", "NoAns_total"]
    assert result == pytest.approx({
        "exact": 100 * 3 / 5, "f1": 100 * 3.8 / 5, "total": 5,
        "HasAns_exact": 100 * 2 / 3, "HasAns_f1": 100 * 2.8 / 3, "HasAns_total": 3,
        "NoAns_exact": 50.0, "NoAns_f1": 50.0, "NoAns_total": 2})


NA_PROBS = {"a": 0.1, "b": 2.0, "c": 3.0, "d": 2.5, "e": -1.0}


def test_evaluate_v2_with_na_probs_and_default_threshold():
    result = m.evaluate_v2(GOLD_V2, PREDS_V2, NA_PROBS)
    # --na-prob-thresh 1.0: b, c, d (> 1.0) count as predicting "": b (answerable) -> 0,
    # c and d (unanswerable) -> 1.  exact = f1 = a1 b0 c1 d1 e1 = 4/5.
    # Best threshold, starting from "all null" = 2 points (c, d), in na_prob order:
    #   e(-1.0) +1 -> 3, a(0.1) +1 -> 4, b(2.0) +0 / +0.8, d(2.5) -1 ("something"), c(3.0) 0.
    #   exact: best 4 at 0.1;  f1: 4.8 at 2.0.
    assert result == pytest.approx({
        "exact": 80.0, "f1": 80.0, "total": 5,
        "HasAns_exact": 100 * 2 / 3, "HasAns_f1": 100 * 2 / 3, "HasAns_total": 3,
        "NoAns_exact": 100.0, "NoAns_f1": 100.0, "NoAns_total": 2,
        "best_exact": 80.0, "best_exact_thresh": 0.1, "best_f1": 96.0, "best_f1_thresh": 2.0})
    assert list(result)[-4:] == ["best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh"]


def test_na_prob_thresh_is_strict_and_configurable():
    # Nothing is above 3.0 (c = 3.0 is not), so the raw scores stand.
    result = m.evaluate_v2(GOLD_V2, PREDS_V2, NA_PROBS, na_prob_thresh=3.0)
    assert result["exact"] == pytest.approx(60.0) and result["f1"] == pytest.approx(76.0)
    assert result["best_f1"] == pytest.approx(96.0)  # the search ignores na_prob_thresh


def test_best_threshold_ties_follow_na_prob_order():
    # x: unanswerable with a non-empty answer (-1), y: answerable and right (+1), same value.
    gold = {"x": [], "y": ["yes"]}
    predictions = {"x": "no", "y": "yes"}
    exact, _ = m.raw_scores_v2(gold, predictions)
    has = {"x": False, "y": True}
    # Start 1 (x counted right as null). x then y: 0, 1 -> never above 1: 50%, thresh 0.0.
    assert m.find_best_thresh(predictions, exact, {"x": 0.5, "y": 0.5}, has) == (50.0, 0.0)
    # y then x: 2 (best, at 0.5), then 1.
    assert m.find_best_thresh(predictions, exact, {"y": 0.5, "x": 0.5}, has) == (100.0, 0.5)


def test_best_threshold_when_answering_none_is_best():
    gold, predictions, has = {"x": []}, {"x": "no"}, {"x": False}
    exact, _ = m.raw_scores_v2(gold, predictions)
    # Official: 0.0 (which would answer x at odds -1); none_thresh gives a usable value.
    assert m.find_best_thresh(predictions, exact, {"x": -1.0}, has) == (100.0, 0.0)
    assert m.find_best_thresh(predictions, exact, {"x": -1.0}, has,
                              none_thresh=-2.0) == (100.0, -2.0)


def test_v2_missing_predictions_are_left_out():
    messages = []
    result = m.evaluate_v2({"a": ["x"], "b": []}, {"a": "x"}, warn=messages.append)
    assert messages == ["Missing prediction for b"]
    assert result["total"] == 1 and result["exact"] == 100.0
    assert result["HasAns_total"] == 1 and result["NoAns_total"] == 0


def test_v2_na_probs_must_cover_the_predictions():
    with pytest.raises(ValueError, match="'b'"):
        m.evaluate_v2({"a": ["x"], "b": []}, {"a": "x", "b": ""}, {"a": 0.0})


def test_gold_answers_from_official_json():
    data = [{"title": "t", "paragraphs": [{"context": "c", "qas": [
        {"id": "1", "question": "?", "answers": [{"text": "A", "answer_start": 0}]},
        {"id": "2", "question": "?", "answers": [], "is_impossible": True}]}]}]
    assert m.gold_answers(data) == {"1": ["A"], "2": []}
