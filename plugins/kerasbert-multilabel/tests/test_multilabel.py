"""The multi_label kind, the multi_label_linear head and the topic_tags task, piece by piece
(test_multilabel_run.py runs them together through kerasbert.run.execute)."""

import os
import subprocess
import sys

import numpy as np
import pytest

from kerasbert import plugins
from kerasbert.errors import InputError
from kerasbert.tasks.base import Example, Features

# As kerasbert hands the task out: its registry gives it its kind, which decodes its outputs.
TASK = plugins.registry().task("topic_tags")

LABELS = ("food", "money", "music", "sports", "weather")


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


# --- the kind -------------------------------------------------------------------------------

def test_loss_is_the_mean_sigmoid_cross_entropy_over_the_labels():
    from kerasbert_multilabel.kind import MultiLabelKind

    logits = np.array([[2.0, -1.0, 0.0], [-3.0, 0.5, 4.0]], np.float32)
    labels = np.array([[1, 0, 1], [0, 0, 1]], np.float32)
    # By hand: -[y log s(x) + (1 - y) log(1 - s(x))], averaged over the 3 labels.
    s = _sigmoid(logits.astype(np.float64))
    expected = -(labels * np.log(s) + (1 - labels) * np.log(1 - s)).mean(axis=1)
    # Row 0: -log s(2), -log(1 - s(-1)) = -log s(1), -log s(0) = log 2.
    np.testing.assert_allclose(expected[0], (np.log1p(np.exp(-2)) + np.log1p(np.exp(-1))
                                             + np.log(2)) / 3, rtol=1e-12)
    loss = np.asarray(MultiLabelKind().per_example_loss(labels, logits))
    assert loss.shape == (2,) and loss.dtype == np.float32
    np.testing.assert_allclose(loss, expected, rtol=1e-6)
    # int 0/1 labels give the same loss
    np.testing.assert_allclose(MultiLabelKind().per_example_loss(labels.astype(np.int32), logits),
                               expected, rtol=1e-6)


def test_loss_is_float32_under_mixed_precision():
    import tensorflow as tf

    from kerasbert_multilabel.kind import MultiLabelKind

    logits = tf.constant([[20.0, -20.0, 0.1]], tf.float16)
    loss = MultiLabelKind().per_example_loss(tf.constant([[0.0, 1.0, 1.0]]), logits)
    assert loss.dtype == tf.float32
    s = _sigmoid(np.float64(0.1))
    # float16 would round log1p(exp(-20)) terms away; float32 keeps 20 + tiny exactly enough
    np.testing.assert_allclose(loss.numpy(), [(20 + 20 + 2 * np.log1p(np.exp(-20)) - np.log(s))
                                              / 3], rtol=1e-5)


def test_accuracy_counts_exact_matches():
    from kerasbert_multilabel.kind import MultiLabelKind

    kind = MultiLabelKind()
    logits = np.array([[1.0, -1.0], [1.0, 1.0], [-2.0, -0.5], [0.0, 3.0]], np.float32)
    labels = np.array([[1, 0], [1, 0], [0, 0], [1, 1]], np.float32)
    # row 3: logit 0 is probability 0.5, not above it: label 0 is not predicted
    assert kind.has_accuracy and kind.row_metrics and not kind.labels_per_token
    assert float(kind.correct_count(labels, logits)) == 2.0


def test_served_outputs_probabilities_mask_and_padded_label_names():
    import tensorflow as tf

    from kerasbert_multilabel.kind import MultiLabelKind

    logits = tf.constant([[1.0, -1.0, 2.0, -3.0, 0.0], [-1.0] * 5, [5.0] * 5])
    out = MultiLabelKind().serving.outputs(TASK, logits)
    np.testing.assert_allclose(out["probabilities"], _sigmoid(logits.numpy()), rtol=1e-6)
    assert out["probabilities"].dtype == tf.float32
    assert out["predicted"].dtype == tf.int32
    assert out["predicted"].numpy().tolist() == [[1, 0, 1, 0, 0], [0] * 5, [1] * 5]
    assert out["labels"].numpy().astype(str).tolist() == [
        ["food", "music", "", "", ""], [""] * 5, list(LABELS)]
    empty = MultiLabelKind().serving.outputs(TASK, tf.zeros([0, 5]))
    assert empty["labels"].shape == (0, 5)


def test_serving_encodes_one_text_as_training_does(uncased_tokenizer):
    import tensorflow as tf

    from kerasbert_multilabel.kind import MultiLabelKind

    texts = ["Maria played tennis.", "", "Café DÉJÀ VU " * 30]
    serving = MultiLabelKind().serving
    assert serving.text_inputs(TASK) == {"text": [None]}
    served = serving.encode(uncased_tokenizer, {"text": tf.constant(texts)}, 32)
    trained = TASK.featurize([Example(f"t-{i}", t) for i, t in enumerate(texts)],
                             uncased_tokenizer, 32).inputs
    for key, value in trained.items():
        np.testing.assert_array_equal(served[key].numpy(), value)


