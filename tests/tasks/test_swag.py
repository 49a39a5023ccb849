"""SWAG: the official CSV reader, n-choice features, the V·C_k scorer, accuracy and files."""

import csv
import filecmp
import os
import subprocess
import sys

import numpy as np
import pytest

from kerasbert.errors import InputError
from kerasbert.tasks import base
from kerasbert.tasks.swag import TASK, ChoiceExample, SwagTask

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REAL_SWAG = "/work/shared/data/swag"

HEADER = ",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3"

# The official layout, with what the csv module must handle: commas and doubled quotes inside
# quoted fields, and a quoted field running over two physical lines (row 1 spans lines 3-4).
TRAIN = (
    HEADER + ",label\n"
    '7,vid-a,101,"A man, hat in hand, waves. He","A man, hat in hand, waves.",He,gold,'
    'smiles.,"eats a ""big"" pie.",runs.,sleeps.,0\n'
    '8,vid-b,102,"A girl reads. She",A girl reads.,She,gen,jumps.,"turns\n'
    'the page.",cries.,sings.,1\n'
)


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def tokenizer(uncased_vocab):
    from kerasbert.data.tokenization import WordPieceTokenizer

    return WordPieceTokenizer(uncased_vocab, do_lower_case=True)


# ---- the task's declared recipe ----------------------------------------------------------

def test_task_attributes_follow_the_paper():
    assert isinstance(TASK, SwagTask) and TASK.name == "swag"
    assert TASK.kind == base.MULTIPLE_CHOICE and TASK.default_head == "cls_linear"
    assert TASK.num_outputs == 1  # one score V·C_k per sequence
    assert (TASK.default_learning_rate, TASK.default_train_batch_size,
            TASK.default_num_train_epochs) == (2e-5, 16, 3.0)
    assert TASK.dev_splits == ("val",) and TASK.test_splits == ("test",)
    assert TASK.main_metric == "accuracy"


# ---- reader -------------------------------------------------------------------------------

def test_reader_official_layout(tmp_path):
    write(tmp_path, "train.csv", TRAIN)
    examples = TASK.read_examples(str(tmp_path), "train")
    assert examples == [
        ChoiceExample(guid="train-7", text_a="A man, hat in hand, waves.", label=0,
                      endings=("He smiles.", 'He eats a "big" pie.', "He runs.", "He sleeps."),
                      example_id="7"),
        ChoiceExample(guid="train-8", text_a="A girl reads.", label=1,
                      endings=("She jumps.", "She turns\nthe page.", "She cries.", "She sings."),
                      example_id="8"),
    ]


def test_reader_test_split_has_no_labels(tmp_path):
    write(tmp_path, "test.csv", HEADER + "\n0,v,5,A b. C,A b.,C,gold,d.,e.,f.,g.\n"
          "1,v,6,H i. J,H i.,J,gold,k.,l.,m.,n.\n")
    examples = TASK.read_examples(str(tmp_path), "test")
    assert [(e.guid, e.label, e.endings[3]) for e in examples] == [("test-0", None, "C g."),
                                                                   ("test-1", None, "J n.")]
    assert TASK.encode_labels(examples) is None


@pytest.mark.parametrize("n", [3, 5])
def test_number_of_choices_comes_from_the_header(tmp_path, n):
    # No leading index column here: ids fall back to fold-ind.
    endings = ",".join(f"ending{k}" for k in range(n))
    row = ",".join(f"e{k}." for k in range(n))
    write(tmp_path, "val.csv", f"fold-ind,sent1,sent2,{endings},label\n"
                               f"40,Ctx one.,It,{row},{n - 1}\n41,Ctx two.,,{row},0\n")
    examples = TASK.read_examples(str(tmp_path), "val")
    assert [len(e.endings) for e in examples] == [n, n]
    assert examples[0].endings[-1] == f"It e{n - 1}." and examples[1].endings[0] == "e0."
    assert [e.guid for e in examples] == ["val-40", "val-41"]
    assert TASK.encode_labels(examples).tolist() == [n - 1, 0]


