"""--stream_train_data: the streamed training split trains on the same batches as the
in-memory one, resumes after a kill, and fails on bad input before anything is written."""

import collections
import copy
import csv
import glob
import json
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from kerasbert import faults
from kerasbert import run as run_lib
from kerasbert.config import RunConfig
from kerasbert.data import pipeline, streaming
from kerasbert.data.tokenization import WordPieceTokenizer
from kerasbert.errors import InputError
from kerasbert.tasks import conll, glue, squad, swag

ROOT = pathlib.Path(__file__).resolve().parents[2]

# 40 examples / batch 8 = 5 steps an epoch, 2 epochs, a checkpoint after every step.
RUN = {"task": "sst2", "init_checkpoint": "random", "model_size": "2/32/2",
       "max_seq_length": 32, "train_batch_size": 8, "eval_batch_size": 16,
       "max_train_examples": 40, "max_eval_examples": 16, "num_train_epochs": 2.0,
       "learning_rate": 1e-3, "seed": 5, "save_checkpoints_steps": 1}


@pytest.fixture(scope="module")
def tokenizer(uncased_vocab):
    return WordPieceTokenizer(uncased_vocab, do_lower_case=True)


def _batches(dataset):
    return [({k: v.numpy() for k, v in inputs.items()}, labels.numpy())
            for inputs, labels in dataset]


def _same_batches(got, want):
    assert len(got) == len(want)
    for (inputs, labels), (inputs_want, labels_want) in zip(got, want):
        assert inputs.keys() == inputs_want.keys()
        for k in inputs:
            np.testing.assert_array_equal(inputs[k], inputs_want[k])
        np.testing.assert_array_equal(labels, labels_want)


@pytest.mark.parametrize("task", [glue.TASKS["sst2"], glue.TASKS["mrpc"], glue.TASKS["stsb"],
                                  swag.SwagTask()], ids=lambda t: t.name)
def test_a_buffer_as_large_as_the_split_gives_the_in_memory_batches(task, tokenizer):
    path = task.split_path(task.sample_dir(), "train")
    memory = task.featurize(task.read_file(path, "train"), tokenizer, 40)
    rows = len(memory.labels)
    # A generator chunk smaller than the split: rows cross chunk boundaries.
    chunk, streaming.CHUNK = streaming.CHUNK, 64
    try:
        for buffer in (rows, 10 * rows):  # the buffer is min(buffer, rows) either way
            streamed = streaming.StreamedFeatures(task, path, tokenizer, 40, buffer)
            assert pipeline.num_rows(streamed) == len(streamed.examples) == rows
            for seed in (7, 1042):
                for group in (0, 2):  # --group_by_length windows of 2 batches, too
                    _same_batches(
                        _batches(pipeline.dataset_of(streamed, 16, seed, group_by_length=group)),
                        _batches(pipeline.dataset_of(memory, 16, seed, group_by_length=group)))
        _same_batches(_batches(pipeline.dataset_of(streamed, 16)),  # unshuffled: file order
                      _batches(pipeline.dataset_of(memory, 16)))
    finally:
        streaming.CHUNK = chunk


def test_a_smaller_buffer_shuffles_locally_and_keeps_every_example(tokenizer):
    task = glue.TASKS["sst2"]
    path = task.split_path(task.sample_dir(), "train")
    streamed = streaming.StreamedFeatures(task, path, tokenizer, 32, 16, limit=100)
    memory = task.featurize(task.read_file(path, "train")[:100], tokenizer, 32)
    assert len(streamed.examples) == 100
    assert [e.guid for e in streamed.examples] == [e.guid for e in memory.examples]

    def rows(batches):
        return [tuple(ids[ids > 0]) + (int(label),) for inputs, labels in batches
                for ids, label in zip(inputs["token_ids"], labels)]

    want = rows(_batches(pipeline.dataset_of(memory, 8)))  # file order
    for seed in (1, 2):
        got = rows(_batches(pipeline.dataset_of(streamed, 8, shuffle_seed=seed)))
        assert collections.Counter(got) == collections.Counter(want)  # each example once
        assert got != want
        # A buffer of 16: the k-th row out is one of the first k + 16 rows of the file.
        first_seen = {row: i for i, row in reversed(list(enumerate(want)))}
        assert all(first_seen[row] < k + 16 for k, row in enumerate(got))


