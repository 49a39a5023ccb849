"""topic_tags end to end through kerasbert.run.execute on a tiny random encoder: trains,
evaluates, predicts, and (large) exports a SavedModel that a fresh process serves."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from kerasbert.config import RunConfig
from kerasbert.run import execute
from kerasbert.tasks.base import Example
from kerasbert_multilabel.task import TASK

TINY = dict(task="topic_tags", init_checkpoint="random", model_size="2/32/2",
            max_seq_length=32, train_batch_size=16, seed=3)
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}


def _read_predictions(path):
    with open(path, encoding="utf-8") as f:
        header, *rows = [line.rstrip("\n").split("\t") for line in f]
    return header, rows


def test_trains_evaluates_and_predicts(tmp_path):
    out = tmp_path / "run"
    metrics = execute(RunConfig(output_dir=str(out), num_train_epochs=1.0,
                                max_train_examples=32, max_eval_examples=16, do_predict=True,
                                **TINY))
    assert set(metrics) == {"micro_f1", "macro_f1", "exact_match"}
    assert json.loads((out / "metrics.json").read_text())["micro_f1"] == metrics["micro_f1"]
    assert all(0.0 <= v <= 1.0 for v in metrics.values())
    config = json.loads((out / "run_config.json").read_text())
    assert config["head"] == "multi_label_linear"  # the task's default head
    header, rows = _read_predictions(out / "test_results.tsv")
    assert header == ["id", "labels", *TASK.label_list]
    test = TASK.read_examples(TASK.sample_dir(), "test")[:16]
    assert [r[0] for r in rows] == [e.guid.split("-", 1)[1] for e in test]  # one per example
    history = (out / "history.csv").read_text()
    assert "train_accuracy" in history.splitlines()[0]  # exact match on the training batches


SERVE = textwrap.dedent(r"""
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer's ops)

    path, texts, result = sys.argv[1], json.load(open(sys.argv[2])), sys.argv[3]
    loaded = tf.saved_model.load(path)
    serve = loaded.signatures["serving_default"]
    out = serve(text=tf.constant(texts))
    json.dump({
        "probabilities": out["probabilities"].numpy().tolist(),
        "predicted": out["predicted"].numpy().tolist(),
        "labels": [[x.decode() for x in row] for row in out["labels"].numpy()],
        "dtypes": {k: v.dtype.name for k, v in out.items()},
        "inputs": sorted(serve.structured_input_signature[1]),
        "empty_batch": list(serve(text=tf.zeros([0], tf.string))["labels"].shape),
        "modules": sorted(m for m in sys.modules if m.split(".")[0] in ("kerasbert", "keras_hub")),
    }, open(result, "w"))
""")


@pytest.mark.large
def test_learns_exports_and_serves_the_runs_own_probabilities(tmp_path):
    from kerasbert.export import saved_model

    out, export_dir = tmp_path / "run", tmp_path / "serving"
    # The whole sample, 4 epochs at a high learning rate: enough for 2/32/2 to learn the
    # topic words (all labels on, the best constant guess, scores micro-F1 0.44 on dev).
    metrics = execute(RunConfig(output_dir=str(out), num_train_epochs=4.0, learning_rate=1e-2,
                                do_predict=True, export_dir=str(export_dir), **TINY))
    assert metrics["micro_f1"] > 0.6, metrics
    assert json.loads((out / "metrics.json").read_text())["micro_f1"] == metrics["micro_f1"]
    header, rows = _read_predictions(out / "test_results.tsv")
    test = TASK.read_examples(TASK.sample_dir(), "test")
    assert len(rows) == len(test) == 60
    run_probabilities = np.array([r[2:] for r in rows], np.float64)
    version = export_dir / "1"
    meta = json.loads((version / saved_model.METADATA).read_text())
    assert meta["kind"] == "multi_label" and meta["label_list"] == list(TASK.label_list)
    assert meta["threshold"] == 0.5 and meta["serving_default_inputs"] == ["text"]

    # In this process: the run rebuilt from its folder, on the training featurization.
    hostile = ["", "Café DÉJÀ VU 東京 🙂", "rain " * 200]
    texts = [e.text_a for e in test] + hostile
    run = saved_model.load_run(str(out))
    features = TASK.featurize([Example(f"t-{i}", t) for i, t in enumerate(texts)],
                              run.tokenizer, run.config.max_seq_length)
    logits = np.asarray(run.model(features.inputs, training=False), np.float64)
    expected = 1.0 / (1.0 + np.exp(-logits))
    np.testing.assert_allclose(expected[:60], run_probabilities, atol=1e-6)  # 6 decimals

    (tmp_path / "serve.py").write_text(SERVE)
    (tmp_path / "texts.json").write_text(json.dumps(texts))
    proc = subprocess.run([sys.executable, str(tmp_path / "serve.py"), str(version),
                           str(tmp_path / "texts.json"), str(tmp_path / "served.json")],
                          capture_output=True, text=True, timeout=300, env=ENV,
                          cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    served = json.loads((tmp_path / "served.json").read_text())
    assert served["modules"] == []  # TF Serving has no kerasbert: neither does this process
    assert served["inputs"] == ["text"]
    assert served["dtypes"] == {"probabilities": "float32", "predicted": "int32",
                                "labels": "string"}
    assert served["empty_batch"] == [0, 5]
    probabilities = np.array(served["probabilities"])
    assert np.ptp(probabilities, axis=0).max() > 0.1  # the texts give distinct outputs
    np.testing.assert_allclose(probabilities, expected, rtol=0, atol=1e-5)
    np.testing.assert_allclose(probabilities[:60], run_probabilities, rtol=0, atol=1e-5)
    # The decisions: the run's own labels column, wherever no probability is a near-tie.
    decisive = np.all(np.abs(expected - 0.5) > 1e-5, axis=1)
    assert decisive[:60].sum() >= 55
    assert [",".join(n for n in row if n) for row, d in zip(served["labels"], decisive[:60])
            if d] == [r[1] for r, d in zip(rows, decisive[:60]) if d]
    assert np.array(served["predicted"]).sum() > 0  # it predicts labels, not only none
    for row, names in zip(served["predicted"], served["labels"]):
        assert [n for n in names if n] == [n for n, on in zip(TASK.label_list, row) if on]
        assert names[sum(row):] == [""] * (5 - sum(row))