def test_ids_fall_back_to_row_numbers(tmp_path):
    write(tmp_path, "val.csv", "sent1,sent2,ending0,ending1,label\nA.,B,c.,d.,1\nE.,F,g.,h.,0\n")
    assert [e.example_id for e in TASK.read_examples(str(tmp_path), "val")] == ["0", "1"]


def test_reader_accepts_bom_crlf_and_trailing_blank_lines(tmp_path):
    text = ("\ufeff" + TRAIN.replace("\n", "\r\n")) + "\r\n\r\n"
    (tmp_path / "train.csv").write_bytes(text.encode("utf-8"))
    examples = TASK.read_examples(str(tmp_path), "train")
    assert [e.guid for e in examples] == ["train-7", "train-8"]
    assert examples[1].endings[1] == "She turns\r\nthe page."  # inside quotes: kept as is


LABELLED = "sent1,sent2,ending0,ending1,ending2,label\n"


@pytest.mark.parametrize("name,text,line,words", [
    ("val.csv", LABELLED + "A.,B,c.,d.,e.,0\nA.,B,c.,  ,e.,0\n", 3, "ending1 is empty"),
    ("val.csv", LABELLED + "A.,B,c.,d.,e.,3\n", 2, "label '3'.*from 0 to 2"),
    ("val.csv", LABELLED + "A.,B,c.,d.,e.,-1\n", 2, "label '-1'"),
    ("val.csv", LABELLED + "A.,B,c.,d.,e.,1.0\n", 2, "label '1.0'"),
    ("val.csv", LABELLED + "A.,B,c.,d.,e.,\n", 2, "label ''"),
    ("val.csv", LABELLED + "A.,B,c.,d.,e.,0\nA.,B,c.,d.,0\n", 3, "expected 6 .*found 5"),
    ("val.csv", LABELLED + '"A,\nB",B,c.,d.,e.,0,7\n', 2, "expected 6 .*found 7"),
    ("val.csv", "sent1,ending0,ending1,ending2,label\nA.,c.,d.,e.,0\n", 1,
     "missing column.*'sent2'"),
    ("val.csv", "sent1,sent2,ending0,ending1,ending2\nA.,B,c.,d.,e.\n", 1,
     "missing column.*'label'"),
    ("test.csv", "sent1,sent2,ending0,ending2\nA.,B,c.,e.\n", 1, "ending2 but no ending1"),
    ("val.csv", "sent1,sent2,ending0,label\nA.,B,c.,0\n", 1, "missing column.*'ending1'"),
    ("val.csv", LABELLED + 'A.,B,c.,d.,"e.,0\n', 2, "malformed CSV"),
    ("val.csv", LABELLED + 'A.,B,"c."x,d.,e.,0\n', 2, "malformed CSV"),
])
def test_bad_input_names_file_and_line(tmp_path, name, text, line, words):
    write(tmp_path, name, text)
    split = name[:-4]
    with pytest.raises(InputError, match=f"{name}:{line}: .*{words}"):
        TASK.read_examples(str(tmp_path), split)


@pytest.mark.parametrize("text", ["", "\n\n", LABELLED])
def test_empty_file_or_no_rows(tmp_path, text):
    write(tmp_path, "train.csv", text)
    with pytest.raises(InputError, match="train.csv: (empty file|no examples)"):
        TASK.read_examples(str(tmp_path), "train")


def test_not_utf8_names_the_line(tmp_path):
    (tmp_path / "train.csv").write_bytes(LABELLED.encode() + b"A.,B,c\xff.,d.,e.,0\n")
    with pytest.raises(InputError, match=r"train.csv:2: not valid UTF-8"):
        TASK.read_examples(str(tmp_path), "train")


def test_missing_file_and_unknown_split(tmp_path):
    write(tmp_path, "train.csv", TRAIN)
    with pytest.raises(InputError, match=r"val.csv: no such file; .* has: train.csv"):
        TASK.read_examples(str(tmp_path), "val")
    with pytest.raises(InputError, match="unknown split 'dev'"):
        TASK.read_examples(str(tmp_path), "dev")