def test_when_a_run_streams(tmp_path, monkeypatch):
    def config(**overrides):
        return RunConfig(**{**RUN, "output_dir": str(tmp_path / "run"), **overrides})

    sst2, squad_v1 = glue.TASKS["sst2"], squad.TASKS["squad_v1"]
    assert not streaming.should_stream(config(), sst2)  # auto: the 160-row sample is small
    monkeypatch.setattr(streaming, "AUTO_MIN_BYTES", 1000)
    assert streaming.should_stream(config(), sst2)
    assert not streaming.should_stream(config(stream_train_data="false"), sst2)
    assert not streaming.should_stream(config(task="squad_v1"), squad_v1)  # auto: in memory
    with pytest.raises(InputError, match=r"^--stream_train_data=true: the squad_v1 task reads "
                                         r"its training file whole"):
        streaming.should_stream(config(task="squad_v1", stream_train_data="true"), squad_v1)
    with pytest.raises(InputError, match=r"^--stream_train_data=true: --feature_cache_dir"):
        streaming.should_stream(config(stream_train_data="true",
                                       feature_cache_dir=str(tmp_path)), sst2)
    with pytest.raises(InputError, match=r"^--shuffle_buffer_size=0: must be a positive"):
        config(shuffle_buffer_size=0)


def test_a_training_file_changed_after_its_check_is_an_error(tmp_path, tokenizer):
    task = glue.TASKS["sst2"]
    path = tmp_path / "train.tsv"
    path.write_text("sentence\tlabel\na good film\t1\na bad film\t0\n")
    streamed = streaming.StreamedFeatures(task, str(path), tokenizer, 16, 10)
    path.write_text("sentence\tlabel\na good film\t1\n")
    with pytest.raises(InputError, match=r"train.tsv: changed since training started"):
        streamed.make_dataset(2, shuffle_seed=1)


# --- Whole runs ------------------------------------------------------------------------------

def _config(out, **overrides):
    return RunConfig(**{**RUN, "output_dir": str(out), **overrides})


def _step_losses(out):
    losses = {}
    for path in glob.glob(str(out / "tensorboard" / "*tfevents*")):
        for record in tf.data.TFRecordDataset(path):
            event = tf.compat.v1.Event.FromString(record.numpy())
            for v in event.summary.value:
                if v.tag == "train/loss":
                    losses[event.step] = float(tf.make_ndarray(v.tensor))
    return [losses[k] for k in sorted(losses)]


def _history(out):
    with open(out / "history.csv") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def in_memory(tmp_path_factory):
    """An uninterrupted in-memory run: (its metrics, its output folder)."""
    out = tmp_path_factory.mktemp("memory") / "run"
    return run_lib.execute(_config(out, stream_train_data="false")), out


def _same_training(out, reference):
    metrics, straight = reference
    assert json.loads((out / "metrics.json").read_text()) == pytest.approx(metrics, abs=1e-6)
    want = _step_losses(straight)
    assert len(want) == 10
    assert _step_losses(out) == pytest.approx(want, abs=1e-6)
    assert [(r["step"], r["train_loss"], r["train_accuracy"]) for r in _history(out)] == [
        (r["step"], r["train_loss"], r["train_accuracy"]) for r in _history(straight)]


def test_a_streamed_run_trains_like_the_in_memory_run(tmp_path, in_memory, capsys,
                                                      interrupt_at):
    out = tmp_path / "run"
    disarm = interrupt_at("train_step", 7)  # stands in for a SIGKILL at step 7
    with pytest.raises(KeyboardInterrupt):
        run_lib.execute(_config(out, stream_train_data="true"))
    disarm()
    capsys.readouterr()
    run_lib.execute(_config(out, stream_train_data="true"))
    log = capsys.readouterr().out
    assert "kerasbert: streaming the training file" in log
    assert "after epoch 1, step 1 into the next" in log  # the step-6 checkpoint
    _same_training(out, in_memory)


def _cli(out, kill_at=None, **extra):
    flags = {**RUN, "stream_train_data": "true", **extra, "output_dir": out}
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop(faults.ENV, None)
    if kill_at:
        env[faults.ENV] = kill_at
    return subprocess.run([sys.executable, "-m", "kerasbert.main"]
                          + [f"--{k}={v}" for k, v in flags.items()],
                          check=False, capture_output=True, text=True, timeout=600, env=env)


