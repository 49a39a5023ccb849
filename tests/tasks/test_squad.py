"""SQuAD v1.1 / v2.0: reader, windows, offsets, decoding, null threshold, files, TFDS, samples."""

import json
import logging
import os

import numpy as np
import pytest

from kerasbert.data.tokenization import WordPieceTokenizer
from kerasbert.errors import InputError
from kerasbert.tasks import base, squad
from kerasbert.tasks.squad import (NO_SPAN_ODDS, Answer, SquadExample, doc_windows,
                                   get_final_text, max_context_masks)

REAL_DEV = "/work/shared/data/squad/dev-v1.1-part-a.json"


@pytest.fixture(scope="module")
def tokenizer(uncased_vocab):
    return WordPieceTokenizer(uncased_vocab, do_lower_case=True)


def example(question, context, answers=(), qid="q", impossible=False):
    """answers: [(text, start)]; start None = the first occurrence of text."""
    answers = tuple(Answer(t, context.index(t) if s is None else s) for t, s in answers)
    return SquadExample(guid=f"dev-{qid}", text_a=question, text_b=context, qas_id=qid,
                        answers=answers, is_impossible=impossible,
                        label=answers[0].text if answers else "")


def pieces(tokenizer, ids):
    return " ".join(tokenizer.ids_to_tokens(ids)).replace(" ##", "")


# ---- windows and max context ------------------------------------------------------------------

def test_windows_by_hand():
    # 300 pieces, 100 per window, stride 64: starts 0, 64, 128, 192 (ends 291), then 256 holds
    # the last 44 and ends the passage.
    assert doc_windows(300, 100, 64) == [(0, 100), (64, 100), (128, 100), (192, 100), (256, 44)]
    # A stride longer than a window: windows follow each other without a gap.
    assert doc_windows(250, 100, 128) == [(0, 100), (100, 100), (200, 50)]
    assert doc_windows(100, 100, 128) == [(0, 100)]
    assert doc_windows(0, 100, 128) == []
    with pytest.raises(ValueError):
        doc_windows(10, 0, 128)


def test_max_context_by_hand():
    windows = doc_windows(10, 6, 3)
    assert windows == [(0, 6), (3, 6), (6, 4)]
    # score = min(left, right) + 0.01 * length.  Piece 3: w0 min(3,2)+.06 = 2.06 > w1 .06.
    # Piece 4: w0 min(4,1)+.06 = 1.06 = w1 min(1,4)+.06: a tie, the first window keeps it.
    # Piece 5: w1 2.06 > w0 .06.  Piece 7: w1 min(4,1)+.06 = 1.06 > w2 min(1,2)+.04 = 1.04.
    # Piece 8: w2 min(2,1)+.04 = 1.04 > w1 .06.
    owners = [[0, 1, 2, 3, 4], [5, 6, 7], [8, 9]]
    for (start, length), mask, owned in zip(windows, max_context_masks(windows), owners):
        assert [start + i for i in np.flatnonzero(mask)] == owned


# ---- features --------------------------------------------------------------------------------

NUMBERS = " ".join(str(i) for i in range(25))  # 25 one-piece words


def numbers_features(tokenizer, answer="13 14", **kw):
    context = NUMBERS
    ex = example("what number?", context, [(answer, context.index(" " + answer + " ") + 1)])
    # [CLS] what number ? [SEP] = 5, + final [SEP]: 16 - 6 = 10 passage pieces per window.
    return squad.build_features([ex], tokenizer, 16, doc_stride=4, **kw)


def test_windows_and_labels_of_a_long_passage(tokenizer):
    f = numbers_features(tokenizer)
    assert list(f.extra["window_start"]) == [0, 4, 8, 12, 16]
    assert list(f.extra["window_length"]) == [10, 10, 10, 10, 9]
    assert list(f.extra["passage_offset"]) == [5] * 5
    # "13 14" = pieces 13-14: whole in windows 2 (8..17) and 3 (12..21) only.
    # Row position = piece - window start + 5.
    assert f.labels.tolist() == [[0, 0], [0, 0], [10, 11], [6, 7], [0, 0]]
    assert f.labels.dtype == np.int32
    row = f.inputs["token_ids"][2]
    assert tokenizer.ids_to_tokens(row) == (
        ["[CLS]", "what", "number", "?", "[SEP]"] + [str(i) for i in range(8, 18)] + ["[SEP]"])
    assert f.inputs["segment_ids"][4].tolist() == [0] * 5 + [1] * 10 + [0]
    assert f.inputs["padding_mask"][4].tolist() == [1] * 15 + [0]
    assert {k: v.dtype for k, v in f.inputs.items()} == {k: np.int32 for k in f.inputs}


