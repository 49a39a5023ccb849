"""--document_context end to end: tiny CoNLL runs train, evaluate, predict test.txt and
export with context (the softmax tagger, tagger_crf and bilstm_crf), and the exported
model serves a sentence with its context (`serve_with_context`) and alone
(`serving_default`) with the tags the Python path gives.

Tiny runs on the bundled sample: 2 layers, hidden 32, max_seq_length 48, so some sentences
make two windows and most rows hold context.
"""

import json
import math
import os

import numpy as np
import pytest

from kerasbert import plugins, run_folder
from kerasbert import run as run_lib
from kerasbert.config import RunConfig
from kerasbert.export import saved_model
from kerasbert.tasks import conll

TINY = dict(init_checkpoint="random", model_size="2/32/2", max_seq_length=48,
            num_train_epochs=1.0, max_train_examples=48, train_batch_size=16,
            learning_rate=1e-3, seed=3, do_predict=True)
RUNS = {"tagger": ("tagger", "16"), "tagger_crf": ("tagger_crf", "max")}


def _python_tags(run, sentences):
    """The run's own Python path: featurize (with the run's context), the model, the
    word-level decoding."""
    features = run.task.featurize(sentences, run.tokenizer, run.config.max_seq_length)
    outputs = np.asarray(run.model(features.inputs, training=False))
    return run.task.predict_tags(outputs, features)


def _contexts(sentences):
    """Each sentence's document text before and after it, as a serving client sends it."""
    left, right = [], []
    for document in conll.documents(sentences):
        for n in document:
            left.append(" ".join(w for k in range(document.start, n)
                                 for w in sentences[k].words))
            right.append(" ".join(w for k in range(n + 1, document.stop)
                                  for w in sentences[k].words))
    return left, right


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    registry = plugins.registry()
    root = tmp_path_factory.mktemp("context_runs")
    out = {}
    for name, (head, context) in RUNS.items():
        run_dir, export_dir = str(root / f"run_{name}"), str(root / f"serving_{name}")
        run_lib.execute(RunConfig(task="conll2003", head=head, output_dir=run_dir,
                                  export_dir=export_dir, document_context=context, **TINY),
                        registry)
        out[name] = (run_dir, os.path.join(export_dir, "1"))
    return out


def _served(path, **inputs):
    import tensorflow as tf

    loaded = tf.saved_model.load(path)
    signature = loaded.signatures["serve_with_context" if len(inputs) > 1
                                  else "serving_default"]
    result = signature(**{k: tf.constant(v) for k, v in inputs.items()})
    tags, counts = result["tags"].numpy(), result["num_words"].numpy()
    return [[t.decode() for t in row[:n]] for row, n in zip(tags, counts)]


@pytest.mark.large
@pytest.mark.parametrize("name", list(RUNS))
def test_a_run_with_context_trains_evaluates_predicts_and_records_it(runs, name):
    run_dir, _ = runs[name]
    config = json.load(open(run_folder.path(run_dir, run_folder.RUN_CONFIG)))
    assert config["document_context"] == RUNS[name][1]
    metrics = run_folder.read_metrics(run_dir)
    assert 0 <= metrics["f1"] <= 1 and 0 <= metrics["test_f1"] <= 1
    run = saved_model.load_run(run_dir)
    assert run.task.document_context == RUNS[name][1]
    for split in ("valid", "test"):
        sentences = run.task.read_examples(run.task.sample_dir(), split)
        with open(os.path.join(run_dir, f"{split}_predictions.txt")) as f:
            written = [[line.split()[-1] for line in block.splitlines()]
                       for block in f.read().strip().split("\n\n")]
        # One tag per word, the tags of the Python path with context.
        assert written == _python_tags(run, sentences)
        features = run.task.featurize(sentences, run.tokenizer, run.config.max_seq_length)
        assert "own_positions" in features.extra
        own = features.extra["own_positions"]
        assert (own[:, 0] > 1).any() or (own[:, 1] < features.inputs["padding_mask"].sum(1) - 1
                                         ).any()  # rows do hold context


