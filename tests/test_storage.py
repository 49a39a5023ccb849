"""What a finished run keeps on disk, and runs whose --output_dir is on another filesystem
TensorFlow has (the in-memory ram://, standing in for gs://)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from kerasbert import plugins, restarts, run_folder
from kerasbert import run as run_lib
from kerasbert.config import RunConfig
from kerasbert.export import saved_model
from kerasbert.model import encoders

TINY = dict(task="sst2", init_checkpoint="random", model_size="2/32/2", max_seq_length=32,
            train_batch_size=8, eval_batch_size=16, num_train_epochs=1.0, seed=1,
            max_train_examples=16, max_eval_examples=16)


def _weights(layer):
    return [w.numpy() for w in layer.weights]


def test_a_finished_run_keeps_each_thing_once_and_no_resume_state(tmp_path):
    out = tmp_path / "run"
    config = RunConfig(**TINY, output_dir=str(out))
    run_lib.execute(config)
    assert sorted(os.listdir(out)) == [
        "curves.png", "encoder", "eval_results.txt", "failure_check.json", "grad_norms.csv",
        "history.csv", "metrics.json", "model.weights.h5", "report.md", "run_config.json",
        "tensorboard"]
    assert "[checkpoints/]" not in (out / "report.md").read_text()  # its list of files
    # encoder/ holds no weights of its own: they are model.weights.h5's encoder part
    assert sorted(os.listdir(out / "encoder")) == ["encoder_config.json", "vocab.txt"]
    trained = saved_model.load_run(str(out)).model.backbone
    for where in (out, out / "encoder"):  # --init_checkpoint= either
        loaded = encoders.load_encoder(str(where))
        assert loaded.source == "kerasbert_run"
        for got, want in zip(_weights(loaded.backbone), _weights(trained), strict=True):
            np.testing.assert_array_equal(got, want)
    # an experiment asking for it with --keep_checkpoints still reuses the finished run
    wanted = RunConfig(**TINY, output_dir=str(out), keep_checkpoints=True)
    restarts.check_reusable([run_lib.resolve(wanted, plugins.registry())[1]])
    assert run_folder.is_finished(str(out))

    (out / "model.weights.h5").unlink()
    with pytest.raises(Exception, match=r"model\.weights\.h5: missing: a fine-tuning run"):
        encoders.load_encoder(str(out))


def test_keep_checkpoints_keeps_the_resume_state(tmp_path):
    out = tmp_path / "run"
    run_lib.execute(RunConfig(**TINY, output_dir=str(out), keep_checkpoints=True))
    assert tf.train.latest_checkpoint(str(out / "checkpoints")) is not None


def test_a_run_on_the_ram_filesystem_writes_every_output_there(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where a local ./ram:/... folder would appear
    out, export = "ram://runs/storage-test", "ram://exports/storage-test"
    metrics = run_lib.execute(RunConfig(**TINY, output_dir=out, export_dir=export,
                                        do_predict=True))
    assert os.listdir(tmp_path) == []
    gfile = tf.io.gfile
    assert sorted(gfile.listdir(out)) == [
        "curves.png", "encoder", "eval_results.txt", "export.json", "failure_check.json",
        "grad_norms.csv", "history.csv", "metrics.json", "model.weights.h5", "report.md",
        "run_config.json", "tensorboard", "test_results.tsv"]
    assert json.loads(gfile.GFile(f"{out}/metrics.json").read()) == metrics
    assert gfile.GFile(f"{out}/test_results.tsv").read().startswith("index\tprediction\n")
    assert any("tfevents" in name for name in gfile.listdir(f"{out}/tensorboard"))
    assert gfile.listdir(export) == ["1"]
    assert gfile.exists(f"{export}/1/saved_model.pb")
    # the run reads back from there: its model, and its encoder for --init_checkpoint
    run = saved_model.load_run(out)
    loaded = encoders.load_encoder(out)
    for got, want in zip(_weights(loaded.backbone), _weights(run.model.backbone), strict=True):
        np.testing.assert_array_equal(got, want)
    # and it is a finished run like a local one
    with pytest.raises(Exception, match=r"holds a finished run"):
        run_lib.execute(RunConfig(**TINY, output_dir=out))


@pytest.mark.parametrize("output_dir, reason", [
    ("foo://bucket/run", "TensorFlow has no filesystem for foo://"),
    ("/proc/kerasbert-storage-test/run", r"cannot create it \(No such file or directory\)"),
])
def test_an_output_dir_that_cannot_be_written_is_one_line_exit_2(tmp_path, output_dir, reason):
    result = subprocess.run(
        [sys.executable, "-m", "kerasbert.main", "--task=sst2", "--init_checkpoint=random",
         "--model_size=2/32/2", f"--output_dir={output_dir}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("kerasbert")]
    assert len(errors) == 1
    assert errors[0].startswith(f"kerasbert: error: --output_dir={output_dir}: ")
    assert __import__("re").search(reason, errors[0])
    assert os.listdir(tmp_path) == []  # no ./foo:/bucket/run


def test_a_worker_of_a_multi_worker_run_on_gs_resumes_from_the_chiefs_checkpoints(monkeypatch):
    from kerasbert import distribute

    chief = "ram://runs/multi-worker/checkpoints"
    tf.io.gfile.makedirs(chief)
    for name, text in (("ckpt-3.index", "i"), ("ckpt-3.data-00000-of-00001", "d"),
                       ("checkpoint", "model_checkpoint_path: \"ckpt-3\"\n")):
        with tf.io.gfile.GFile(f"{chief}/{name}", "w") as f:
            f.write(text)
    monkeypatch.setattr(distribute, "is_chief", lambda strategy: False)
    folder = distribute.worker_output_dir(None, "ram://runs/multi-worker")
    try:
        assert sorted(os.listdir(os.path.join(folder, "checkpoints"))) == [
            "checkpoint", "ckpt-3.data-00000-of-00001", "ckpt-3.index"]
        assert open(os.path.join(folder, "checkpoints", "ckpt-3.data-00000-of-00001")).read() == "d"
    finally:
        distribute.discard_worker_output(None, folder)
    assert not os.path.exists(folder)