@pytest.fixture(scope="module")
def uncased_tokenizer():
    from kerasbert.data.tokenization import WordPieceTokenizer
    from kerasbert.model.encoders import default_vocab

    return WordPieceTokenizer(default_vocab(), do_lower_case=True)


# --- the head -------------------------------------------------------------------------------

def test_head_means_over_real_tokens_only():
    from kerasbert_multilabel.head import MultiLabelLinear

    head = MultiLabelLinear(3, dropout=0.0)
    sequence = np.array([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]], np.float32)
    features = {"sequence_output": sequence, "pooled_output": np.zeros([1, 2], np.float32),
                "padding_mask": np.array([[1, 1, 0]], np.int32)}
    out = np.asarray(head(features))
    kernel, bias = (np.asarray(w) for w in head.output_dense.weights)
    assert out.shape == (1, 3)
    np.testing.assert_allclose(out, np.array([[2.0, 3.0]]) @ kernel + bias, rtol=1e-6)
    cls = MultiLabelLinear(3, dropout=0.0, pooling="cls")
    cls(features)
    cls.output_dense.set_weights([kernel, bias])
    np.testing.assert_allclose(cls(features), np.array([[1.0, 2.0]]) @ kernel + bias, rtol=1e-6)


# --- registration ----------------------------------------------------------------------------

def test_kind_head_and_task_register_through_the_entry_point():
    from kerasbert import plugins
    from kerasbert.model.builder import check_head_fits

    plugins.registry.cache_clear()
    registry = plugins.registry()
    origin = "plugin distribution 'kerasbert-multilabel'"
    assert registry.kinds["multi_label"][1] == origin
    assert registry.heads["multi_label_linear"] == (registry.head("multi_label_linear"), origin)
    assert registry.head("multi_label_linear").kinds == ("multi_label",)
    task = registry.task("topic_tags")
    assert registry.tasks["topic_tags"][1] == origin
    assert registry.kind_of(task).name == "multi_label"
    assert task.default_head == "multi_label_linear" and task.num_outputs == 5
    check_head_fits(task, registry.head("multi_label_linear"))
    with pytest.raises(InputError, match="serves classification, regression, multiple_choice "
                                         "tasks, but --task=topic_tags is a multi_label task"):
        check_head_fits(task, registry.head("cls_linear"))
    assert not [p for p in registry.problems if "multilabel" in p]


