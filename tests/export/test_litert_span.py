"""LiteRT export of span runs: SQuAD answers served without TensorFlow are the answers the
run's own decoder gives (tests/export/test_answer_export.py holds the SavedModel to the
same reference). Tiny squad_v1 and squad_v2 runs (max_seq_length 48, doc_stride 16, so
contexts span several windows), exported once for the module."""

import json
import re
import subprocess
import sys
import textwrap
import types

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")

from kerasbert import run as run_lib  # noqa: E402
from kerasbert.config import RunConfig  # noqa: E402
from kerasbert.errors import InputError  # noqa: E402
from kerasbert.export import litert, saved_model  # noqa: E402
from kerasbert.lite import LiteError, LiteModel  # noqa: E402
from kerasbert.tasks.squad.serving import null_threshold  # noqa: E402
from tests.export.test_answer_export import TINY, _span_inputs, _span_reference  # noqa: E402


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("litert_span")
    result = {}
    for name in ("squad_v1", "squad_v2"):
        run_dir = str(root / f"run_{name}")
        run_lib.execute(RunConfig(task=name, output_dir=run_dir, **TINY))
        run = saved_model.load_run(run_dir)
        questions, contexts = _span_inputs(run.task)
        result[name] = types.SimpleNamespace(
            run=run, questions=questions, contexts=contexts,
            path=litert.export_run(run_dir, str(root / f"lite_{name}")),
            expected=_span_reference(run, questions, contexts))
    return result


@pytest.mark.parametrize("name", ["squad_v1", "squad_v2"])
def test_served_answers_equal_the_runs_own_decoder(exported, name):
    e = exported[name]
    decoded, ids = e.expected
    out = LiteModel(e.path).serve(e.questions, e.contexts)
    assert out["answer"] == [decoded.predictions[i] for i in ids]
    if name == "squad_v1":
        assert sum(1 for a in out["answer"] if a) >= 3  # real spans, not all ""
        assert "null_odds" not in out
    for k, i in enumerate(ids):  # the score of that answer in the decoder's n-best list
        expected = next(n["start_logit"] + n["end_logit"] for n in decoded.nbest[i]
                        if n["text"] == out["answer"][k])
        assert out["score"][k] == pytest.approx(expected, abs=1e-4)
    if name == "squad_v2":
        odds = [decoded.null_odds[i] for i in ids]
        np.testing.assert_allclose(out["null_odds"], odds, rtol=1e-6, atol=1e-4)
        threshold = null_threshold(e.run)
        assert [a == "" for a in out["answer"]] == [
            o > threshold or not decoded.best_non_null[i] for o, i in zip(odds, ids)]


@pytest.mark.parametrize("name", ["squad_v1", "squad_v2"])
def test_answers_equal_the_saved_model_s_offsets_included(exported, name, tmp_path):
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the SavedModel's tokenizer ops)

    e = exported[name]
    saved = saved_model.export_run(e.run.run_dir, str(tmp_path / "saved"))
    serve = tf.saved_model.load(saved).signatures["serving_default"]
    want = serve(question=tf.constant(e.questions), context=tf.constant(e.contexts))
    got = LiteModel(e.path).serve(e.questions, e.contexts)
    assert got["answer"] == [a.decode() for a in want["answer"].numpy()]
    assert got["start"].tolist() == want["start"].numpy().tolist()
    assert got["end"].tolist() == want["end"].numpy().tolist()
    np.testing.assert_allclose(got["score"], want["score"].numpy(), atol=1e-4)
    for answer, start, end, context in zip(got["answer"], got["start"], got["end"],
                                           e.contexts):
        if answer:  # the answer joins its words by single spaces, as predictions.json does
            assert re.sub("[ \t\r\n\u202f]+", " ", context[start:end]) == answer
        else:
            assert (start, end) == (-1, -1)


def test_one_question_at_a_time_gives_the_batch_s_answers(exported):
    e = exported["squad_v2"]
    model = LiteModel(e.path)
    batch = model.serve(e.questions, e.contexts)
    for i, (q, c) in enumerate(zip(e.questions, e.contexts)):
        one = model.serve([q], [c])
        assert one["answer"] == [batch["answer"][i]]
        assert one["score"][0] == pytest.approx(batch["score"][i], abs=1e-4)


def test_the_export_records_how_the_run_cut_and_decoded(exported):
    e = exported["squad_v2"]
    record = json.loads(open(f"{e.path}/serving.json").read())
    assert record["kind"] == "span" and record["version_2"] is True
    assert record["squad_options"] == {"doc_stride": 16, "max_query_length": 12,
                                       "n_best_size": 5, "max_answer_length": 8}
    assert record["null_score_diff_threshold"] == pytest.approx(null_threshold(e.run))


def test_a_span_server_process_imports_no_tensorflow(exported):
    path = exported["squad_v1"].path
    script = textwrap.dedent(f"""
        import json, sys
        from kerasbert.lite import LiteModel
        out = LiteModel({path!r}).predict([("Who wrote it?", "Ada Lovelace wrote it.")])
        heavy = sorted(m for m in sys.modules if m.split(".")[0] in (
            "tensorflow", "keras", "keras_hub", "tensorflow_text", "scipy", "sklearn", "pandas"))
        print(json.dumps({{"answer": [x["answer"] for x in out], "heavy": heavy}}))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True, timeout=120)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["heavy"] == [] and len(result["answer"]) == 1


def test_span_requests_that_do_not_fit_get_one_clear_error(exported):
    model = LiteModel(exported["squad_v1"].path)
    with pytest.raises(LiteError, match=r"serve\(questions, contexts\)"):
        model.serve(["Who?"])
    with pytest.raises(LiteError, match="text_a has 2 texts but text_b has 1"):
        model.serve(["Who?", "What?"], ["Ada."])
    with pytest.raises(LiteError, match="not one string"):
        model.serve(["Who?"], "Ada.")
    with pytest.raises(LiteError, match="takes question and context per example"):
        model.predict(["Who?"])


def test_a_span_task_with_its_own_decoding_is_refused(exported, tmp_path, monkeypatch):
    """Only SQuAD's decoding is repeated in kerasbert/lite/spans.py: another span task
    (a plugin's) is sent to the SavedModel export, before anything is written."""
    from kerasbert.tasks.squad import task as squad_task

    monkeypatch.setattr(squad_task, "SquadTask", type("Other", (), {}))
    with pytest.raises(InputError, match="decodes its own answers.*export.saved_model"):
        litert.export_run(exported["squad_v1"].run.run_dir, str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", ["squad_v1", "squad_v2"])
def test_predict_answers_as_the_python_api_does(exported, name):
    import kerasbert

    e = exported[name]
    examples = list(zip(e.questions, e.contexts))
    want = kerasbert.load(e.run.run_dir).predict(examples)
    got = LiteModel(e.path).predict(examples)
    for w, g in zip(want, got):
        assert set(g) == set(w)
        assert (g["answer"], g["start"], g["end"]) == (w["answer"], w["start"], w["end"])
        assert g["score"] == pytest.approx(w["score"], abs=1e-4)
    assert LiteModel(e.path).predict(examples[0])["answer"] == want[0]["answer"]
