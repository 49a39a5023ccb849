"""Every registered task (built-ins and installed plugins) keeps the Task contract on its own
bundled sample: it reads and featurizes it, a tiny random model trains one step on it
through `kerasbert.run.execute` and gets finite dev metrics with the task's main metric,
test splits with a bundled file are predicted, --train_file / --predict_file read what the
folder reads, a bad file is one InputError line naming it, and (large) the run exports and
answers one raw-text request in a fresh process.
"""

import json
import os
import subprocess
import sys
import textwrap
import types

import numpy as np
import pytest

from kerasbert import plugins
from kerasbert import run as run_lib
from kerasbert.config import RunConfig
from kerasbert.errors import InputError

TASKS = sorted(plugins.registry().tasks)
# One step of 4 examples (4 x 4 sequences for SWAG, a few windows for SQuAD), 4 of each
# dev and test split. A run's cost is building and tracing the model, not its data: one
# layer and no dropout trace a third faster than the 2/32/2 of the other tests.
TINY = dict(init_checkpoint="random", model_size="1/16/1", dropout=0.0, max_seq_length=48,
            max_query_length=16, doc_stride=16, train_batch_size=4, eval_batch_size=16,
            max_train_examples=4, max_eval_examples=4, num_train_epochs=1.0, seed=1)


def _config(name, output_dir, vocab_file, **overrides):
    return RunConfig(**{**TINY, "task": name, "output_dir": str(output_dir),
                        "vocab_file": vocab_file, **overrides})


def _task(config):
    """The run's own copy of the task, configured as a run configures it."""
    task, _, _ = run_lib.resolve(config, plugins.registry())
    return task


def _bundled_test_splits(task):
    """The test splits whose file the bundled sample has."""
    def bundled(split):
        try:
            return bool(task.read_examples(task.sample_dir(), split))
        except InputError:
            return False

    return [split for split in task.test_splits if bundled(split)]


@pytest.fixture(scope="module")
def tokenizer(uncased_vocab):
    from kerasbert.data.tokenization import WordPieceTokenizer

    return WordPieceTokenizer(uncased_vocab)


@pytest.fixture(scope="module", params=TASKS)
def trained(request, uncased_vocab, tmp_path_factory):
    """One tiny run per task (train, dev, and the bundled test splits), shared by the tests."""
    name = request.param
    out = tmp_path_factory.mktemp(name) / "run"
    config = _config(name, out, uncased_vocab)
    task = _task(config)
    test_splits = _bundled_test_splits(task)
    config = _config(name, out, uncased_vocab, do_predict=bool(test_splits))
    lines = []
    with pytest.MonkeyPatch.context() as patch:  # the run's progress lines, to find its files
        patch.setattr(run_lib, "log", lines.append)
        metrics = run_lib.execute(config)
    return types.SimpleNamespace(name=name, task=task, config=config, out=out, metrics=metrics,
                                 test_splits=test_splits, lines=lines)


@pytest.mark.parametrize("name", TASKS)
def test_the_bundled_sample_reads_and_featurizes(name, tokenizer, uncased_vocab, tmp_path):
    config = _config(name, tmp_path / "run", uncased_vocab)
    task = _task(config)
    assert task.main_metric and task.dev_splits
    splits = ["train", task.dev_splits[0], *_bundled_test_splits(task)]
    for split in splits:
        examples = run_lib.read_split(config, task, split)
        assert examples, split
        features = task.featurize(examples, tokenizer, config.max_seq_length)
        rows = len(features.inputs["token_ids"])
        assert rows >= len(examples)
        for key in ("token_ids", "segment_ids", "padding_mask"):
            array = features.inputs[key]
            assert array.dtype == np.int32 and len(array) == rows, (split, key)
            assert array.shape[-1] <= config.max_seq_length
        if split in ("train", task.dev_splits[0]):
            assert features.labels is not None and len(features.labels) == rows, split


def test_trains_and_scores_its_dev_split(trained):
    metrics = trained.metrics
    assert trained.task.main_metric in metrics
    assert all(np.isfinite(float(v)) for v in metrics.values()), metrics
    assert json.loads((trained.out / "metrics.json").read_text()) == metrics  # one phase