def test_cli_lists_the_task():
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}
    result = subprocess.run([sys.executable, "-m", "kerasbert.main", "--list_tasks"],
                            capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = [line for line in result.stdout.splitlines() if line.split()[:1] == ["topic_tags"]]
    assert len(lines) == 1, result.stdout
    assert lines[0].endswith("[plugin distribution 'kerasbert-multilabel']")


# --- reading ----------------------------------------------------------------------------------

def test_bundled_sample_reads_with_labels_except_test():
    train = TASK.read_examples(TASK.sample_dir(), "train")
    dev = TASK.read_examples(TASK.sample_dir(), "dev")
    test = TASK.read_examples(TASK.sample_dir(), "test")
    assert (len(train), len(dev), len(test)) == (320, 80, 60)
    assert all(isinstance(e.label, tuple) for e in train + dev)
    assert all(e.label is None for e in test)
    assert {name for e in train for name in e.label} == set(LABELS)
    assert any(e.label == () for e in train)  # texts with no label exist
    assert train[0].guid == "train-0" and test[0].guid == "test-400"


def test_sample_generator_is_deterministic(tmp_path):
    """tools/make_sample.py rewrites exactly the bundled files."""
    import importlib.util
    import shutil

    tools = os.path.join(os.path.dirname(os.path.dirname(__file__)), "tools", "make_sample.py")
    copy = tmp_path / "plugin"
    (copy / "tools").mkdir(parents=True)
    shutil.copy(tools, copy / "tools" / "make_sample.py")
    spec = importlib.util.spec_from_file_location("make_sample", copy / "tools" / "make_sample.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main()
    for split in ("train", "dev", "test"):
        written = (copy / "kerasbert_multilabel" / "data" / f"{split}.tsv").read_text("utf-8")
        with open(os.path.join(TASK.sample_dir(), f"{split}.tsv"), encoding="utf-8") as f:
            assert written == f.read(), split


def _write(tmp_path, text, name="train.tsv"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_reader_parses_labels_ids_and_blank_lines(tmp_path):
    path = _write(tmp_path, "labels\ttext\tid\n"
                            "weather, food\tRain and pizza.\ta1\n"
                            "\n"
                            "\tNothing here.\ta2\r\n")
    examples = TASK.read_file(path, "train")
    assert examples == [Example("train-a1", "Rain and pizza.", label=("food", "weather")),
                        Example("train-a2", "Nothing here.", label=())]
    labels = TASK.encode_labels(examples)
    assert labels.dtype == np.float32
    np.testing.assert_array_equal(labels, [[1, 0, 0, 0, 1], [0, 0, 0, 0, 0]])
    # no id column: the row number from 0; a test split needs no labels column
    test = TASK.read_file(_write(tmp_path, "text\nA.\nB.\n", "test.tsv"), "test")
    assert [e.guid for e in test] == ["test-0", "test-1"] and TASK.encode_labels(test) is None


@pytest.mark.parametrize("content, line, message", [
    ("id\ttext\tlabels\n1\tok\tfood\n2\tbad\tfood,cooking\n", 3,
     "label 'cooking' is not a topic_tags label; expected some of food, money, music, "
     "sports, weather"),
    ("id\ttext\n1\tno labels column\tfood\n", 1,
     "missing column(s) 'labels' for topic_tags train; the header has: 'id', 'text' "
     "(expected id, text, labels)"),
    ("id\ttext\tlabels\n1\tok\tfood\n2\ttoo\tmany\tcolumns\n", 3,
     "expected 3 tab-separated columns as in the header, found 4"),
    ("id\ttext\tlabels\n1\tok\tfood,,music\n", 2, "empty label in 'food,,music'"),
    ("id\ttext\tlabels\n1\tok\tfood,food\n", 2, "a label is listed twice in 'food,food'"),
])
def test_bad_rows_are_one_error_naming_file_and_line(tmp_path, content, line, message):
    path = _write(tmp_path, content)
    with pytest.raises(InputError) as error:
        TASK.read_file(path, "train")
    assert str(error.value).startswith(f"{path}:{line}: {message}")
    assert "\n" not in str(error.value)


def test_bad_files_are_clear_errors(tmp_path):
    with pytest.raises(InputError, match="empty file: expected a header row"):
        TASK.read_file(_write(tmp_path, "\n\n"), "train")
    with pytest.raises(InputError, match="no examples in the dev split"):
        TASK.read_file(_write(tmp_path, "text\tlabels\n"), "dev")
    with pytest.raises(InputError, match=r"dev\.tsv: no such file"):
        TASK.read_examples(str(tmp_path), "dev")
    with pytest.raises(InputError, match=r"train\.tsv:2: not valid UTF-8"):
        path = tmp_path / "train.tsv"
        path.write_bytes(b"text\tlabels\n\xff\tfood\n")
        TASK.read_file(str(path), "train")
    with pytest.raises(InputError, match="has no TFDS dataset"):
        TASK.read_tfds("train", None)


# --- metrics and predictions ---------------------------------------------------------------

def test_metrics_against_hand_computed_values():
    labels = np.array([[1, 0, 0, 0, 1],
                       [0, 1, 0, 0, 0],
                       [0, 0, 0, 0, 0],
                       [1, 1, 0, 0, 0]], np.float32)
    predictions = np.array([[1, 0, 0, 0, 0],
                            [0, 1, 1, 0, 0],
                            [0, 0, 0, 0, 0],
                            [1, 1, 0, 0, 0]], np.int32)
    # Pooled: TP = 4 (food twice, money twice), FP = 1 (music), FN = 1 (weather)
    # micro F1 = 2·4 / (2·4 + 1 + 1) = 0.8.
    # Per label: food 1, money 1, music 0 (FP only), sports 0 (never gold nor predicted:
    # zero_division=0), weather 0 (FN only): macro = 2 / 5.
    # Exact match: rows 2 and 3 of 4.
    metrics = TASK.compute_metrics(predictions, labels)
    assert metrics == pytest.approx({"micro_f1": 0.8, "macro_f1": 0.4, "exact_match": 0.5})
    assert all(type(v) is float for v in metrics.values())
    assert TASK.main_metric == "micro_f1"


def test_evaluate_thresholds_the_logits_at_probability_one_half():
    logits = np.array([[0.3, -0.3, -1, -1, -1], [-1, -1, -1, -1, 1e-3]], np.float32)
    features = Features(inputs={}, labels=np.array([[1, 0, 0, 0, 0], [0, 0, 0, 0, 1]],
                                                   np.float32), examples=[])
    assert TASK.evaluate(logits, features) == {"micro_f1": 1.0, "macro_f1": 0.4,
                                               "exact_match": 1.0}


def test_test_predictions_file_has_labels_and_probabilities(tmp_path):
    examples = [Example("test-7", "a"), Example("test-x-9", "b")]
    logits = np.array([[2.0, -2.0, 0.0, -1.0, 1.0], [-5.0] * 5], np.float32)
    path = TASK.write_predictions(logits, Features({}, None, examples), str(tmp_path), "test")
    assert path == str(tmp_path / "test_results.tsv")
    lines = (tmp_path / "test_results.tsv").read_text().splitlines()
    assert lines[0] == "id\tlabels\tfood\tmoney\tmusic\tsports\tweather"
    rows = [line.split("\t") for line in lines[1:]]
    assert [r[:2] for r in rows] == [["7", "food,weather"], ["x-9", ""]]
    np.testing.assert_allclose(np.array([r[2:] for r in rows], float), _sigmoid(logits),
                               atol=1e-6)
    # the labels column reads back in the input format
    readback = _write(tmp_path, "text\tlabels\n" + "".join(f"t\t{r[1]}\n" for r in rows))
    assert [e.label for e in TASK.read_file(readback, "dev")] == [("food", "weather"), ()]