def test_question_is_cut_to_max_query_length(tokenizer):
    f = numbers_features(tokenizer, max_query_length=1)
    assert tokenizer.ids_to_tokens(f.inputs["token_ids"][0][:4]) == ["[CLS]", "what", "[SEP]", "0"]
    # 16 - 1 - 3 = 12 passage pieces per window now.
    assert list(f.extra["window_length"])[:2] == [12, 12]
    # 5 - 3 special tokens - 3 question pieces leaves nothing for the passage.
    with pytest.raises(InputError, match="--max_seq_length=5 leaves no room"):
        squad.build_features(f.examples, tokenizer, 5)


TRICKY = ("Le  café “Zürich”, founded in (1887), served naïve   crème brûlée to the "
          "philosopher Søren Kierkegård")


def test_answer_offsets_on_tricky_text(tokenizer, caplog):
    cases = [  # (answer, start, expected pieces at the label, expected decoded text)
        ("Zürich", None, "zurich", "Zürich"),           # in curly quotes, before a comma
        ("1887", None, "1887", "1887"),                   # in parentheses
        ("naïve   crème", None, "naive creme", "naïve crème"),  # several spaces, accents
        ("Kierkegård", None, "kierkegard", "Kierkegård"),  # the passage's last word
        ("afé", None, "cafe", "café"),                     # part of a word: the whole word
    ]
    examples = [example("who?", TRICKY, [(t, s)], qid=f"q{i}") for i, (t, s, _, _) in
                enumerate(cases)]
    # Text not found at its answer_start (no umlaut): counted, reported, kept with [CLS].
    examples.append(example("who?", TRICKY, [("Zurich", TRICKY.index("Zürich"))], qid="bad"))
    with caplog.at_level(logging.WARNING, logger="kerasbert.tasks.squad"):
        f = squad.build_features(examples, tokenizer, 64)
    assert "1 of 6 gold answers could not be located" in caplog.text and "bad" in caplog.text
    assert f.extra["unlocated_answers"] == [("bad", 0)] and f.extra["num_answers"] == 6
    assert len(f.labels) == 6  # one window each
    for row, (_, _, expected, _) in enumerate(cases):
        start, end = f.labels[row]
        assert pieces(tokenizer, f.inputs["token_ids"][row][start: end + 1]) == expected
    assert f.labels[5].tolist() == [0, 0]

    # Decoding the gold positions gives back the original text (casing, accents), cut at
    # the answer's own pieces, whitespace single.
    logits = np.full(f.inputs["token_ids"].shape + (2,), -5.0, np.float32)
    for row, (start, end) in enumerate(f.labels):
        logits[row, start, 0] = logits[row, end, 1] = 5.0
    decoded = squad.decode(logits, f)
    assert [decoded.predictions[f"q{i}"] for i in range(5)] == [c[3] for c in cases]


# ---- decoding ---------------------------------------------------------------------------------

def one_window(tokenizer, version_2=False):
    """Passage "0 1 ... 9" after [CLS] what number ? [SEP]: piece k sits at position 5 + k."""
    ex = example("what number?", " ".join(str(i) for i in range(10)), [("5", None)])
    return squad.build_features([ex], tokenizer, 16)


def flat_logits(f, value=-10.0):
    return np.full(f.inputs["token_ids"].shape + (2,), value, np.float32)


def test_end_before_start_is_never_chosen(tokenizer):
    f = one_window(tokenizer)
    logits = flat_logits(f)
    logits[0, 5 + 5, 0] = 9.0   # best start: "5"
    logits[0, 5 + 3, 1] = 9.0   # best end "3" comes before it
    logits[0, 5 + 6, 1] = 1.0   # the best end after it
    decoded = squad.decode(logits, f)
    assert decoded.predictions["q"] == "5 6"
    best = decoded.nbest["q"][0]
    assert (best["text"], best["start_logit"], best["end_logit"]) == ("5 6", 9.0, 1.0)