def test_predicts_its_bundled_test_splits(trained):
    if not trained.test_splits:
        pytest.skip(f"{trained.name}: the bundled sample has no test file")
    for split in trained.test_splits:
        line = next((x for x in trained.lines if x.startswith(f"kerasbert: {split} predictions "
                                                              "in ")), None)
        assert line, f"no predictions written for {split}: {trained.lines}"
        path = line.split(" predictions in ", 1)[1]
        assert os.path.getsize(path) > 0


@pytest.mark.parametrize("name", TASKS)
def test_train_file_and_predict_file_read_what_the_folder_reads(name, uncased_vocab, tmp_path):
    config = _config(name, tmp_path / "run", uncased_vocab)
    task = _task(config)
    sample, dev = task.sample_dir(), task.dev_splits[0]
    train_path, dev_path = task.split_path(sample, "train"), task.split_path(sample, dev)
    if train_path is None:
        pytest.skip(f"{name}: no split_path, so no one file holds a split")
    from_files = _config(name, tmp_path / "run", uncased_vocab, train_file=train_path,
                         predict_file=dev_path)
    for split in ("train", dev):
        assert run_lib.read_split(from_files, task, split) == \
            run_lib.read_split(config, task, split), split


@pytest.mark.parametrize("garbage", [b'this is not\ta task file {"\n\x00,,;;\n',
                                     b"\xff\xfe\xc3 not UTF-8\n"], ids=["text", "bytes"])
@pytest.mark.parametrize("name", TASKS)
def test_a_bad_file_is_one_line_naming_it(name, garbage, uncased_vocab, tmp_path):
    bad = tmp_path / "garbage.txt"
    bad.write_bytes(garbage)
    dev = plugins.registry().task(name).dev_splits[0]
    config = _config(name, tmp_path / "run", uncased_vocab, train_file=str(bad),
                     predict_file=str(bad))
    try:
        task = _task(config)
    except InputError as error:  # a task that reads its files at the start (data_options)
        message = str(error)
        assert message.startswith(f"{bad}:") and "\n" not in message, message
        return
    for split in ("train", dev):
        with pytest.raises(InputError) as error:
            run_lib.read_split(config, task, split)
        message = str(error.value)
        assert message.startswith(f"{bad}:") and "\n" not in message, message


# ---- export (large: a SavedModel per task, and a fresh process to serve it) ---------------

SERVE = textwrap.dedent(r"""
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer's ops)

    path, inputs = sys.argv[1], json.loads(sys.argv[2])
    serve = tf.saved_model.load(path).signatures["serving_default"]
    outputs = serve(**{k: tf.constant(v) for k, v in inputs.items()})
    finite = lambda v: bool(tf.reduce_all(tf.math.is_finite(v))) if v.dtype.is_floating else None
    print(json.dumps({k: [list(v.shape), finite(v)] for k, v in outputs.items()}))
""")


def _request(example, text_inputs):
    """One raw-text request from an example, for the kind's serving_default inputs."""
    values = {"text_a": example.text_a, "text_b": example.text_b, "question": example.text_a,
              "text": example.text_a, "endings": list(getattr(example, "endings", ())),
              # SQuAD's context is the passage (text_b); SWAG's is the scene (text_a).
              "context": example.text_b if example.text_b is not None else example.text_a}
    unknown = [name for name in text_inputs if values.get(name) in (None, [])]
    if unknown:
        pytest.skip(f"no example field for the serving input(s) {', '.join(unknown)}")
    return {name: [values[name]] for name in text_inputs}


@pytest.mark.large
def test_exports_and_answers_raw_text_in_a_fresh_process(trained, tmp_path):
    from kerasbert.export.saved_model import export_run, kind_export

    try:
        serving = kind_export(trained.task)
    except InputError as e:
        pytest.skip(str(e))
    path = export_run(str(trained.out), str(tmp_path / "serving"))
    example = run_lib.read_split(trained.config, trained.task, trained.task.dev_splits[0])[0]
    request = _request(example, serving.text_inputs(trained.task))
    result = subprocess.run([sys.executable, "-c", SERVE, path, json.dumps(request)],
                            capture_output=True, text=True, timeout=300,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3",
                                 "CUDA_VISIBLE_DEVICES": ""})
    assert result.returncode == 0, result.stderr[-3000:]
    outputs = json.loads(result.stdout.strip().splitlines()[-1])
    assert outputs, "serving_default returned nothing"
    for name, (shape, finite) in outputs.items():
        assert shape[0] == 1, (name, shape)  # one answer for the one request
        assert finite is not False, f"{name} is not finite"