@pytest.mark.large
def test_a_streamed_run_sigkilled_mid_epoch_resumes_to_the_same_end(tmp_path, in_memory):
    out = tmp_path / "run"
    killed = _cli(out, "checkpoint:7")  # step 7: 2 steps into epoch 2
    assert killed.returncode == -9, killed.stderr[-2000:]
    resumed = _cli(out)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "resuming at phase 1, after epoch 1, step 2 into the next" in resumed.stdout
    _same_training(out, in_memory)


def test_a_bad_line_deep_in_a_streamed_file_fails_before_anything_is_written(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    rows = ["sentence\tlabel"] + [f"row {i} is fine\t{i % 2}" for i in range(3000)]
    rows[2500] = "row 2499 has a label\tpositive"  # line 2501, past the first chunks
    (data / "train.tsv").write_text("\n".join(rows) + "\n")
    sample = glue.TASKS["sst2"].sample_dir()
    shutil.copy(os.path.join(sample, "dev.tsv"), data / "dev.tsv")
    out = tmp_path / "run"
    result = _cli(out, data_dir=data, max_train_examples=100)  # every line is still checked
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        f"kerasbert: error: {data / 'train.tsv'}:2501: label 'positive' is not a sst2 label; "
        "expected one of 0, 1")
    assert "Traceback" not in result.stderr
    assert not out.exists()


# --- CoNLL-2003: sentences that may make several rows, a tag scheme over the whole file ---------

_WORDS = ("Schwarzenkopfberger", "met", "Vanderslootenberg", "in", "Lisbon", "and", "Osaka", ".")
# IOB1 (the original release): entities start with I-, B- only right after one of the same type.
_IOB1 = ("I-PER", "O", "I-PER", "O", "I-LOC", "O", "I-LOC", "O")


def _conll_file(path, sentences=30, long_every=7, bad_line=None):
    """An IOB1 CoNLL file: short sentences, and every `long_every`-th one 40 words long (over
    a row of max_seq_length 32, so it makes several rows); returns the line of each sentence's
    first word. `bad_line`: the word at that line gets the tag B-FOO."""
    lines, firsts = ["-DOCSTART- -X- -X- O", ""], []
    for n in range(sentences):
        length = 40 if n % long_every == 3 else 3 + n % 5
        firsts.append(len(lines) + 1)
        for k in range(length):
            tag = "B-FOO" if len(lines) + 1 == bad_line else _IOB1[(n + k) % 8]
            lines.append(f"{_WORDS[(n + k) % 8]} NNP B-NP {tag}")
        lines.append("")
    path.write_text("\n".join(lines) + "\n")
    return firsts


@pytest.mark.parametrize("source", ["sample", "iob1"])
def test_streamed_conll_gives_the_in_memory_batches(source, tokenizer, tmp_path, monkeypatch):
    task = conll.ConllTask()
    if source == "sample":  # 200 real-looking IOB2 sentences, some over 62 pieces
        path, length = task.split_path(task.sample_dir(), "train"), 64
    else:
        path, length = tmp_path / "train.txt", 32
        _conll_file(path)
    sentences = task.read_file(str(path), "train")
    memory = task.featurize(sentences, tokenizer, length)
    rows = len(memory.labels)
    assert rows > len(sentences)  # some sentences make 2 or more rows
    monkeypatch.setattr(streaming, "CHUNK", 8)  # sentences and rows cross chunk boundaries
    task.schemes_found.clear()
    streamed = streaming.StreamedFeatures(task, str(path), tokenizer, length, rows)
    assert task.schemes_found == {"train": "IOB2" if source == "sample" else "IOB1"}
    assert pipeline.num_rows(streamed) == rows and len(streamed.examples) == len(sentences)
    assert list(streamed.examples) == sentences  # IOB1 read as IOB2 in both
    for seed in (None, 7, 1042):
        _same_batches(_batches(pipeline.dataset_of(streamed, 8, seed, labels_per_token=True)),
                      _batches(pipeline.dataset_of(memory, 8, seed, labels_per_token=True)))
    # --max_train_examples counts sentences, as in memory; the rows are theirs.
    limit = int(np.flatnonzero(np.bincount(memory.extra["row_sentence"]) > 1)[0]) + 2
    limited = streaming.StreamedFeatures(task, str(path), tokenizer, length, 1000, limit=limit)
    want = task.featurize(sentences[:limit], tokenizer, length)
    assert pipeline.num_rows(limited) == len(want.labels) > limit
    assert len(limited.examples) == limit
    _same_batches(_batches(pipeline.dataset_of(limited, 4, 3, labels_per_token=True)),
                  _batches(pipeline.dataset_of(want, 4, 3, labels_per_token=True)))