def test_answer_length_limit(tokenizer):
    f = one_window(tokenizer)
    logits = flat_logits(f)
    logits[0, 5 + 5, 0] = 9.0
    logits[0, 5 + 7, 1] = 9.0   # "5 6 7": 3 pieces
    logits[0, 5 + 6, 1] = 1.0
    assert squad.decode(logits, f, max_answer_length=3).predictions["q"] == "5 6 7"
    assert squad.decode(logits, f, max_answer_length=2).predictions["q"] == "5 6"


def test_tokens_outside_the_passage_are_never_chosen(tokenizer):
    f = one_window(tokenizer)
    logits = flat_logits(f)
    logits[0, :5, :] = 50.0     # [CLS] and the question
    logits[0, 15, :] = 50.0     # the closing [SEP]
    logits[0, 5 + 2, 0] = logits[0, 5 + 2, 1] = 1.0
    decoded = squad.decode(logits, f)
    assert decoded.predictions["q"] == "2"
    assert all(e["text"] for e in decoded.nbest["q"])  # v1: no empty answer in the n-best


def test_a_start_is_taken_only_from_its_max_context_window(tokenizer):
    f = numbers_features(tokenizer)  # windows start at 0, 4, 8, 12, 16
    logits = flat_logits(f)
    # Row 3 (pieces 12..21): "13 14 15" scores 20, but piece 13 belongs to row 2.
    logits[3, 13 - 12 + 5, 0] = logits[3, 15 - 12 + 5, 1] = 10.0
    # Row 2 (pieces 8..17): "13 14" scores 10.
    logits[2, 13 - 8 + 5, 0] = logits[2, 14 - 8 + 5, 1] = 5.0
    decoded = squad.decode(logits, f)
    assert decoded.predictions["q"] == "13 14"
    assert max(e["start_logit"] for e in decoded.nbest["q"]) == 5.0


def test_v2_null_decision_and_odds(tokenizer):
    f = numbers_features(tokenizer)
    logits = flat_logits(f)
    logits[:, 0, :] = [[3, 3], [1, 1], [2, 2], [4, 4], [5, 5]]  # s_null = min = 2 (row 1)
    logits[2, 13 - 8 + 5, 0] = logits[2, 14 - 8 + 5, 1] = 0.75  # best span: 1.5
    # odds = s_null - best = 2 - 1.5 = 0.5
    decoded = squad.decode(logits, f, version_2=True, null_score_diff_threshold=0.0)
    assert decoded.null_odds["q"] == 0.5 and decoded.predictions["q"] == ""
    assert decoded.best_non_null["q"] == "13 14"
    null = [e for e in decoded.nbest["q"] if e["text"] == ""]
    assert len(null) == 1 and (null[0]["start_logit"], null[0]["end_logit"]) == (1.0, 1.0)
    assert sum(e["probability"] for e in decoded.nbest["q"]) == pytest.approx(1.0)
    # The threshold is strict: odds 0.5 > 0.5 is false, so the span is answered.
    assert squad.decode(logits, f, version_2=True,
                        null_score_diff_threshold=0.5).predictions["q"] == "13 14"


def test_all_null_nbest_never_crashes(tokenizer):
    f = one_window(tokenizer)
    logits = flat_logits(f)
    logits[0, 0, :] = 100.0  # with n_best_size 1, the only start and end is [CLS]
    v2 = squad.decode(logits, f, n_best_size=1, version_2=True)
    assert v2.predictions["q"] == "" and v2.null_odds["q"] == NO_SPAN_ODDS
    assert v2.nbest["q"] == [{"text": "", "probability": 1.0, "start_logit": 100.0,
                              "end_logit": 100.0}]
    v1 = squad.decode(logits, f, n_best_size=1)
    assert v1.predictions["q"] == ""
    assert v1.nbest["q"] == [{"text": "", "probability": 1.0, "start_logit": 0.0, "end_logit": 0.0}]