@pytest.mark.large
@pytest.mark.parametrize("name", list(RUNS))
def test_served_tags_with_and_without_context_equal_the_python_path(runs, name):
    run_dir, path = runs[name]
    run = saved_model.load_run(run_dir)
    sentences = run.task.read_examples(run.task.sample_dir(), "valid")
    texts = [" ".join(s.words) for s in sentences]
    left, right = _contexts(sentences)
    features = run.task.featurize(sentences, run.tokenizer, run.config.max_seq_length)
    assert (np.bincount(features.extra["row_sentence"]) > 1).any()  # windows with context
    with_context = _python_tags(run, sentences)
    assert _served(path, text=texts, left_context=left, right_context=right) == with_context
    # serving_default: each sentence alone, a document of its own.
    alone = [conll.Sentence(guid=s.guid, text_a=s.text_a, words=s.words) for s in sentences]
    assert _served(path, text=texts) == _python_tags(run, alone)
    # "" context is the sentence alone too.
    empty = [""] * len(texts)
    assert _served(path, text=texts, left_context=empty, right_context=empty) == \
        _python_tags(run, alone)
    meta = json.load(open(os.path.join(path, saved_model.METADATA)))
    assert meta["document_context"] == RUNS[name][1]
    assert meta["serve_with_context_inputs"] == ["text", "left_context", "right_context"]


@pytest.mark.large
def test_bilstm_crf_on_a_frozen_encoder_with_context(tmp_path):
    """The feature-based route: context rows through the frozen encoder's cached layers,
    which are cached apart from the rows without context (the cache keys on the inputs)."""
    cache = tmp_path / "cache"

    def run(name, context):
        run_dir = str(tmp_path / name)
        run_lib.execute(RunConfig(
            task="conll2003", head="bilstm_crf", output_dir=run_dir, document_context=context,
            feature_cache_dir=str(cache), max_eval_examples=12,
            head_options={"bilstm_crf_frozen": True, "bilstm_crf_lstm_units": 8},
            **{**TINY, "do_predict": False}), plugins.registry())
        return run_dir

    run_dir = run("context", "16")
    metrics = run_folder.read_metrics(run_dir)
    assert 0 <= metrics["f1"] <= 1
    rows = run_folder.read_run_history(run_dir)
    assert rows and all(math.isfinite(float(r["train_loss"])) for r in rows)
    assert len(list(cache.glob("last-*.npy"))) == 2  # train, valid
    run("alone", "0")
    assert len(list(cache.glob("last-*.npy"))) == 4  # other inputs, other entries


def test_the_crf_loss_sums_over_the_context_positions():
    """A CRF head's loss on a row with context: only the sentence's own first pieces are
    labelled; the context positions stay on the chain, their tags summed over (brute force
    over every tag sequence)."""
    import itertools

    import tensorflow as tf

    from kerasbert.heads.crf import CRF, chain_positions

    rng = np.random.default_rng(0)
    e = rng.normal(size=[6, 3]).astype(np.float32)
    crf = CRF(3)
    t, start, end = (rng.normal(size=s).astype(np.float32) for s in ([3, 3], [3], [3]))
    crf.transitions.assign(t)
    crf.start.assign(start)
    crf.end.assign(end)
    # [CLS] context own own context [SEP]: labels on the own pieces only.
    labels = tf.constant([[-1, -1, 2, 0, -1, -1]])
    nll = float(crf.nll(tf.constant(e[None]), labels, chain_positions(tf.ones([1, 6])))[0])

    def score(y):  # the chain is positions 1..4
        return (start[y[0]] + sum(e[1 + i, y[i]] for i in range(4))
                + sum(t[y[i - 1], y[i]] for i in range(1, 4)) + end[y[-1]])

    paths = list(itertools.product(range(3), repeat=4))
    log_z = np.logaddexp.reduce([score(y) for y in paths])
    gold = np.logaddexp.reduce([score(y) for y in paths if y[1:3] == (2, 0)])
    assert nll == pytest.approx(log_z - gold, abs=1e-4)