# ---- features -----------------------------------------------------------------------------

def test_features_of_a_hand_checked_example(tokenizer):
    example = ChoiceExample(guid="val-0", text_a="A man waves.", label=2,
                            endings=("He smiles.", "He eats pie.", "Someone opens the door."))
    f = TASK.featurize([example], tokenizer, max_seq_length=12)
    assert {k: (v.shape, v.dtype) for k, v in f.inputs.items()} == {
        k: ((1, 3, 12), np.int32) for k in ("token_ids", "segment_ids", "padding_mask")}
    assert f.labels.tolist() == [2] and f.labels.dtype == np.int32
    assert f.extra["num_choices"] == 3
    tokens = [tokenizer.ids_to_tokens(row) for row in f.inputs["token_ids"][0]]
    # [CLS] a man waves . [SEP] = 6 tokens of segment 0, then the ending and [SEP] in segment 1.
    assert tokens[0] == ["[CLS]", "a", "man", "waves", ".", "[SEP]", "he", "smiles", ".",
                         "[SEP]", "[PAD]", "[PAD]"]
    assert f.inputs["segment_ids"][0, 0].tolist() == [0] * 6 + [1] * 4 + [0, 0]
    assert f.inputs["padding_mask"][0, 0].tolist() == [1] * 10 + [0, 0]
    # 4 + 5 word pieces + 3 specials = 12: fits exactly, nothing truncated.
    assert tokens[2] == ["[CLS]", "a", "man", "waves", ".", "[SEP]", "someone", "opens", "the",
                         "door", ".", "[SEP]"]
    assert f.inputs["padding_mask"][0, 2].tolist() == [1] * 12
    assert f.extra["num_truncated"] == 0


def test_longest_first_truncation(tokenizer):
    # Context 8 pieces, ending 2 pieces, room for 12 - 3 = 9: the context loses one piece.
    example = ChoiceExample(guid="x", text_a="one two three four five six seven eight",
                            endings=("nine ten", "eleven"))
    f = TASK.featurize([example], tokenizer, max_seq_length=12)
    first = tokenizer.ids_to_tokens(f.inputs["token_ids"][0, 0])
    assert first == ["[CLS]", "one", "two", "three", "four", "five", "six", "seven", "[SEP]",
                     "nine", "ten", "[SEP]"]
    assert f.inputs["segment_ids"][0, 0].tolist() == [0] * 9 + [1] * 3
    assert f.extra["num_truncated"] == 1  # the second choice (8 + 1 + 3 = 12) fits
    assert f.labels is None


def test_featurize_in_chunks_equals_one_batch(tmp_path, tokenizer):
    write(tmp_path, "train.csv", TRAIN)
    examples = TASK.read_examples(str(tmp_path), "train") * 3
    whole = TASK.featurize(examples, tokenizer, 24)
    chunked = TASK.featurize(examples, tokenizer, 24, batch_size=2)
    for k in whole.inputs:
        np.testing.assert_array_equal(whole.inputs[k], chunked.inputs[k])
    assert whole.labels.tolist() == [0, 1] * 3


# ---- the scorer: cls_linear with one output, regrouped by TaskModel ----------------------

