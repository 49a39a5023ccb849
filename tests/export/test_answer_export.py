"""SavedModel export of span (SQuAD) and tagging (NER) runs: the served answers are the
answers the run's own Python decoders give.

Tiny runs (2 layers, hidden 32, max_seq_length 48, doc_stride 16, so contexts and sentences
span several windows) of squad_v1, squad_v2 and conll2003 (with the tagger head and with
tagger_crf, whose Viterbi decoding runs inside the graph) are trained and exported once for
the module; one fresh process that imports only tensorflow and loads the three tokenizer
op libraries (no Keras, no tensorflow_text package) serves them.
"""

import json
import os
import re
import subprocess
import sys
import textwrap
import types

import numpy as np
import pytest

from kerasbert import plugins
from kerasbert import run as run_lib
from kerasbert.config import RunConfig
from kerasbert.export import saved_model
from kerasbert.tasks.squad.serving import null_threshold
from kerasbert.tasks.conll import Sentence
from kerasbert.tasks.squad import SquadExample

TINY = dict(init_checkpoint="random", model_size="2/32/2", max_seq_length=48,
            max_query_length=12, doc_stride=16, n_best_size=5, max_answer_length=8,
            num_train_epochs=1.0, max_train_examples=8, train_batch_size=8,
            max_eval_examples=12, seed=5)
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}
LONG = " ".join(f"In {1900 + i} the  river\tcity of Zürich-{i} grew (by {i}%)." for i in range(12))
EXTRA_CONTEXTS = [LONG, "Café DÉJÀ VU opened in 東京 in 1999,\nnot 2001.", "",
                  "one\u202ftwo three\u00a0four"]
EXTRA_QUESTIONS = ["When did the city grow?", "Where did it open?", "Anything?", "Which?"]
EXTRA_SENTENCES = ["", "EU rejects German call to boycott British lamb .",
                   " ".join(f"Word{i} in Zürich" for i in range(30)),
                   "x" * 300 + " Paris \u200b 東京"]


def _span_inputs(task):
    examples = task.read_examples(task.sample_dir(), "dev")[:10]
    return ([e.question for e in examples] + EXTRA_QUESTIONS,
            [e.context for e in examples] + EXTRA_CONTEXTS)


def _span_reference(run, questions, contexts):
    examples = [SquadExample(guid=f"q{i}", text_a=q, text_b=c, qas_id=f"q{i}")
                for i, (q, c) in enumerate(zip(questions, contexts))]
    run.task.configure(null_score_diff_threshold=null_threshold(run))
    features = run.task.featurize(examples, run.tokenizer, run.config.max_seq_length)
    outputs = np.asarray(run.model(features.inputs, training=False))
    decoded = run.task.decode(outputs, features)
    return decoded, [e.qas_id for e in examples]


def _tagging_reference(run, texts):
    sentences = [Sentence(guid=f"s{i}", text_a=t, words=tuple(t.split()))
                 for i, t in enumerate(texts)]
    features = run.task.featurize(sentences, run.tokenizer, run.config.max_seq_length)
    return run.task.predict_tags(np.asarray(run.model(features.inputs, training=False)), features)


# The lean serving process of docs/serving.md: Keras kept out of TensorFlow's import and
# only the export's three tokenizer op libraries loaded, not tensorflow_text's package
# (test_saved_model.py serves through `import tensorflow_text`).
SERVE_SCRIPT = textwrap.dedent(r"""
    import importlib.util, json, os, sys
    sys.modules["keras"] = None  # TensorFlow then skips its eager import of Keras
    import tensorflow as tf
    ops = os.path.join(importlib.util.find_spec("tensorflow_text").submodule_search_locations[0],
                       "python", "ops")
    for library in ("_normalize_ops.so", "_regex_split_ops.so", "_wordpiece_tokenizer.so"):
        tf.load_op_library(os.path.join(ops, library))

    def plain(value):
        value = value.numpy()
        if value.dtype == object:
            return [x.decode("utf-8") for x in value.reshape(-1)]
        return value.tolist()

    def call(fn, inputs):
        try:
            out = fn(**{k: tf.constant(v, tf.string) if len(v) else tf.zeros([0], tf.string)
                        for k, v in inputs.items()})
        except Exception as e:  # a clean error: reported, the process goes on
            return {"error": f"{type(e).__name__}: {e}"[:300]}
        return {"outputs": {k: plain(v) for k, v in out.items()},
                "shapes": {k: list(v.shape) for k, v in out.items()}}

    def spec(fn):
        return {"inputs": {k: [v.dtype.name, v.shape.as_list()]
                           for k, v in fn.structured_input_signature[1].items()},
                "outputs": {k: [v.dtype.name, v.shape.as_list()]
                            for k, v in fn.structured_outputs.items()}}

    jobs, results = json.load(open(sys.argv[1])), {}
    for job in jobs:
        loaded = tf.saved_model.load(job["path"])
        text = loaded.signatures["serving_default"]
        names = list(job["inputs"])
        hostile = {"empty": [b""], "long": [("word " * 20000).encode()],
                   "not_utf8": [b"\xff\xfe ok \xc3"], "batch_of_0": []}
        results[job["name"]] = {
            "text": call(text, job["inputs"]),
            "hostile": {k: call(text, {n: v for n in names}) for k, v in hostile.items()},
            "specs": {name: spec(fn) for name, fn in loaded.signatures.items()},
        }
    results["modules"] = sorted(m for m in sys.modules if m.split(".")[0] in
                                ("kerasbert", "keras_hub", "keras", "tensorflow_text")
                                and sys.modules[m] is not None)
    json.dump(results, open(sys.argv[2], "w"), default=str)
""")


