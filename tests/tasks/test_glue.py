"""GLUE readers, metrics, submissions, TFDS mapping and the bundled samples."""

import filecmp
import logging
import os
import subprocess
import sys

import numpy as np
import pytest

from kerasbert.errors import InputError
from kerasbert.tasks import base, glue
from kerasbert.tasks.glue import TASKS, read_tfds, sample_dir, write_test_predictions

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REAL_GLUE = "/work/shared/data/glue"
T = "\t"


def tsv(*rows):
    """Rows of cells -> file text (rows may also be ready-made strings)."""
    return "".join((r if isinstance(r, str) else T.join(r)) + "\n" for r in rows)


def write(folder, name, text, encoding="utf-8"):
    path = os.path.join(folder, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding=encoding, newline="") as f:
        f.write(text)
    return path


def triples(examples):
    return [(e.guid, e.text_a, e.text_b, e.label) for e in examples]


# ---- the nine readers, on hand-written files in the official layouts ---------------------

MNLI_HEAD = ["index", "promptID", "pairID", "genre", "sentence1_binary_parse",
             "sentence2_binary_parse", "sentence1_parse", "sentence2_parse", "sentence1",
             "sentence2"]
STSB_HEAD = ["index", "genre", "filename", "year", "old_index", "source1", "source2",
             "sentence1", "sentence2"]

READER_CASES = [
    # CoLA train: no header; source, label, "*" mark, sentence. A quote stays literal.
    ("cola", "train", tsv(["ab01", "1", "", 'She said "hello" to us.'],
                          ["ab01", "0", "*", "Us to hello said she."]),
     [("train-0", 'She said "hello" to us.', None, "1"),
      ("train-1", "Us to hello said she.", None, "0")]),
    # CoLA test does have a header.
    ("cola", "test", tsv(["index", "sentence"], ["0", "The cat slept."], ["1", 'A "quoted word.']),
     [("test-0", "The cat slept.", None, None), ("test-1", 'A "quoted word.', None, None)]),
    # SST-2: lower-cased phrases with a trailing space, kept as they are.
    ("sst2", "dev", tsv(["sentence", "label"], ["a joyous ride . ", "1"], ["it 's \" dull ", "0"]),
     [("dev-0", "a joyous ride . ", None, "1"), ("dev-1", 'it \'s " dull ', None, "0")]),
    ("sst2", "test", tsv(["index", "sentence"], ["0", "fine . "], ["1", "bad . "]),
     [("test-0", "fine . ", None, None), ("test-1", "bad . ", None, None)]),
    # MRPC: the official files start with a BOM; an unbalanced quote must not eat a row.
    ("mrpc", "train", "\ufeff" + tsv(["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"],
                                     ["1", "11", "12", '"The deal is done.', "It closed."],
                                     ["0", "13", "14", "Sales fell.", "Rain is due."]),
     [("train-0", '"The deal is done.', "It closed.", "1"),
      ("train-1", "Sales fell.", "Rain is due.", "0")]),
    ("mrpc", "test", tsv(["index", "#1 ID", "#2 ID", "#1 String", "#2 String"],
                         ["0", "1", "2", "A.", "B."]),
     [("test-0", "A.", "B.", None)]),
    # STS-B: ten columns, the score last, found by name.
    ("stsb", "train", tsv(STSB_HEAD + ["score"],
                          ["0", "g", "f", "2012", "0001", "none", "none", "A dog runs.",
                           "A dog is running.", "4.750"],
                          ["1", "g", "f", "2012", "0002", "none", "none", "X.", "Y.", "0"]),
     [("train-0", "A dog runs.", "A dog is running.", 4.75), ("train-1", "X.", "Y.", 0.0)]),
    ("stsb", "test", tsv(STSB_HEAD, ["7", "g", "f", "2017", "0001", "none", "none", "P.", "Q."]),
     [("test-7", "P.", "Q.", None)]),
    # QQP: id column; test keeps only id and the questions.
    ("qqp", "train", tsv(["id", "qid1", "qid2", "question1", "question2", "is_duplicate"],
                         ["5", "1", "2", "How do I swim?", "How can I learn to swim?", "1"]),
     [("train-5", "How do I swim?", "How can I learn to swim?", "1")]),
    ("qqp", "test", tsv(["id", "question1", "question2"], ["0", "Why?", "How?"]),
     [("test-0", "Why?", "How?", None)]),
    # MNLI: train has label1 + gold_label, dev five annotator labels; gold_label is read.
    ("mnli", "train", tsv(MNLI_HEAD + ["label1", "gold_label"],
                          ["0", "9", "9e", "fiction", "( a )", "( b )", "(ROOT a)", "(ROOT b)",
                           "A man sleeps.", "A person sleeps.", "entailment", "entailment"]),
     [("train-0", "A man sleeps.", "A person sleeps.", "entailment")]),
    ("mnli", "dev_mismatched", tsv(MNLI_HEAD + [f"label{k}" for k in range(1, 6)] + ["gold_label"],
                                   ["3", "9", "9c", "letters", "x", "y", "x", "y", "It rains.",
                                    "It is dry.", "contradiction", "neutral", "contradiction",
                                    "contradiction", "contradiction", "contradiction"]),
     [("dev_mismatched-3", "It rains.", "It is dry.", "contradiction")]),
    ("mnli", "test_matched", tsv(MNLI_HEAD, ["0", "1", "1n", "slate", "x", "y", "x", "y",
                                             "P.", "H."]),
     [("test_matched-0", "P.", "H.", None)]),
    ("qnli", "dev", tsv(["index", "question", "sentence", "label"],
                        ["0", "Who won?", "Ann won.", "entailment"],
                        ["1", "Who won?", "It rained.", "not_entailment"]),
     [("dev-0", "Who won?", "Ann won.", "entailment"),
      ("dev-1", "Who won?", "It rained.", "not_entailment")]),
    # RTE with its columns in another order: found by header name.
    ("rte", "train", tsv(["label", "sentence2", "index", "sentence1"],
                         ["not_entailment", "H.", "4", "P."]),
     [("train-4", "P.", "H.", "not_entailment")]),
    ("wnli", "dev", tsv(["index", "sentence1", "sentence2", "label"],
                        ["0", "Tom met Ann because she called.", "Ann called.", "1"]),
     [("dev-0", "Tom met Ann because she called.", "Ann called.", "1")]),
]