def test_a_bad_tag_deep_in_a_streamed_conll_file_is_one_error_at_its_line(tmp_path, tokenizer,
                                                                          monkeypatch):
    monkeypatch.setattr(streaming, "CHUNK", 16)
    path = tmp_path / "train.txt"
    firsts = _conll_file(path, sentences=400)
    bad = firsts[350] + 1  # past many chunks
    _conll_file(path, sentences=400, bad_line=bad)
    message = (f"{path}:{bad}: 'B-FOO' is not a CoNLL-2003 NER tag; expected one of "
               f"{', '.join(conll.LABELS)}")
    with pytest.raises(InputError) as error:  # also with a limit: every line is checked
        streaming.StreamedFeatures(conll.ConllTask(), str(path), tokenizer, 32, 100, limit=10)
    assert str(error.value) == message
    out = tmp_path / "run"  # a run fails the same way before its output folder exists
    with pytest.raises(InputError) as error:
        run_lib.execute(_config(out, task="conll2003", data_dir=str(tmp_path),
                                 stream_train_data="true", max_train_examples=10))
    assert str(error.value) == message and not out.exists()
    # A declared scheme the file contradicts is the error read_conll_file gives, at the
    # first line that contradicts it, once the counting pass has seen the whole file.
    _conll_file(path, sentences=400)
    with pytest.raises(InputError, match=rf"^{path}:{firsts[0]}: I-PER starts an entity, "
                                         r"which IOB2 does not allow"):
        streaming.StreamedFeatures(conll.ConllTask("iob2"), str(path), tokenizer, 32, 100)


def test_when_a_conll_run_streams(tmp_path, monkeypatch):
    task = conll.ConllTask()

    def config(**overrides):
        return RunConfig(**{**RUN, "task": "conll2003", "output_dir": str(tmp_path / "run"),
                            **overrides})

    assert not streaming.should_stream(config(), task)  # auto: the sample is small
    assert streaming.should_stream(config(stream_train_data="true"), task)
    monkeypatch.setattr(streaming, "AUTO_MIN_BYTES", 1000)
    assert streaming.should_stream(config(), task)
    assert not streaming.should_stream(config(stream_train_data="false"), task)
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.txt").write_text("EU NNP B-NP B-ORG\n")  # 18 bytes: below the threshold
    assert not streaming.should_stream(config(data_dir=str(data)), task)