# (name, task, head): the task's default head, or the CRF tagger.
RUNS = [("squad_v1", "squad_v1", None), ("squad_v2", "squad_v2", None),
        ("conll2003", "conll2003", None), ("conll2003_crf", "conll2003", "tagger_crf")]
TAGGING = ["conll2003", "conll2003_crf"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    registry = plugins.registry()
    root = tmp_path_factory.mktemp("answers")
    result = {}
    for name, task, head in RUNS:
        run_dir, export_dir = str(root / f"run_{name}"), str(root / f"serving_{name}")
        run_lib.execute(RunConfig(task=task, head=head, output_dir=run_dir,
                                   export_dir=export_dir, **TINY), registry)
        run = saved_model.load_run(run_dir)
        if task == "conll2003":
            inputs = {"text": [" ".join(s.words) for s in run.task.read_examples(
                run.task.sample_dir(), "valid")[:10]] + EXTRA_SENTENCES}
            expected = _tagging_reference(run, inputs["text"])
        else:
            questions, contexts = _span_inputs(run.task)
            inputs = {"question": questions, "context": contexts}
            expected = _span_reference(run, questions, contexts)
        result[name] = types.SimpleNamespace(run_dir=run_dir, run=run, inputs=inputs,
                                             path=os.path.join(export_dir, "1"),
                                             expected=expected)
    return result


@pytest.fixture(scope="module")
def served(exported, tmp_path_factory):
    work = tmp_path_factory.mktemp("serve_answers")
    jobs = [{"name": name, "path": e.path, "inputs": e.inputs} for name, e in exported.items()]
    (work / "jobs.json").write_text(json.dumps(jobs))
    (work / "serve.py").write_text(SERVE_SCRIPT)
    proc = subprocess.run([sys.executable, str(work / "serve.py"), str(work / "jobs.json"),
                           str(work / "results.json")], capture_output=True, text=True,
                          timeout=600, env=ENV, cwd=str(work))
    assert proc.returncode == 0, proc.stderr[-3000:]  # no hostile input crashed the process
    return json.loads((work / "results.json").read_text())


@pytest.mark.parametrize("name", ["squad_v1", "squad_v2"])
def test_served_answers_equal_the_runs_own_decoder(exported, served, name):
    e = exported[name]
    decoded, ids = e.expected
    out = served[name]["text"]["outputs"]
    assert out["answer"] == [decoded.predictions[i] for i in ids]
    if name == "squad_v1":
        assert sum(1 for a in out["answer"] if a) >= 3  # real spans, not all ""
    for k, i in enumerate(ids):  # the score of that answer in the decoder's n-best list
        expected = next(n["start_logit"] + n["end_logit"] for n in decoded.nbest[i]
                        if n["text"] == out["answer"][k])
        assert out["score"][k] == pytest.approx(expected, abs=1e-5)
    if name == "squad_v2":
        odds = [decoded.null_odds[i] for i in ids]
        np.testing.assert_allclose(out["null_odds"], odds, rtol=1e-6, atol=1e-5)
        threshold = null_threshold(e.run)
        assert [a == "" for a in out["answer"]] == [
            o > threshold or not decoded.best_non_null[i] for o, i in zip(odds, ids)]


@pytest.mark.parametrize("name", ["squad_v1", "squad_v2"])
def test_answer_offsets_point_into_the_context(exported, served, name):
    out = served[name]["text"]["outputs"]
    contexts = exported[name].inputs["context"]
    for answer, start, end, context in zip(out["answer"], out["start"], out["end"], contexts):
        if not answer:
            assert (start, end) == (-1, -1)
            continue
        # The answer joins its words by single spaces, as predictions.json does.
        assert re.sub("[ \t\r\n\u202f]+", " ", context[start:end]) == answer


def test_v2_threshold_decides_between_the_best_span_and_no_answer(exported):
    """In process: with a threshold above every null odds, each question gets its best
    non-null span (the decoder's best_non_null); below them all, every answer is ""."""
    import tensorflow as tf

    from kerasbert.tasks.squad.serving import SpanAnswerer

    e = exported["squad_v2"]
    decoded, ids = e.expected
    questions, contexts = (tf.constant(e.inputs[k]) for k in ("question", "context"))
    odds = np.array([decoded.null_odds[i] for i in ids])
    for threshold, expected in [(odds.max() + 1, [decoded.best_non_null[i] for i in ids]),
                                (odds.min() - 1, [""] * len(ids))]:
        answerer = SpanAnswerer(e.run.model, e.run.tokenizer, e.run.task,
                                e.run.config.max_seq_length, threshold)
        answers = [a.decode() for a in answerer(questions, contexts)["answer"].numpy()]
        assert answers == expected
    assert sum(1 for i in ids if decoded.best_non_null[i]) >= 3


def test_v2_export_applies_the_threshold_tuned_on_dev(exported):
    e = exported["squad_v2"]
    metrics = json.load(open(os.path.join(e.run_dir, "metrics.json")))
    meta = json.load(open(os.path.join(e.path, saved_model.METADATA)))
    assert meta["null_score_diff_threshold"] == metrics["best_f1_thresh"]
    assert meta["squad_options"] == {"doc_stride": 16, "max_query_length": 12,
                                     "n_best_size": 5, "max_answer_length": 8}


@pytest.mark.parametrize("name", TAGGING)
def test_served_tags_equal_the_runs_own_tagger(exported, served, name):
    e = exported[name]
    out, shapes = served[name]["text"]["outputs"], served[name]["text"]["shapes"]
    texts = e.inputs["text"]
    width = shapes["tags"][1]
    assert width == max(len(t.split()) for t in texts) and shapes["words"] == shapes["tags"]
    for row, (text, expected) in enumerate(zip(texts, e.expected)):
        n = out["num_words"][row]
        assert n == len(text.split())
        assert out["words"][row * width: row * width + n] == text.split()
        assert out["tags"][row * width: row * width + n] == list(expected)
        assert set(out["tags"][row * width + n: (row + 1) * width]) <= {""}
    assert len(set(out["tags"]) - {""}) >= 2  # the model tells words apart
    # The run's own evaluation wrote the same tags for the valid sentences served first.
    with open(os.path.join(e.run_dir, "valid_predictions.txt")) as f:
        written = f.read().strip().split("\n\n")
    for row, sentence in enumerate(written[:10]):
        tags = [line.split()[-1] for line in sentence.splitlines()]
        assert out["tags"][row * width: row * width + len(tags)] == tags


@pytest.mark.parametrize("name", [name for name, _, _ in RUNS])
def test_hostile_inputs_return_results(served, name):
    for case, result in served[name]["hostile"].items():
        assert "outputs" in result, (case, result)
        rows = {k: v[0] for k, v in result["shapes"].items()}
        assert set(rows.values()) == {0 if case == "batch_of_0" else 1}, (case, rows)


def test_signatures_have_the_documented_names_dtypes_and_shapes(served):
    v1, v2 = served["squad_v1"]["specs"], served["squad_v2"]["specs"]
    ner = served["conll2003"]["specs"]
    text = {"question": ["string", [None]], "context": ["string", [None]]}
    answer = {"answer": ["string", [None]], "score": ["float32", [None]],
              "start": ["int32", [None]], "end": ["int32", [None]]}
    assert v1["serving_default"] == {"inputs": text, "outputs": answer}
    assert v2["serving_default"] == {"inputs": text, "outputs": {
        **answer, "null_odds": ["float32", [None]]}}
    ids = {n: ["int32", [None, None]] for n in ("token_ids", "segment_ids", "padding_mask")}
    assert v1["serve_token_ids"] == {"inputs": ids, "outputs": {
        "start_logits": ["float32", [None, None]], "end_logits": ["float32", [None, None]]}}
    assert ner["serving_default"] == {"inputs": {"text": ["string", [None]]}, "outputs": {
        "tags": ["string", [None, None]], "words": ["string", [None, None]],
        "num_words": ["int32", [None]]}}
    assert ner["serve_token_ids"]["outputs"] == {"probabilities": ["float32", [None, None, 9]],
                                                 "tag": ["string", [None, None]]}


def test_serving_process_needs_no_kerasbert_keras_or_tensorflow_text_package(served):
    """Only TensorFlow and three op libraries answered every request above."""
    assert served["modules"] == []