@pytest.mark.parametrize("task,split,text,expected", READER_CASES,
                         ids=[f"{c[0]}-{c[1]}" for c in READER_CASES])
def test_reader_official_layout(tmp_path, task, split, text, expected):
    write(tmp_path, f"{split}.tsv", text)
    assert triples(TASKS[task].read_examples(str(tmp_path), split)) == expected


def test_reader_accepts_glue_root_and_crlf(tmp_path):
    write(tmp_path, "RTE/dev.tsv", "index\tsentence1\tsentence2\tlabel\r\n0\tP.\tH.\tentailment\r\n")
    examples = TASKS["rte"].read_examples(str(tmp_path), "dev")  # the GLUE root folder
    assert triples(examples) == [("dev-0", "P.", "H.", "entailment")]


def test_qqp_skips_short_rows_like_the_official_readers(tmp_path, caplog):
    path = write(tmp_path, "train.tsv", tsv(
        ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"],
        ["1", "1", "2", "Is it new?", "Is it recent?", "1"],
        ["2", "3", "4", "A question broken by a newline"],  # what real QQP train contains
        ["continued?", "Other?", "0"],
        ["3", "5", "6", "Why?", "When?", "0"]))
    with caplog.at_level(logging.WARNING):
        examples = TASKS["qqp"].read_examples(str(tmp_path), "train")
    assert [e.guid for e in examples] == ["train-1", "train-3"]
    assert "skipped 2 row(s)" in caplog.text and path in caplog.text