def test_model_scores_are_v_dot_c_per_choice(tokenizer):
    import keras_hub

    from kerasbert.heads.classifier import ClsClassifier
    from kerasbert.model.task_model import TaskModel

    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=tokenizer.vocab_size, num_layers=2, num_heads=2, hidden_dim=32,
        intermediate_dim=64, max_sequence_length=32)
    head = ClsClassifier(1, dropout=0.1, seed=3)
    model = TaskModel(backbone, head)
    examples = [ChoiceExample(guid=str(i), text_a=f"A person number {i} sits.", label=i % 4,
                              endings=("He stands.", "He sleeps on it.", "She eats.", "They go."))
                for i in range(3)]
    inputs = TASK.featurize(examples, tokenizer, 16).inputs
    logits = np.asarray(model(inputs, training=False))
    assert logits.shape == (3, 4)
    # By hand: the pooled output C_k of every flattened sequence, then V·C_k + b.
    flat = {k: v.reshape(12, 16) for k, v in inputs.items()}
    pooled = np.asarray(backbone(flat)["pooled_output"])
    kernel, bias = (np.asarray(w) for w in head.output_dense.weights)
    assert kernel.shape == (32, 1)
    expected = (pooled @ kernel[:, 0] + bias[0]).reshape(3, 4)
    np.testing.assert_allclose(logits, expected, rtol=1e-5, atol=1e-6)
    # Row i of the logits belongs to example i: its choices are rows 4i..4i+3 of the flat batch.
    assert not np.allclose(logits[0], logits[1])


# ---- metrics and prediction files ---------------------------------------------------------

def _features(n_choices=3):
    examples = [ChoiceExample(guid=f"val-{i}", text_a="c", label=label,
                              endings=("a",) * n_choices, example_id=str(10 + i))
                for i, label in enumerate([0, 2, 1, 2])]
    return base.Features(inputs={}, labels=TASK.encode_labels(examples), examples=examples,
                         extra={"num_choices": n_choices})


LOGITS = np.array([[2.0, 0.0, 0.0],  # -> 0, gold 0: right
                   [0.0, 1.0, 3.0],  # -> 2, gold 2: right
                   [1.0, 0.0, 0.0],  # -> 0, gold 1: wrong
                   [0.0, 0.0, 5.0]])  # -> 2, gold 2: right


def test_accuracy_by_hand(tmp_path):
    assert TASK.evaluate(LOGITS, _features()) == {"accuracy": 0.75}
    constant = TASK.compute_metrics(np.array([0, 0, 0, 0]), np.array([0, 2, 1, 2]))
    assert constant == {"accuracy": 0.25}
    assert not os.listdir(tmp_path)  # nothing written without an output dir


def test_evaluate_writes_val_predictions(tmp_path):
    metrics = TASK.evaluate(LOGITS.reshape(12, 1), _features(), str(tmp_path), "val")
    assert metrics == {"accuracy": 0.75}  # flattened [n*choices, 1] scores are regrouped
    rows = list(csv.reader(open(tmp_path / "val_predictions.csv")))
    assert rows[0] == ["id", "prediction", "prob_0", "prob_1", "prob_2"]
    assert [r[:2] for r in rows[1:]] == [["10", "0"], ["11", "2"], ["12", "0"], ["13", "2"]]
    # Row 0 by hand: softmax(2, 0, 0) = e^2 / (e^2 + 2), 1 / (e^2 + 2), 1 / (e^2 + 2).
    e2 = np.exp(2.0)
    np.testing.assert_allclose([float(x) for x in rows[1][2:]],
                               [e2 / (e2 + 2), 1 / (e2 + 2), 1 / (e2 + 2)], atol=1e-6)
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


def test_write_test_predictions(tmp_path):
    features = _features(n_choices=3)
    path = TASK.write_predictions(LOGITS, features, str(tmp_path), "test")
    assert path == str(tmp_path / "test_predictions.csv")
    rows = list(csv.DictReader(open(path)))
    assert [r["prediction"] for r in rows] == ["0", "2", "0", "2"]
    for row in rows:
        assert sum(float(row[f"prob_{k}"]) for k in range(3)) == pytest.approx(1.0, abs=1e-5)
    # Large scores do not overflow: softmax(0, 0, 5) = 1 / (2 + e^5) twice, then e^5 / (2 + e^5).
    e5 = np.exp(5.0)
    assert float(rows[3]["prob_2"]) == pytest.approx(e5 / (2 + e5), abs=1e-6)
    with pytest.raises(ValueError, match="3 choices"):
        TASK.write_predictions(np.zeros([4, 4]), features, str(tmp_path), "test")


# ---- TFDS ---------------------------------------------------------------------------------