def test_get_final_text():
    # The prediction is placed inside the basic-tokenized words, then mapped back by
    # counting non-space characters.
    assert get_final_text("steve smith", "Steve Smith's", "steve smith ' s") == "Steve Smith"
    assert get_final_text("zurich", "“Zürich”,", "“ zurich ” ,") == "Zürich"
    assert get_final_text("[UNK]", "A ☃", "a ☃") == "A ☃"  # not found: the whole words
    # A soft hyphen (dropped by BERT's cleaning) changes the length: the whole words.
    assert get_final_text("abc", "xAbc\u00adx", "xabcx") == "xAbc\u00adx"


def test_decoding_maps_back_to_original_words(tokenizer):
    context = "It was Steve Smith's bat."
    f = squad.build_features([example("whose bat?", context, [("Steve Smith", None)])],
                             tokenizer, 32)
    start, end = f.labels[0]
    assert pieces(tokenizer, f.inputs["token_ids"][0][start: end + 1]) == "steve smith"
    logits = flat_logits(f)
    logits[0, start, 0] = logits[0, end, 1] = 5.0
    assert squad.decode(logits, f).predictions["q"] == "Steve Smith"


def test_outputs_of_trimmed_batches_are_padded_back(tokenizer):
    f = numbers_features(tokenizer)
    logits = flat_logits(f)
    logits[2, 10, 0] = logits[2, 11, 1] = 5.0
    batches = [logits[:2, :12], logits[2:, :16]]  # batches trimmed to their own length
    assert squad.decode(batches, f).predictions == squad.decode(logits, f).predictions
    with pytest.raises(ValueError, match="5 feature rows"):
        squad.decode(logits[:3], f)


# ---- evaluation, files and the tuned threshold ------------------------------------------------

def test_v1_evaluate_writes_files(tokenizer, tmp_path):
    task = squad.SquadTask(version_2=False)
    f = numbers_features(tokenizer)
    logits = flat_logits(f)
    logits[2, 10, 0] = logits[2, 11, 1] = 5.0
    metrics = task.evaluate(logits, f, str(tmp_path), "dev")
    assert metrics == {"exact_match": 100.0, "f1": 100.0}
    assert sorted(os.listdir(tmp_path)) == ["nbest_predictions.json", "predictions.json"]
    with open(tmp_path / "predictions.json", encoding="utf-8") as fh:
        assert json.load(fh) == {"q": "13 14"}
    with open(tmp_path / "nbest_predictions.json", encoding="utf-8") as fh:
        nbest = json.load(fh)["q"]
    assert len(nbest) == 20
    assert list(nbest[0]) == ["text", "probability", "start_logit", "end_logit"]
    path = task.write_predictions(logits, f, str(tmp_path), "dev")
    assert path == str(tmp_path / "predictions.json")


def test_v2_evaluate_finds_the_best_threshold(tokenizer, tmp_path):
    """Three questions on one passage: a and b answerable, c not. With threshold 0, a is
    wrongly answered "" (odds +1); the search finds the threshold that answers it, and
    decoding again with that threshold gives the best F1."""
    context = " ".join(str(i) for i in range(10))
    examples = [example("what number?", context, [("3", None)], qid="a"),
                example("what number?", context, [("7", None)], qid="b"),
                example("what number?", context, [], qid="c", impossible=True)]
    f = squad.build_features(examples, tokenizer, 16)
    logits = flat_logits(f)
    for row, (piece, null) in enumerate([(3, 2.0), (7, -4.0), (5, 3.0)]):
        logits[row, 5 + piece, :] = 0.5      # span score 1.0
        logits[row, 0, :] = null / 2          # s_null
    # odds = s_null - 1: a +1.0 (-> ""), b -5.0 (-> "7"), c +2.0 (-> "").
    task = squad.SquadTask(version_2=True)
    metrics = task.evaluate(logits, f, str(tmp_path), "dev")
    # a wrong (""), b right, c right: 2/3.  Best: start 1 (c), b(-5) +1 -> 2, a(+1) +1 -> 3
    # (best, thresh 1.0), c(+2): the best non-null answer "5" for c costs 1 -> 2.
    assert metrics == pytest.approx({
        "exact": 200 / 3, "f1": 200 / 3, "total": 3,
        "HasAns_exact": 50.0, "HasAns_f1": 50.0, "HasAns_total": 2,
        "NoAns_exact": 100.0, "NoAns_f1": 100.0, "NoAns_total": 1,
        "best_exact": 100.0, "best_exact_thresh": 1.0, "best_f1": 100.0, "best_f1_thresh": 1.0})
    assert sorted(os.listdir(tmp_path)) == ["nbest_predictions.json", "null_odds.json",
                                            "predictions.json"]
    with open(tmp_path / "null_odds.json") as fh:
        assert json.load(fh) == pytest.approx({"a": 1.0, "b": -5.0, "c": 2.0})
    task.configure(null_score_diff_threshold=metrics["best_f1_thresh"])
    assert task.evaluate(logits, f)["f1"] == pytest.approx(metrics["best_f1"])