# ---- bad input: InputError naming file and line ------------------------------------------

RTE_HEAD = "index\tsentence1\tsentence2\tlabel\n"
BAD_CASES = [
    # (task, split, file bytes, expected line, words in the message)
    ("rte", "dev", (RTE_HEAD + "0\tP.\tH.\tentailment\n1\tP.\tH.\n").encode(), 3,
     ["expected 4", "found 3"]),
    ("rte", "dev", (RTE_HEAD + "0\tP.\tH.\tmaybe\n").encode(), 2,
     ["'maybe'", "entailment, not_entailment"]),
    ("cola", "train", b"s\t1\t\tFine.\ns\t2\t\tBad label.\n", 2, ["'2'", "0, 1"]),
    ("cola", "train", b"s\t1\t\tFine.\ns\t1\tFine too.\n", 2, ["expected 4", "found 3"]),
    ("stsb", "dev", ("\t".join(STSB_HEAD + ["score"]) + "\n"
                     + "0\tg\tf\ty\t0\tn\tn\tA.\tB.\tfive\n").encode(), 2, ["'five'"]),
    ("stsb", "dev", ("\t".join(STSB_HEAD + ["score"]) + "\n"
                     + "0\tg\tf\ty\t0\tn\tn\tA.\tB.\t7.5\n").encode(), 2, ["'7.5'", "0 to 5"]),
    ("rte", "dev", RTE_HEAD.encode() + b"0\tP.\tH.\tentailment\n1\tcaf\xe9\tH.\tentailment\n", 3,
     ["UTF-8"]),
    ("rte", "dev", b"index\tsentence1\tsentence2\tgold\n0\tP.\tH.\tentailment\n", 1,
     ["missing column", "'label'"]),
    ("qqp", "test", b"index\tquestion1\tquestion2\n0\tA?\tB?\n", 1, ["'id'"]),
    ("mnli", "train", b"index\tsentence1\tsentence2\tgold_label\n0\tA.\tB.\tentailment\n"
                      b"1\tA.\tB.\t-\n", 3, ["'-'", "contradiction, entailment, neutral"]),
]


@pytest.mark.parametrize("task,split,data,line,words", BAD_CASES)
def test_bad_input_names_file_and_line(tmp_path, task, split, data, line, words):
    path = tmp_path / f"{split}.tsv"
    path.write_bytes(data)
    with pytest.raises(InputError) as info:
        TASKS[task].read_examples(str(tmp_path), split)
    message = str(info.value)
    assert message.startswith(f"{path}:{line}: ")
    for word in words:
        assert word in message


@pytest.mark.parametrize("data", [b"", RTE_HEAD.encode(), b"\n\n"])
def test_empty_split_is_an_error(tmp_path, data):
    path = tmp_path / "train.tsv"
    path.write_bytes(data)
    with pytest.raises(InputError, match="empty file|no examples") as info:
        TASKS["rte"].read_examples(str(tmp_path), "train")
    assert str(info.value).startswith(f"{path}: ")


def test_missing_file_lists_the_folder(tmp_path):
    write(tmp_path, "train.tsv", RTE_HEAD)
    write(tmp_path, "notes.txt", "")
    with pytest.raises(InputError) as info:
        TASKS["rte"].read_examples(str(tmp_path), "dev")
    message = str(info.value)
    assert message.startswith(f"{tmp_path / 'dev.tsv'}: ")
    assert "notes.txt, train.tsv" in message and os.path.join(str(tmp_path), "RTE") in message


def test_unknown_split(tmp_path):
    with pytest.raises(InputError, match="dev_matched, dev_mismatched"):
        TASKS["mnli"].read_examples(str(tmp_path), "dev")


# ---- the table ---------------------------------------------------------------------------

