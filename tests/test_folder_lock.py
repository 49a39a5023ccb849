"""Two processes on one folder: the second `kerasbert.main`, sweep or landscape refuses with
one line naming the folder and the process holding it; the lock dies with its holder, so a
SIGKILLed run resumes with the same command (kerasbert/run_folder.py, `lock`)."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import kerasbert
from kerasbert import distribute, run_folder, sweep
from kerasbert import run as run_lib
from kerasbert.config import RunConfig
from kerasbert.errors import InputError
from kerasbert.landscape import cli as landscape_cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(kerasbert.__file__)))
TINY = {"task": "stsb", "init_checkpoint": "random", "model_size": "2/32/2",
        "max_seq_length": 32}


def _holder(folder):
    return json.loads((folder / run_folder.LOCK).read_text())


# --- In one process ----------------------------------------------------------------------

def test_a_held_folder_refuses_a_second_lock_naming_the_holder(tmp_path):
    out = tmp_path / "new" / "run"
    with run_folder.lock(str(out)) as held:
        assert os.listdir(out) == [run_folder.LOCK]
        holder = _holder(out)
        assert holder["pid"] == os.getpid() and holder["command"]
        # A second open of the file is a second holder, even in the same process.
        with pytest.raises(InputError) as info:
            run_folder.lock(str(out), "--run_dir")
        assert str(info.value).startswith(
            f"--run_dir={out}: in use by process {os.getpid()} (")
        assert str(info.value).endswith("); wait for it to end, or stop it")
        assert "\n" not in str(info.value)
    assert held._fd is None
    # Released: the folders it made only for the lock are gone again.
    assert not (tmp_path / "new").exists()
    # A folder that got files keeps them (and loses only the lock).
    with run_folder.lock(str(out)):
        (out / "run_config.json").write_text("{}")
    assert os.listdir(out) == ["run_config.json"]


def test_a_lock_file_left_by_a_dead_process_does_not_block(tmp_path):
    (tmp_path / run_folder.LOCK).write_text('{"pid": 999999999, "command": "killed"}\n')
    with run_folder.lock(str(tmp_path)):
        assert _holder(tmp_path)["pid"] == os.getpid()


def test_a_folder_that_cannot_be_made_is_one_line(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    with pytest.raises(InputError, match=rf"^--output_dir={blocker}/run: cannot create it "
                                         r"\(Not a directory\)$"):
        run_folder.lock(str(blocker / "run"))


def test_a_folder_the_system_refuses_says_why_at_once():
    # mkdir under /proc fails with ENOENT however often it is tried: the reason is shown,
    # not a bare "cannot take its lock" after 100 tries.
    with pytest.raises(InputError, match=r"^--output_dir=/proc/kerasbert/run: cannot create it "
                                         r"\(No such file or directory\)$"):
        run_folder.lock("/proc/kerasbert/run")
    assert not os.path.exists("/proc/kerasbert")


def test_a_scheme_tensorflow_lacks_is_one_line_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where os.makedirs would have made ./foo:/x
    with pytest.raises(InputError, match=r"^--output_dir=foo://x: TensorFlow has no filesystem "
                                         r"for foo://"):
        run_folder.lock("foo://x")
    assert os.listdir(tmp_path) == []


def test_on_an_object_store_the_lock_names_the_process_and_refuses_a_live_one():
    import socket

    import tensorflow as tf

    folder = "ram://lock-test/run"
    with run_folder.lock(folder):
        holder = json.loads(tf.io.gfile.GFile(f"{folder}/{run_folder.LOCK}").read())
        assert holder["pid"] == os.getpid()
    assert not tf.io.gfile.exists(folder)  # made for the lock only: removed again
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        tf.io.gfile.makedirs(folder)
        with tf.io.gfile.GFile(f"{folder}/{run_folder.LOCK}", "w") as f:
            f.write(json.dumps({"pid": other.pid, "host": socket.gethostname(),
                                "command": "sleeper"}))
        with pytest.raises(InputError, match=rf"in use by process {other.pid} \(sleeper\)"):
            run_folder.lock(folder)
    finally:
        other.kill()
        other.wait()
    with run_folder.lock(folder):  # its holder is dead: taken over
        assert json.loads(tf.io.gfile.GFile(f"{folder}/{run_folder.LOCK}").read())["pid"] == (
            os.getpid())


def test_the_lock_does_not_make_a_fresh_folder_foreign_and_survives_starting_over(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    config = RunConfig(**TINY, output_dir=str(out))
    with run_folder.lock(str(out)):
        assert run_folder.check(config) == (False, False)  # empty but for the lock: new
        run_folder.prepare(config)
        run_folder.write_config(str(out), config)
        run_folder.write_metrics(str(out), {"pearson": 0.5})
        # --overwrite_output_dir removes the run's files, not the lock it is held by.
        run_folder.prepare(RunConfig(**TINY, output_dir=str(out), overwrite_output_dir=True))
        assert os.listdir(out) == [run_folder.LOCK]
        with pytest.raises(InputError, match="in use by process"):
            run_folder.lock(str(out))
    assert os.listdir(out) == []  # it existed before this lock: kept, empty


def test_only_the_chief_of_a_multi_worker_run_takes_the_folder(tmp_path, monkeypatch):
    cluster = {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}
    for index, chief in ((0, True), (1, False)):
        monkeypatch.setenv("TF_CONFIG", json.dumps(
            {"cluster": cluster, "task": {"type": "worker", "index": index}}))
        assert distribute.writes_outputs("multi_worker") is chief
        config = RunConfig(**TINY, output_dir=str(tmp_path / "run"),
                           distribution_strategy="multi_worker")
        with run_lib.take_output_dir(config):
            assert (tmp_path / "run").exists() is chief  # a worker writes to a temp folder
    monkeypatch.delenv("TF_CONFIG")
    assert distribute.writes_outputs("multi_worker") and distribute.writes_outputs("one_device")


# --- A folder held by another process ----------------------------------------------------

HOLDER = """
    import sys, time
    from kerasbert import run_folder
    held = run_folder.lock(sys.argv[1])
    print("held", flush=True)
    time.sleep(600)