def test_v2_best_threshold_when_answering_nothing_is_best(tokenizer):
    context = " ".join(str(i) for i in range(10))
    f = squad.build_features([example("what number?", context, [], qid="c", impossible=True)],
                             tokenizer, 16)
    logits = flat_logits(f)
    logits[0, 5 + 5, :] = 0.5   # span "5": 1.0
    logits[0, 0, :] = -1.0      # s_null -2: odds -3, the span is answered (wrongly)
    task = squad.SquadTask(version_2=True)
    metrics = task.evaluate(logits, f)
    # The official script would say best_f1_thresh 0.0, which still answers "5".
    assert (metrics["f1"], metrics["best_f1"], metrics["best_f1_thresh"]) == (0.0, 100.0, -4.0)
    task.configure(null_score_diff_threshold=metrics["best_f1_thresh"])
    assert task.evaluate(logits, f)["f1"] == 100.0


# ---- the task object --------------------------------------------------------------------------

def test_task_attributes_and_options():
    v1, v2 = squad.TASKS["squad_v1"], squad.TASKS["squad_v2"]
    assert (v1.kind, v1.default_head, v1.dev_splits, v1.test_splits) == (
        base.SPAN, "span", ("dev",), ())
    recipe = [(t.default_learning_rate, t.default_train_batch_size, t.default_num_train_epochs)
              for t in (v1, v2)]
    assert recipe == [(5e-5, 32, 3.0), (5e-5, 48, 2.0)]
    assert (v1.main_metric, v2.main_metric) == ("f1", "best_f1")
    assert (v1.doc_stride, v1.max_query_length, v1.n_best_size, v1.max_answer_length,
            v1.null_score_diff_threshold) == (128, 64, 20, 30, 0.0)
    task = squad.SquadTask(True).configure(doc_stride=64, null_score_diff_threshold=-1.5)
    assert (task.doc_stride, task.null_score_diff_threshold) == (64, -1.5)
    task.configure(doc_stride=None)  # an unset flag keeps the value
    assert task.doc_stride == 64
    with pytest.raises(InputError, match="--doc_stride=0"):
        task.configure(doc_stride=0)
    with pytest.raises(InputError, match="unknown option 'stride'"):
        task.configure(stride=3)


# ---- reader errors ----------------------------------------------------------------------------

GOOD = """{"version": "1.1", "data": [
 {"title": "T", "paragraphs": [
  {"context": "Paris is big.", "qas": [
   {"id": "q1", "question": "What?", "answers": [{"text": "Paris", "answer_start": 0}]},
   {"id": "q2", "question": "How?", "answers": [{"text": "big", "answer_start": 9}]}
  ]}
 ]}
]}
"""