def test_task_table():
    assert list(TASKS) == ["cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli"]
    assert {n: t.main_metric for n, t in TASKS.items()} == {
        "cola": "matthews_corrcoef", "sst2": "accuracy", "mrpc": "f1", "stsb": "pearson",
        "qqp": "f1", "mnli": "accuracy", "qnli": "accuracy", "rte": "accuracy",
        "wnli": "accuracy"}
    assert TASKS["mnli"].dev_splits == ("dev_matched", "dev_mismatched")
    assert TASKS["mnli"].test_splits == ("test_matched", "test_mismatched")
    assert TASKS["stsb"].kind == base.REGRESSION and TASKS["stsb"].label_list is None
    assert TASKS["stsb"].num_outputs == 1 and TASKS["mnli"].num_outputs == 3
    for task in TASKS.values():
        assert isinstance(task, base.Task)
        assert (task.default_learning_rate, task.default_train_batch_size,
                task.default_num_train_epochs) == (2e-5, 32, 3.0)
    assert TASKS["mnli"].submission_name("test_mismatched") == "MNLI-mm.tsv"
    assert TASKS["sst2"].submission_name("test") == "SST-2.tsv"


# ---- bundled samples ---------------------------------------------------------------------

SAMPLE_SIZES = {"train": 160, "dev": 48, "test": 16}
MNLI_SIZES = {"train": 162, "dev_matched": 48, "dev_mismatched": 48, "test_matched": 18,
              "test_mismatched": 18}


@pytest.mark.parametrize("name", list(TASKS))
def test_bundled_sample_reads(name):
    task = TASKS[name]
    folder = sample_dir(name)
    assert os.path.basename(folder) == task.folder
    for split, size in (MNLI_SIZES if name == "mnli" else SAMPLE_SIZES).items():
        examples = task.read_examples(folder, split)
        assert len(examples) == size
        assert len({e.guid for e in examples}) == size
        labels = [e.label for e in examples]
        if split in task.test_splits:
            assert labels == [None] * size
        elif task.label_list is None:
            assert all(0.0 <= x <= 5.0 for x in labels) and np.std(labels) > 1.0
        else:  # balanced: every label equally often
            counts = [labels.count(label) for label in task.label_list]
            assert counts == [size // len(task.label_list)] * len(task.label_list)


def test_bundled_samples_equal_generator_output(tmp_path):
    subprocess.run([sys.executable, "-m", "tools.samples.make_glue_samples",
                    "--out", str(tmp_path)], check=True, timeout=60, cwd=REPO)
    bundled = os.path.dirname(sample_dir("cola"))
    folders = sorted(os.listdir(tmp_path))
    assert folders == sorted(t.folder for t in TASKS.values())
    for folder in folders:
        names = sorted(os.listdir(tmp_path / folder))
        assert sorted(n for n in os.listdir(os.path.join(bundled, folder)) if n.endswith(".tsv")) == names
        match, mismatch, errors = filecmp.cmpfiles(tmp_path / folder, os.path.join(bundled, folder),
                                                   names, shallow=False)
        assert (mismatch, errors) == ([], []), f"{folder}: regenerate with python -m tools.samples.make_glue_samples"


def test_bundled_samples_are_small():
    root = os.path.dirname(sample_dir("cola"))
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(root) for f in fs)
    assert total < 400_000


# ---- the real GLUE files -----------------------------------------------------------------

@pytest.mark.large
@pytest.mark.parametrize("name,train,dev", [("sst2", 67349, 872), ("mrpc", 3668, 408),
                                            ("rte", 2490, 277), ("stsb", 5749, 1500)])
def test_real_glue_files(name, train, dev):
    task = TASKS[name]
    if not os.path.isdir(os.path.join(REAL_GLUE, task.folder)):
        pytest.skip(f"no {REAL_GLUE}/{task.folder}")
    assert len(task.read_examples(REAL_GLUE, "train")) == train
    examples = task.read_examples(os.path.join(REAL_GLUE, task.folder), "dev")
    assert len(examples) == dev
    if task.label_list:
        assert {e.label for e in examples} == set(task.label_list)


