"""LiteRT export: a run served from raw text without TensorFlow answers as the trained
model does. Tiny runs of sst2 (one text), mrpc (pairs) and stsb (regression), exported once
for the module; served by kerasbert.lite in this process and in a fresh one that must not
import TensorFlow."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")

from kerasbert import run as run_lib  # noqa: E402
from kerasbert.config import RunConfig  # noqa: E402
from kerasbert.errors import InputError  # noqa: E402
from kerasbert.export import litert, saved_model  # noqa: E402
from kerasbert.lite import LiteError, LiteModel  # noqa: E402
from kerasbert.lite import model as lite_model  # noqa: E402
from tests.export.test_saved_model import LONG, TEXTS_A, TEXTS_B, TINY, _reference  # noqa: E402

TASKS = ("sst2", "mrpc", "stsb", "conll2003")
# NER: whitespace words, accents, a word that is all punctuation, an empty text, and a
# sentence of ~200 words cut into many windows of max_seq_length=32.
SENTENCES = ["John Smith lives in Berlin .", "Ünïcode Café in Zürich , U.S.A. !", "",
             "...", LONG, "東京 is big"]
ATOL = 1e-5  # LiteRT's kernels (XNNPACK) against TensorFlow's: ~1e-7 seen


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("litert")
    result = {}
    for name in TASKS:
        run_dir = str(root / f"run_{name}")
        run_lib.execute(RunConfig(task=name, output_dir=run_dir, **TINY))
        result[name] = (run_dir, litert.export_run(run_dir, str(root / f"lite_{name}")))
    return result


def _inputs(run):
    return {"text_a": TEXTS_A, **({"text_b": TEXTS_B} if run.sentence_pair else {})}


def test_tags_equal_the_saved_model_s_for_every_word(exported, tmp_path):
    """The SavedModel repeats the run's own evaluation op for op (tests/export); LiteRT
    must give its tags, windows of long sentences included."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the SavedModel's tokenizer ops)

    run_dir, path = exported["conll2003"]
    saved = saved_model.export_run(run_dir, str(tmp_path / "saved"))
    serve = tf.saved_model.load(saved).signatures["serving_default"]
    want = serve(text=tf.constant(SENTENCES))
    served = LiteModel(path).serve(SENTENCES)
    for i, sentence in enumerate(SENTENCES):
        n = int(want["num_words"][i])
        assert served["words"][i] == sentence.split()
        assert served["tags"][i] == [t.decode() for t in want["tags"][i, :n].numpy()]
    assert len(served["tags"][4]) == len(LONG.split()) > 100  # the long one: many windows


@pytest.mark.parametrize("name", ("sst2", "mrpc", "stsb"))
def test_served_answers_equal_the_trained_model_s(exported, name):
    run_dir, path = exported[name]
    run = saved_model.load_run(run_dir)
    inputs = _inputs(run)
    _, expected = _reference(run, inputs)
    served = LiteModel(path).serve(inputs["text_a"], inputs.get("text_b"))
    assert set(served) == set(expected)
    for key, want in expected.items():
        if key == "label":
            assert served[key] == want
        else:
            np.testing.assert_allclose(served[key], want, atol=ATOL)
    one_by_one = [LiteModel(path).serve([a], None if "text_b" not in inputs
                                          else [inputs["text_b"][i]])
                  for i, a in enumerate(inputs["text_a"])]
    key = "score" if name == "stsb" else "probabilities"
    np.testing.assert_allclose(np.concatenate([o[key] for o in one_by_one]), expected[key],
                               atol=ATOL)  # a batch is padded to its longest row only


def test_a_version_folder_with_the_model_the_vocabulary_and_what_serving_needs(exported):
    run_dir, path = exported["mrpc"]
    assert os.path.basename(path) == "1"
    assert sorted(os.listdir(path)) == ["model.tflite", "serving.json", "vocab.txt"]
    record = json.loads(open(os.path.join(path, "serving.json")).read())
    assert record["task"] == "mrpc" and record["kind"] == "classification"
    assert record["sentence_pair"] is True and record["labels"] == ["0", "1"]
    assert record["max_seq_length"] == TINY["max_seq_length"]
    assert record["weights_sha256"] == saved_model.export_identity(run_dir)["weights_sha256"]
    second = litert.export_run(run_dir, os.path.dirname(path))
    assert os.path.basename(second) == "2"
    with pytest.raises(InputError, match="version 2 already exists"):
        litert.export_run(run_dir, os.path.dirname(path), version=2)