def test_read_tfds_explains_there_is_no_swag_builder():
    with pytest.raises(InputError, match="no 'swag' dataset.*--data_dir"):
        TASK.read_tfds("train", None)


def test_read_tfds_maps_fields(monkeypatch):
    import tensorflow as tf
    import tensorflow_datasets as tfds

    monkeypatch.setattr(tfds, "list_builders", lambda **kw: ["swag"])
    calls = []

    def fake_load(name, split, data_dir, download):
        calls.append((name, split, data_dir, download))
        return tf.data.Dataset.from_tensor_slices({
            "sent1": [b"A dog barks.", b"A cat naps."], "sent2": [b"It", b"The cat"],
            "ending0": [b"runs.", b"wakes."], "ending1": [b"sits.", b"purrs."],
            "ending2": [b"flies.", b"swims."], "label": [1, -1], "video-id": [b"v1", b"v2"]})

    monkeypatch.setattr(tfds, "load", fake_load)
    examples = TASK.read_tfds("val", "/prepared")
    assert calls == [("swag", "validation", "/prepared", False)]
    assert [(e.guid, e.text_a, e.endings, e.label) for e in examples] == [
        ("val-0", "A dog barks.", ("It runs.", "It sits.", "It flies."), 1),
        ("val-1", "A cat naps.", ("The cat wakes.", "The cat purrs.", "The cat swims."), None)]

    def not_prepared(*args, **kwargs):
        raise AssertionError("Dataset swag: could not find data in /x")

    monkeypatch.setattr(tfds, "load", not_prepared)
    with pytest.raises(InputError, match="not prepared.*tfds build swag"):
        TASK.read_tfds("train", "/x")


# ---- the bundled sample -------------------------------------------------------------------

def test_bundled_sample_reads():
    sizes = {"train": 300, "val": 80, "test": 20}
    for split, size in sizes.items():
        examples = TASK.read_examples(TASK.sample_dir(), split)
        assert len(examples) == size and all(len(e.endings) == 4 for e in examples)
        if split != "test":
            labels = TASK.encode_labels(examples)
            assert np.bincount(labels, minlength=4).min() >= size // 8  # every index is gold
    contexts = [e.text_a for s in sizes for e in TASK.read_examples(TASK.sample_dir(), s)]
    assert len(set(contexts)) == len(contexts)  # no context repeats, within or across splits


def test_bundled_sample_equals_generator_output(tmp_path):
    subprocess.run([sys.executable, "-m", "tools.samples.make_swag_samples",
                    "--out", str(tmp_path)], check=True, timeout=60, cwd=REPO)
    names = ["test.csv", "train.csv", "val.csv"]
    assert sorted(os.listdir(tmp_path)) == names
    match, mismatch, errors = filecmp.cmpfiles(tmp_path, TASK.sample_dir(), names, shallow=False)
    assert (mismatch, errors) == ([], []), "regenerate with python -m tools.samples.make_swag_samples"


def test_bundled_sample_is_small():
    root = TASK.sample_dir()
    assert sum(os.path.getsize(os.path.join(root, f)) for f in os.listdir(root)) < 200_000


# ---- the real SWAG files ------------------------------------------------------------------

@pytest.mark.large
def test_real_swag_files():
    if not os.path.isfile(os.path.join(REAL_SWAG, "val.csv")):
        pytest.skip(f"no {REAL_SWAG}/val.csv")
    examples = TASK.read_examples(REAL_SWAG, "val")
    assert len(examples) == 20006 and all(len(e.endings) == 4 for e in examples)
    assert set(TASK.encode_labels(examples).tolist()) == {0, 1, 2, 3}
    if os.path.isfile(os.path.join(REAL_SWAG, "train.csv")):
        assert len(TASK.read_examples(REAL_SWAG, "train")) == 73546
    if os.path.isfile(os.path.join(REAL_SWAG, "test.csv")):
        assert len(TASK.read_examples(REAL_SWAG, "test")) == 20005