# ---- metrics, against arithmetic done by hand --------------------------------------------

PRED = [1, 0, 1, 1, 0]
GOLD = [1, 0, 0, 1, 1]
# Confusion (positive class 1): TP = rows 0, 3 -> 2; TN = row 1 -> 1; FP = row 2 -> 1;
# FN = row 4 -> 1.


def test_accuracy_and_f1():
    m = TASKS["mrpc"].compute_metrics(np.array(PRED), np.array(GOLD))
    assert set(m) == {"accuracy", "f1"}
    assert m["accuracy"] == pytest.approx(3 / 5)  # rows 0, 1, 3 right
    # precision = 2 / (2 + 1), recall = 2 / (2 + 1), F1 = 2PR / (P + R) = 2/3
    assert m["f1"] == pytest.approx(2 / 3)
    assert all(type(v) is float for v in m.values())


def test_matthews_corrcoef():
    m = TASKS["cola"].compute_metrics(PRED, GOLD)
    # (TP*TN - FP*FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)) = (2 - 1) / sqrt(3*3*2*2) = 1/6
    assert m["matthews_corrcoef"] == pytest.approx(1 / 6)
    assert m["accuracy"] == pytest.approx(0.6)
    constant = TASKS["cola"].compute_metrics([1, 1, 1, 1], GOLD[:4])
    assert constant["matthews_corrcoef"] == 0.0


def test_accuracy_three_classes_and_logits():
    # MNLI ids: 0 contradiction, 1 entailment, 2 neutral; 3 of 4 right.
    m = TASKS["mnli"].compute_metrics(np.array([0, 1, 2, 2]), np.array([0, 1, 2, 1]))
    assert m == {"accuracy": 0.75}
    logits = np.array([[2.0, -1.0], [0.1, 0.3], [-5.0, 5.0]])  # argmax: 0, 1, 1
    assert TASKS["sst2"].compute_metrics(logits, [0, 1, 0]) == {"accuracy": pytest.approx(2 / 3)}


def test_stsb_correlations():
    p = [1.0, 2.0, 3.0, 4.0]
    y = [2.0, 5.0, 4.0, 9.0]
    m = TASKS["stsb"].compute_metrics(np.array(p), np.array(y).reshape(-1, 1))
    # Pearson: p - 2.5 = [-1.5, -.5, .5, 1.5], y - 5 = [-3, 0, -1, 4];
    # sum of products = 4.5 + 0 - .5 + 6 = 10; sum p^2 = 5; sum y^2 = 26 -> 10 / sqrt(130)
    assert m["pearson"] == pytest.approx(10 / 130 ** 0.5)
    # Spearman: ranks [1, 2, 3, 4] vs [1, 3, 2, 4], d^2 sum = 2 -> 1 - 6*2 / (4*15) = 0.8
    assert m["spearman"] == pytest.approx(0.8)
    assert set(m) == {"pearson", "spearman"} and all(type(v) is float for v in m.values())


def test_stsb_constant_predictions_give_zero_not_nan():
    m = TASKS["stsb"].compute_metrics([2.5, 2.5, 2.5], [1.0, 3.0, 4.0])
    assert m == {"pearson": 0.0, "spearman": 0.0}


# ---- submission files --------------------------------------------------------------------

def test_write_test_predictions_classification(tmp_path):
    task = TASKS["mnli"]
    examples = [base.Example("test_matched-7", "P.", "H."), base.Example("test_matched-2", "P.", "H.")]
    path = tmp_path / "out" / task.submission_name("test_matched")
    write_test_predictions(task, examples, np.array([1, 2]), str(path))
    assert path.read_text() == "index\tprediction\n7\tentailment\n2\tneutral\n"


