"""A command's stderr holds only what kerasbert means to say: TensorFlow's C++ start-up
lines are kept off it (kerasbert/startup.py), unless --verbose or the user's own
TF_CPP_MIN_LOG_LEVEL asks for them."""

import os
import subprocess
import sys

import pytest

import kerasbert
from kerasbert import startup

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(kerasbert.__file__)))
# What TensorFlow 2.21 printed before every command on a machine without a GPU.
CHATTER = """\
WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
I0000 00:00:1796116471.473022   19058 cudart_stub.cc:31] Could not find cuda drivers on your \
machine, GPU will not be used.
I0000 00:00:1796116471.557258   19058 cpu_feature_guard.cc:227] This TensorFlow binary is \
optimized to use available CPU instructions in performance-critical operations.
To enable the following instructions: AVX2 FMA, in other operations, rebuild TensorFlow with \
the appropriate compiler flags.
2025-09-17 14:44:05.163208: I external/local_xla/xla/tsl/cuda/cudart_stub.cc:32] Could not \
find cuda drivers on your machine, GPU will not be used.
E0000 00:00:1796116481.154661   19058 cuda_platform.cc:52] failed call to cuInit: INTERNAL: \
CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)
/usr/lib/python3/numpy/__init__.py:7: UserWarning: something Python says
  warnings.warn("something Python says")
"""
PYTHON_LINES = CHATTER.splitlines(keepends=True)[-2:]


def test_only_kerasbert_commands_quiet_tensorflow():
    assert startup.started_as_command(["python", "-m", "kerasbert.main", "--task=sst2"], ["-m"])
    assert startup.started_as_command(["python3", "-u", "-X", "importtime", "-W", "ignore",
                                       "-m", "kerasbert.landscape"], ["-m"])
    assert startup.started_as_command(["python", "-mkerasbert.evaluate"], ["-m"])
    assert startup.started_as_command(["/usr/bin/python3", "/usr/local/bin/kerasbert"],
                                      ["/usr/local/bin/kerasbert", "--task=sst2"])
    assert not startup.started_as_command(["python", "-m", "pytest"], ["-m"])
    assert not startup.started_as_command(["python", "-c", "import kerasbert"], ["-c"])
    assert not startup.started_as_command(["python", "train.py", "-m", "kerasbert.x"],
                                          ["train.py", "-m", "kerasbert.x"])
    assert not startup.started_as_command(["python"], [""])  # an interactive session
    assert startup.verbose(["kerasbert", "--task=sst2", "--verbose"])
    assert startup.verbose(["kerasbert", "--verbose=true"])
    assert not startup.verbose(["kerasbert", "--noverbose", "--verbose=false"])


def test_import_lines_are_filtered_by_the_log_level():
    assert startup.filtered(CHATTER, 3) == "".join(PYTHON_LINES)  # Python's own lines stay
    assert startup.filtered(CHATTER, 2) == "".join(
        [line for line in CHATTER.splitlines(keepends=True) if "cuInit" in line]
        + PYTHON_LINES)
    kept = startup.filtered(CHATTER, 1)
    assert "cpu_feature_guard" not in kept and "To enable" not in kept
    assert "All log messages before absl" in kept and "cuInit" in kept
    assert startup.filtered(CHATTER, 0) == CHATTER


def _command(*args, **env):
    """`python -m <args>` with a clean environment: no TF_CPP_MIN_LOG_LEVEL (conftest sets
    one), no CUDA_VISIBLE_DEVICES; `env` added."""
    clean = {k: v for k, v in os.environ.items()
             if k not in ("TF_CPP_MIN_LOG_LEVEL", "CUDA_VISIBLE_DEVICES")}
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=False,
                          env={**clean, "PYTHONPATH": ROOT, **env})


def test_a_command_starts_without_tensorflows_lines():
    result = _command("kerasbert.main", "--list_tasks")  # imports TensorFlow, starts devices
    assert result.returncode == 0 and "sst2" in result.stdout
    for word in ("cuda", "cpu_feature_guard", "onednn", "absl"):
        assert word not in result.stderr.lower(), result.stderr
    assert result.stderr == ""


@pytest.mark.large
def test_every_entry_point_starts_quietly_and_verbose_shows_everything(tmp_path):
    for args, line in [
        (["kerasbert.landscape"], "kerasbert: error: --run_dir: required"),
        (["kerasbert.export.saved_model", f"--run_dir={tmp_path / 'nope'}",
          f"--export_dir={tmp_path / 'serving'}"], "kerasbert: error: "),
        (["kerasbert.pretrain"], "kerasbert: error: --input_file: required"),
        (["kerasbert.pretraining.create_data"], "kerasbert: error: --input_file: required"),
        (["kerasbert.main", "--task=sst2", "--learning_rates=2e-5,fast"],
         "kerasbert: error: --learning_rates: 'fast' is not a number"),  # the sweep's
    ]:
        result = _command(*args)
        assert result.returncode == 2
        assert result.stderr.splitlines() == [result.stderr.splitlines()[0]], result.stderr
        assert result.stderr.startswith(line), result.stderr
    # --verbose, or the user's own level, shows what TensorFlow prints.
    for result in (_command("kerasbert.main", "--list_tasks", "--verbose"),
                   _command("kerasbert.main", "--list_tasks", TF_CPP_MIN_LOG_LEVEL="0")):
        assert result.returncode == 0
        assert any(startup._LOG_LINE.match(line) for line in result.stderr.splitlines())


EXTRAS_PROBE = """
import sys
{argv}
import kerasbert, tensorflow, keras_hub
from keras.src.trainers.data_adapters import array_slicing
print(sorted(m for m in {extras!r} if sys.modules.get(m) is not None))
print(array_slicing.pandas is None)
import pandas  # as usual, afterwards
print(pandas.DataFrame({{"a": [1]}}).shape)
"""


def test_a_command_imports_tensorflow_without_keras_unused_extras():
    pytest.importorskip("pandas")  # Keras imports it only where it is installed
    pytest.importorskip("IPython")
    extras = startup.KERAS_EXTRAS

    def probe(as_command):
        argv = "sys.argv = ['kerasbert']" if as_command else ""
        result = subprocess.run(
            [sys.executable, "-c", EXTRAS_PROBE.format(argv=argv, extras=extras)], cwd=ROOT,
            capture_output=True, text=True, timeout=300, check=False,
            env={**os.environ, "PYTHONPATH": ROOT})
        assert result.returncode == 0, result.stderr[-2000:]
        return result.stdout.splitlines()[-3:]

    assert probe(as_command=True) == ["[]", "True", "(1, 1)"]
    # a program that imports kerasbert keeps Keras as it is
    assert probe(as_command=False) == [str(sorted(extras)), "False", "(1, 1)"]