@pytest.mark.parametrize("name", ("sst2", "conll2003"))
def test_a_server_process_imports_no_tensorflow(exported, name):
    """Nor the tasks' dependencies (scipy, scikit-learn, pandas): memory is the point."""
    _, path = exported[name]
    script = textwrap.dedent(f"""
        import json, sys
        from kerasbert.lite import LiteModel
        out = LiteModel({path!r}).predict(["a fine film", "dull"])
        out = [x.get("label") or x["tags"] for x in out]
        heavy = sorted(m for m in sys.modules if m.split(".")[0] in (
            "tensorflow", "keras", "keras_hub", "tensorflow_text", "scipy", "sklearn", "pandas"))
        print(json.dumps({{"label": out, "heavy": heavy}}))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True, timeout=120)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["heavy"] == [] and len(result["label"]) == 2


def test_a_tagging_export_takes_single_texts(exported):
    ner = LiteModel(exported["conll2003"][1])
    with pytest.raises(LiteError, match=r"tags single texts: serve\(texts\)"):
        ner.serve(["a"], ["b"])
    with pytest.raises(LiteError, match="lists of texts, not one string"):
        ner.serve("John lives here")
    with pytest.raises(LiteError, match="takes text per example"):
        ner.predict([("John", "Berlin")])


def test_other_kinds_are_refused_before_anything_is_written(tmp_path):
    run_dir = str(tmp_path / "swag")
    run_lib.execute(RunConfig(task="swag", output_dir=run_dir,
                              **dict(TINY, max_train_examples=8)))
    with pytest.raises(InputError, match="kerasbert.export.saved_model"):
        litert.export_run(run_dir, str(tmp_path / "out"))
    assert not os.path.exists(tmp_path / "out") or os.listdir(tmp_path / "out") == []


def test_a_missing_interpreter_is_said_before_any_work(exported, tmp_path, monkeypatch):
    def missing():
        raise LiteError("serving a LiteRT export needs the interpreter: pip install ai-edge-litert")

    monkeypatch.setattr(lite_model, "_interpreter_class", missing)
    with pytest.raises(LiteError, match="pip install ai-edge-litert"):
        litert.export_run(exported["sst2"][0], str(tmp_path / "out"))
    assert not os.path.exists(tmp_path / "out")


def test_a_failed_check_leaves_no_version_folder(exported, tmp_path, monkeypatch):
    def differ(folder, run, function, quantize):
        raise InputError("the LiteRT model's outputs differ")

    monkeypatch.setattr(litert, "check_against_tensorflow", differ)
    with pytest.raises(InputError, match="differ"):
        litert.export_run(exported["sst2"][0], str(tmp_path / "out"))
    assert os.listdir(tmp_path / "out") == []


def test_requests_that_do_not_fit_get_one_clear_error(exported, tmp_path):
    single, pairs = LiteModel(exported["sst2"][1]), LiteModel(exported["mrpc"][1])
    with pytest.raises(LiteError, match="lists of texts, not one string"):
        single.serve("a fine film")
    with pytest.raises(LiteError, match=r"single texts: serve\(texts\)"):
        single.serve(["a"], ["b"])
    with pytest.raises(LiteError, match=r"text pairs: serve\(text_a, text_b\)"):
        pairs.serve(["a"])
    with pytest.raises(LiteError, match="text_a has 2 texts but text_b has 1"):
        pairs.serve(["a", "b"], ["c"])
    with pytest.raises(LiteError, match="no texts"):
        single.serve([])
    with pytest.raises(LiteError, match="example 1 is 'b'; the mrpc model takes text_a and "
                       "text_b per example"):
        pairs.predict([("a", "b"), "b"])
    assert single.predict([]) == []
    with pytest.raises(LiteError, match="serving.json: missing"):
        LiteModel(str(tmp_path))


@pytest.mark.parametrize("name", TASKS)
def test_predict_answers_as_the_python_api_does(exported, name):
    """`LiteModel.predict` takes and gives what `kerasbert.load(run).predict` does (the
    same run in TensorFlow): one example, a list, pairs as (a, b) tuples."""
    import kerasbert

    run_dir, path = exported[name]
    tf_model, lite = kerasbert.load(run_dir), LiteModel(path)
    if name == "conll2003":
        examples = SENTENCES
    elif lite.sentence_pair:  # mrpc, stsb
        examples = list(zip(TEXTS_A, TEXTS_B))
    else:
        examples = list(TEXTS_A)
    want, got = tf_model.predict(examples), lite.predict(examples)
    assert len(got) == len(want) == len(examples)
    for w, g in zip(want, got):
        assert set(g) == set(w)
        for key in w:
            if key == "probabilities":
                assert set(g[key]) == set(w[key])
                np.testing.assert_allclose([g[key][k] for k in w[key]], list(w[key].values()),
                                           atol=ATOL)
            elif key == "score":
                assert g[key] == pytest.approx(w[key], abs=ATOL)
            else:
                assert g[key] == w[key]
    one = lite.predict(examples[0])  # one example in, one dict out
    assert isinstance(one, dict) and one.keys() == got[0].keys()