def write(folder, name, text):
    path = os.path.join(folder, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def test_reads_the_official_format(tmp_path):
    write(tmp_path, "dev-v1.1.json", GOOD)
    examples = squad.TASKS["squad_v1"].read_examples(str(tmp_path), "dev")
    assert [(e.qas_id, e.question, e.context, e.answers, e.guid, e.title) for e in examples] == [
        ("q1", "What?", "Paris is big.", (Answer("Paris", 0),), "dev-q1", "T"),
        ("q2", "How?", "Paris is big.", (Answer("big", 9),), "dev-q2", "T")]


@pytest.mark.parametrize("old, new, line, message", [
    ('"q2", ', '"q2" ', 5, "malformed JSON: Expecting ',' delimiter"),
    ('"id": "q2", ', "", 5, "data[0].paragraphs[0].qas[1]: missing key 'id'"),
    ('"answer_start": 9', '"answer_start": 13', 5,
     "data[0].paragraphs[0].qas[1].answers[0]: answer_start 13 is outside its context "
     "(13 characters)"),
    ('"answer_start": 9', '"answer_start": "9"', 5, "'answer_start' must be an integer, not str"),
    ('"id": "q2"', '"id": "q1"', 5, "duplicate id 'q1' (first at data[0].paragraphs[0].qas[0])"),
    ('"context": "Paris is big.", ', "", 3, "data[0].paragraphs[0]: missing key 'context'"),
    ('"answers": [{"text": "big", "answer_start": 9}]', '"answers": []', 5, "'q2' has no answers"),
    ('"How?",', '"How?", "is_impossible": true,', 5, "read this file with --task=squad_v2"),
    ('"data"', '"articles"', 1, "top level: missing key 'data'"),
])
def test_reader_errors_name_file_line_and_place(tmp_path, old, new, line, message):
    assert old in GOOD
    path = write(tmp_path, "dev-v1.1.json", GOOD.replace(old, new, 1))
    with pytest.raises(InputError) as e:
        squad.TASKS["squad_v1"].read_examples(str(tmp_path), "dev")
    assert str(e.value).startswith(f"{path}:{line}: ")
    assert message in str(e.value)


def test_reader_file_and_split_errors(tmp_path):
    task = squad.TASKS["squad_v2"]
    write(tmp_path, "dev-v1.1.json", GOOD)
    with pytest.raises(InputError, match=r"dev-v2\.0\.json: no such file; .* has: dev-v1\.1\.json"):
        task.read_examples(str(tmp_path), "dev")
    with pytest.raises(InputError, match="unknown split 'test'"):
        task.read_examples(str(tmp_path), "test")
    with open(tmp_path / "train-v2.0.json", "wb") as f:
        f.write(b'{"data": [\n"\xff"]}')
    with pytest.raises(InputError, match=r"train-v2\.0\.json:2: not valid UTF-8"):
        task.read_examples(str(tmp_path), "train")


def test_v2_reads_unanswerable_questions(tmp_path, tokenizer):
    text = GOOD.replace('"answers": [{"text": "big", "answer_start": 9}]',
                        '"answers": [], "is_impossible": true, '
                        '"plausible_answers": [{"text": "big", "answer_start": 9}]')
    write(tmp_path, "dev-v2.0.json", text)
    a, b = squad.TASKS["squad_v2"].read_examples(str(tmp_path), "dev")
    assert (a.is_impossible, b.is_impossible) == (False, True)
    assert b.answers == () and b.plausible_answers == (Answer("big", 9),)
    f = squad.TASKS["squad_v2"].featurize([a, b], tokenizer, 32)
    assert f.labels[1].tolist() == [0, 0]  # unanswerable: [CLS]
    assert f.labels[0].tolist() != [0, 0]


# ---- TFDS ---------------------------------------------------------------------------------------

def fake_tfds(monkeypatch, rows, calls):
    import tensorflow as tf
    import tensorflow_datasets as tfds

    answers_spec = {"text": tf.TensorSpec([None], tf.string),
                    "answer_start": tf.TensorSpec([None], tf.int32)}
    spec = {"id": tf.TensorSpec([], tf.string), "title": tf.TensorSpec([], tf.string),
            "context": tf.TensorSpec([], tf.string), "question": tf.TensorSpec([], tf.string),
            "answers": answers_spec}
    if "is_impossible" in rows[0]:
        spec.update(is_impossible=tf.TensorSpec([], tf.bool), plausible_answers=answers_spec)

    def load(name, split, data_dir=None, download=True):
        calls.append((name, split, data_dir, download))
        return tf.data.Dataset.from_generator(lambda: iter(rows), output_signature=spec)

    monkeypatch.setattr(tfds, "load", load)


def tfds_answers(*pairs):
    return {"text": [t for t, _ in pairs],
            "answer_start": np.array([s for _, s in pairs], np.int32)}


def test_read_tfds_v2_field_mapping(monkeypatch):
    rows = [dict(id="q1", title="T", context="Paris is big.", question="What?",
                 answers=tfds_answers(("Paris", 0), ("Paris", 0)), is_impossible=False,
                 plausible_answers=tfds_answers()),
            dict(id="q2", title="T", context="Paris is big.", question="Who?",
                 answers=tfds_answers(), is_impossible=True,
                 plausible_answers=tfds_answers(("big", 9)))]
    calls = []
    fake_tfds(monkeypatch, rows, calls)
    a, b = squad.TASKS["squad_v2"].read_tfds("dev", "/tfds")
    assert calls == [("squad/v2.0", "validation", "/tfds", False)]
    assert (a.qas_id, a.question, a.context, a.answers, a.is_impossible, a.title) == (
        "q1", "What?", "Paris is big.", (Answer("Paris", 0),) * 2, False, "T")
    assert (b.answers, b.is_impossible, b.plausible_answers) == ((), True, (Answer("big", 9),))


def test_read_tfds_v1_and_errors(monkeypatch):
    rows = [dict(id="q1", title="T", context="Paris is big.", question="What?",
                 answers=tfds_answers(("Paris", 0)))]
    calls = []
    fake_tfds(monkeypatch, rows, calls)
    (a,) = squad.TASKS["squad_v1"].read_tfds("train", None)
    assert calls[0][:2] == ("squad/v1.1", "train") and a.answers == (Answer("Paris", 0),)
    rows[0]["answers"] = tfds_answers(("Paris", 99))
    with pytest.raises(InputError, match="'q1' has an answer outside its context"):
        squad.TASKS["squad_v1"].read_tfds("train", None)


def test_read_tfds_not_prepared(tmp_path):
    with pytest.raises(InputError, match=r"TFDS squad/v1\.1 \(validation\) is not prepared in"):
        squad.TASKS["squad_v1"].read_tfds("dev", str(tmp_path))


# ---- bundled samples --------------------------------------------------------------------------

def test_bundled_samples(tokenizer):
    for name in ("squad_v1", "squad_v2"):
        task = squad.TASKS[name]
        train = task.read_examples(task.sample_dir(), "train")
        dev = task.read_examples(task.sample_dir(), "dev")
        assert 50 <= len(train) <= 100 and 15 <= len(dev) <= 40
        assert any(len(e.answers) > 1 for e in dev)  # several gold answers, as official dev
        impossible = sum(e.is_impossible for e in train + dev)
        if name == "squad_v2":
            assert 0.25 <= impossible / len(train + dev) <= 0.4
            assert all(e.plausible_answers for e in train + dev if e.is_impossible)
        else:
            assert impossible == 0
        f = task.featurize(dev, tokenizer, 128)
        assert f.extra["unlocated_answers"] == []
        assert np.bincount(f.extra["example_index"]).max() >= 3  # a passage needs 3+ windows


@pytest.mark.large
def test_real_dev_answers_are_located(tokenizer):
    if not os.path.exists(REAL_DEV):
        pytest.skip(f"{REAL_DEV} not present")
    examples = squad.read_squad_file(REAL_DEV, version_2=False)
    f = squad.TASKS["squad_v1"].featurize(examples, tokenizer, 384)
    unlocated = len(f.extra["unlocated_answers"])
    print(f"{unlocated} of {f.extra['num_answers']} answers not located; {len(f.labels)} rows")
    assert unlocated <= 0.001 * f.extra["num_answers"]
    # Decoding the gold positions reproduces nearly every gold text: what remains are
    # answers longer than 30 pieces or cut inside a word, as with BERT's own code.
    rows = np.arange(len(f.labels))
    logits = np.full(f.inputs["token_ids"].shape + (2,), -5.0, np.float32)
    logits[rows, f.labels[:, 0], 0] = logits[rows, f.labels[:, 1], 1] = 5.0
    metrics = squad.TASKS["squad_v1"].evaluate(logits, f)
    assert metrics["exact_match"] > 99.0