"""


@pytest.fixture
def held_by_another_process(tmp_path):
    """(folder, process): a folder another process holds until it is killed."""
    folder = tmp_path / "held"
    folder.mkdir()
    process = subprocess.Popen([sys.executable, "-c", textwrap.dedent(HOLDER), str(folder)],
                               cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT},
                               stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "held"
        yield folder, process
    finally:
        process.kill()
        process.wait()


def test_run_sweep_and_landscape_refuse_a_folder_in_use_until_its_holder_dies(
        held_by_another_process, capsys):
    folder, holder = held_by_another_process
    before = sorted(os.listdir(folder))
    in_use = rf"={folder}: in use by process {holder.pid} \(python -c .*\); wait for it to end"
    with pytest.raises(InputError, match=rf"^--output_dir{in_use}"):
        run_lib.execute(RunConfig(**TINY, output_dir=str(folder)))
    with pytest.raises(InputError, match=rf"^--output_dir{in_use}"):
        sweep.run_sweep(RunConfig(**TINY, output_dir=str(folder)), "1e-3,2e-3", 1,
                        execute=lambda *a: pytest.fail("ran"), log=lambda _: None)
    assert landscape_cli.main(["landscape", f"--run_dir={folder}"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith(
        f"kerasbert: error: --run_dir={folder}: in use by process {holder.pid} (python -c ")
    assert sorted(os.listdir(folder)) == before  # nothing written by the refused ones
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    with run_folder.lock(str(folder)):  # the kernel released it with the process
        pass


# --- Two real runs ---------------------------------------------------------------------

def _command(out, *extra):
    return [sys.executable, "-m", "kerasbert.main", "--task=stsb", "--init_checkpoint=random",
            "--model_size=2/32/2", "--max_seq_length=32", "--max_train_examples=32",
            "--train_batch_size=8", "--num_train_epochs=2", "--save_checkpoints_steps=1",
            f"--output_dir={out}", *extra]


def _env():
    return {**{k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"},
            "PYTHONPATH": ROOT}


def _wait_for(condition, process, timeout=300):
    deadline = time.monotonic() + timeout
    while not condition():
        assert process.poll() is None, process.communicate()[1][-2000:]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


@pytest.mark.large
def test_a_second_run_on_a_folder_in_use_refuses_and_a_killed_run_resumes(tmp_path):
    out = tmp_path / "run"
    first = subprocess.Popen(_command(out), cwd=ROOT, env=_env(), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        # Mid-training (a checkpoint written), frozen where it is, holding the folder.
        _wait_for(lambda: os.path.exists(out / "checkpoints" / "checkpoint"), first)
        first.send_signal(signal.SIGSTOP)
        before = sorted(os.listdir(out))
        assert run_folder.LOCK in before
        landscape_out = tmp_path / "landscape"
        seconds = [subprocess.Popen(command, cwd=ROOT, env=_env(), stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True) for command in (
            _command(out),  # the same run again
            _command(out, "--learning_rates=1e-3,2e-3"),  # a sweep into it
            [sys.executable, "-m", "kerasbert.landscape", f"--run_dir={out}",
             f"--output_dir={landscape_out}"])]
        results = [(p.wait(timeout=300), *p.communicate()) for p in seconds]
        for flag, (code, stdout, stderr) in zip(("--output_dir", "--output_dir", "--run_dir"),
                                                results):
            assert code == 2, stderr[-2000:]
            assert stderr.strip().splitlines() == [(  # one line: no TF start-up chatter
                f"kerasbert: error: {flag}={out}: in use by process {first.pid} "
                f"(python -m kerasbert.main --task=stsb --init_checkpoint=random "
                f"--model_size=2/32/2 --max_seq_length=32 --max_train_examples=32 "
                f"--train_batch_size=8 --num_train_epochs=2 --save_checkpoints_steps=1 "
                f"--output_dir={out}); wait for it to end, or stop it")], stderr
        assert sorted(os.listdir(out)) == before and not landscape_out.exists()
    finally:
        first.kill()  # SIGKILL, stopped or not
        first.communicate()
    assert first.returncode == -signal.SIGKILL
    assert not (out / "metrics.json").exists()
    # The same command again: the dead holder's lock is free; the run resumes and ends.
    resumed = subprocess.run(_command(out), cwd=ROOT, env=_env(), capture_output=True,
                             text=True, timeout=600, check=False)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "kerasbert: resuming at phase 1" in resumed.stdout
    assert resumed.stderr == ""
    assert (out / "metrics.json").exists() and run_folder.LOCK not in os.listdir(out)