def test_a_streamed_conll_run_trains_like_the_in_memory_run(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    _conll_file(data / "train.txt", sentences=20)  # 22 rows at max_seq_length 32
    shutil.copy(os.path.join(conll.TASK.sample_dir(), "valid.txt"), data / "valid.txt")
    runs = {}
    for mode in ("false", "true"):
        out = tmp_path / mode
        metrics = run_lib.execute(_config(
            out, task="conll2003", data_dir=str(data), stream_train_data=mode,
            max_train_examples=None, max_eval_examples=8, save_checkpoints_steps=0))
        runs[mode] = metrics, _step_losses(out), _history(out)
    assert "kerasbert: streaming the training file" in capsys.readouterr().out
    (metrics, losses, history), (metrics_s, losses_s, history_s) = runs["false"], runs["true"]
    # An epoch is ceil(rows / 8) steps (the long sentences make several rows), both ways.
    tokenizer = WordPieceTokenizer(str(tmp_path / "false" / "encoder" / "vocab.txt"))
    task = copy.copy(conll.TASK)
    rows = len(task.featurize(task.read_file(str(data / "train.txt"), "train"), tokenizer,
                              32).inputs["token_ids"])
    assert rows > 20 and len(losses) == 2 * -(-rows // 8)
    assert losses_s == pytest.approx(losses, abs=1e-6)
    assert metrics_s == pytest.approx(metrics, abs=1e-6)
    assert [r["step"] for r in history_s] == [r["step"] for r in history]


# --- Held without padding (CompactFeatures) ---------------------------------------------------

@pytest.mark.parametrize("task", [glue.TASKS["sst2"], glue.TASKS["mrpc"], glue.TASKS["stsb"],
                                  conll.ConllTask()], ids=lambda t: t.name)
def test_a_split_held_without_padding_gives_the_in_memory_batches(task, tokenizer,
                                                                  monkeypatch):
    path = task.split_path(task.sample_dir(), "train")
    per_token = task.name == "conll2003"
    length = 64 if per_token else 40  # CoNLL: some sentences make 2 rows
    memory = task.featurize(task.read_file(path, "train"), tokenizer, length)
    monkeypatch.setattr(streaming, "CHUNK", 8)  # rows cross chunk boundaries
    held = streaming.CompactFeatures(task, path, tokenizer, length, labels_per_token=per_token)
    assert pipeline.num_rows(held) == len(memory.labels)
    assert len(held.examples) == len(memory.examples)
    # The padded arrays' bytes against the held ones: the point of holding it so.
    padded = sum(v.nbytes for v in memory.inputs.values()) + memory.labels.nbytes
    assert held.nbytes() < padded / 4, (held.nbytes(), padded)
    for seed in (None, 7, 1042):
        for group in (0, 2):
            _same_batches(_batches(pipeline.dataset_of(held, 8, seed, per_token, group)),
                          _batches(pipeline.dataset_of(memory, 8, seed, per_token, group)))
    # --max_train_examples counts examples, as in memory
    limited = streaming.CompactFeatures(task, path, tokenizer, length, limit=30,
                                        labels_per_token=per_token)
    want = task.featurize(task.read_file(path, "train")[:30], tokenizer, length)
    assert len(limited.examples) == 30 and pipeline.num_rows(limited) == len(want.labels)
    _same_batches(_batches(pipeline.dataset_of(limited, 4, 3, per_token)),
                  _batches(pipeline.dataset_of(want, 4, 3, per_token)))


def test_when_a_run_holds_its_split_without_padding(tmp_path, monkeypatch):
    from kerasbert import plugins

    registry = plugins.registry()

    def config(**overrides):
        return RunConfig(**{**RUN, "output_dir": str(tmp_path / "run"), **overrides})

    sst2, swag_task = glue.TASKS["sst2"], swag.SwagTask()
    kind, choice_kind = registry.kind_of(sst2), registry.kind_of(swag_task)
    assert not streaming.should_hold_compact(config(), sst2, kind)  # the sample is small
    monkeypatch.setattr(streaming, "AUTO_MIN_BYTES", 1000)
    assert streaming.should_hold_compact(config(), sst2, kind)
    assert not streaming.should_stream(config(), sst2, kind)  # held, below STREAM_MIN_BYTES
    assert streaming.should_hold_compact(config(stream_train_data="false"), sst2, kind)
    assert streaming.should_stream(config(stream_train_data="true"), sst2, kind)
    # SWAG's rows are [rows, choices, seq]: auto streams it from AUTO_MIN_BYTES, as before.
    assert not streaming.should_hold_compact(config(task="swag"), swag_task, choice_kind)
    assert streaming.should_stream(config(task="swag"), swag_task, choice_kind)
    assert not streaming.should_hold_compact(config(feature_cache_dir=str(tmp_path)), sst2,
                                             kind)
    monkeypatch.setattr(streaming, "STREAM_MIN_BYTES", 2000)
    assert streaming.should_stream(config(), sst2, kind)  # the 7 KB sample: streamed


def test_a_run_holding_its_split_without_padding_trains_as_in_memory(tmp_path, monkeypatch):
    real = streaming.CompactFeatures
    padded = run_lib.execute(RunConfig(**{**RUN, "output_dir": str(tmp_path / "padded"),
                                          "save_checkpoints_steps": 0}))
    monkeypatch.setattr(streaming, "AUTO_MIN_BYTES", 1000)
    made = []
    monkeypatch.setattr(streaming, "CompactFeatures",
                        lambda *a, **k: made.append(1) or real(*a, **k))
    held = run_lib.execute(RunConfig(**{**RUN, "output_dir": str(tmp_path / "held"),
                                        "save_checkpoints_steps": 0}))
    assert made and held == padded