def test_write_test_predictions_stsb_clips_and_rounds(tmp_path):
    examples = [base.Example(f"test-{i}", "A.", "B.") for i in range(3)]
    path = tmp_path / "STS-B.tsv"
    write_test_predictions("stsb", examples, np.array([[5.7], [-0.2], [3.14159]]), str(path))
    assert path.read_text() == "index\tprediction\n0\t5.000\n1\t0.000\n2\t3.142\n"


def test_submission_round_trip_from_a_test_file(tmp_path):
    write(tmp_path, "test.tsv", tsv(["index", "sentence"], ["10", "good . "], ["11", "bad . "]))
    examples = TASKS["sst2"].read_examples(str(tmp_path), "test")
    write_test_predictions("sst2", examples, [1, 0], str(tmp_path / "SST-2.tsv"))
    assert (tmp_path / "SST-2.tsv").read_text() == "index\tprediction\n10\t1\n11\t0\n"


# ---- TFDS --------------------------------------------------------------------------------

def test_read_tfds_maps_fields_and_labels(monkeypatch):
    import tensorflow as tf
    import tensorflow_datasets as tfds

    calls = []

    def fake_load(name, split, data_dir, download):
        calls.append((name, split, data_dir, download))
        return tf.data.Dataset.from_tensor_slices({
            "premise": [b"A man sleeps.", b"It rains.", "Caf\u00e9.".encode()],
            "hypothesis": [b"A person sleeps.", b"It is dry.", b"A bar."],
            # TFDS's MNLI class order: entailment, neutral, contradiction
            "label": np.array([0, 2, 1], np.int64),
            "idx": np.array([5, 6, 7], np.int32),
        })

    monkeypatch.setattr(tfds, "load", fake_load)
    examples = read_tfds("mnli", "dev_mismatched", "/some/dir")
    assert calls == [("glue/mnli", "validation_mismatched", "/some/dir", False)]
    assert triples(examples) == [
        ("dev_mismatched-5", "A man sleeps.", "A person sleeps.", "entailment"),
        ("dev_mismatched-6", "It rains.", "It is dry.", "contradiction"),
        ("dev_mismatched-7", "Caf\u00e9.", "A bar.", "neutral")]

    def fake_stsb(name, split, data_dir, download):
        calls.append((name, split))
        return tf.data.Dataset.from_tensor_slices({
            "sentence1": [b"A.", b"C."], "sentence2": [b"B.", b"D."],
            "label": np.array([-1.0, -1.0], np.float32), "idx": np.array([0, 1], np.int32)})

    monkeypatch.setattr(tfds, "load", fake_stsb)
    assert triples(read_tfds(TASKS["stsb"], "test")) == [("test-0", "A.", "B.", None),
                                                         ("test-1", "C.", "D.", None)]

    def fake_wnli(name, split, data_dir, download):
        calls.append((name, split))
        return tf.data.Dataset.from_tensor_slices({
            "sentence1": [b"S."], "sentence2": [b"H."], "label": np.array([1], np.int64)})

    monkeypatch.setattr(tfds, "load", fake_wnli)
    # TFDS WNLI says not_entailment/entailment for the TSV's 0/1; no idx -> row number
    assert triples(read_tfds("wnli", "dev")) == [("dev-0", "S.", "H.", "1")]
    assert calls[-2:] == [("glue/stsb", "test"), ("glue/wnli", "validation")]


def test_read_tfds_not_prepared(monkeypatch):
    import tensorflow_datasets as tfds

    def not_there(*args, **kwargs):
        raise AssertionError("Dataset glue: could not find data in /x.")

    monkeypatch.setattr(tfds, "load", not_there)
    with pytest.raises(InputError, match="not prepared.*tfds build glue/rte"):
        read_tfds("rte", "train", "/x")


def test_sample_dir_unknown_task():
    with pytest.raises(InputError, match="cola, sst2"):
        sample_dir("squad")
    assert glue.sample_dir("rte").endswith(os.path.join("samples", "glue", "RTE"))
