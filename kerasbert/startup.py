"""What a kerasbert command does first: keep TensorFlow's C++ start-up lines off stderr.

Measured with TensorFlow 2.21 on a machine without a GPU, every command began with

    WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
    I0000 ... cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will not be used.
    I0000 ... cpu_feature_guard.cc:227] This TensorFlow binary is optimized to use ...
    To enable the following instructions: AVX2 FMA, in other operations, rebuild ...
    E0000 ... cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: ...

before its first line. `TF_CPP_MIN_LOG_LEVEL`, read when TensorFlow loads, filters the
later ones (3: only FATAL; the cuInit line is an ERROR); the lines logged while its shared
libraries load, before absl's logging is set up, ignore it (tensorflow#100442). So a
command sets the level (`LEVEL`, unless the user set one), and the first `import
tensorflow`, whoever makes it (kerasbert, keras, keras-hub, tf-text), runs with stderr
captured; what it printed comes back filtered by the same level: TensorFlow's log lines
below it are dropped, everything else (Python warnings, errors) is written as it was.

Only commands do this (`python -m kerasbert.<module>`, the `kerasbert*` console scripts):
`kerasbert/__init__.py` calls `quiet_tensorflow()`, the only code that runs before every
entry module's imports. A program or notebook that imports kerasbert keeps its
environment and TensorFlow's output as they are. `--verbose`, or a TF_CPP_MIN_LOG_LEVEL
of 0, shows everything.
"""

import contextlib
import importlib.util
import os
import re
import sys
import tempfile

ENV = "TF_CPP_MIN_LOG_LEVEL"
LEVEL = "3"  # FATAL only: TF's errors also surface as Python exceptions, which are reported
_SEVERITY = {"I": 0, "W": 1, "E": 2, "F": 3}
_LOG_LINE = re.compile(r"(?:([IWEF])\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ \S+:\d+\]"  # absl
                       r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: ([IWEF]) \S+:\d+\])")  # TF's own
_ABSL_NOTICE = "WARNING: All log messages before absl::InitializeLog() is called"
_CONTINUED = ("To enable the following instructions:",)  # the 2nd line of cpu_feature_guard's
_VERBOSE = re.compile(r"--?verbose(=(true|t|1|yes|y))?", re.IGNORECASE)


def started_as_command(orig_argv=None, argv=None):
    """Whether this process is a kerasbert command: `python [options] -m kerasbert...`, or
    a console script named kerasbert* (setup.cfg's console_scripts)."""
    orig_argv = list(getattr(sys, "orig_argv", []) if orig_argv is None else orig_argv)
    argv = sys.argv if argv is None else argv
    i = 1
    while i < len(orig_argv):
        arg = orig_argv[i]
        if arg == "-m" or (arg.startswith("-m") and not arg.startswith("--")):
            module = orig_argv[i + 1] if arg == "-m" and i + 1 < len(orig_argv) else arg[2:]
            return module.split(".")[0] == "kerasbert"
        if not arg.startswith("-") or arg in ("-c", "-"):
            break  # a script, or code: look at the script's name below
        i += 2 if arg in ("-W", "-X") else 1
    return bool(argv) and os.path.basename(argv[0]).startswith("kerasbert")


def verbose(argv=None):
    """--verbose on the command line (read before the flags are parsed: TF loads first)."""
    return any(_VERBOSE.fullmatch(arg) for arg in (sys.argv if argv is None else argv)[1:])


# Keras imports these when they are installed (pandas: to accept DataFrames in fit;
# IPython: to tell a notebook, as keras-hub's kagglehub does; matplotlib.pyplot: an
# image-gallery plot), and a command uses none of that: ~108 MB of resident memory in
# every run (MiniLM MRPC, 2026-12-07, docs/experiments/speed-and-memory.md "Where the
# memory goes"). A command's first `import tensorflow` (which imports Keras) and
# `import keras_hub` run with them unimportable; afterwards they import as usual
# (kerasbert's own plots import matplotlib when they draw).
KERAS_EXTRAS = ("pandas", "IPython", "matplotlib")


def quiet_tensorflow():
    """In a kerasbert command: TF_CPP_MIN_LOG_LEVEL set (a user's own value is kept;
    --verbose sets none), and the first `import tensorflow` filtered by it and made
    without Keras' optional extras (KERAS_EXTRAS)."""
    if not started_as_command() or "tensorflow" in sys.modules:
        return
    if ENV not in os.environ and not verbose():
        os.environ[ENV] = LEVEL
    try:
        level = int(os.environ.get(ENV, "0"))
    except ValueError:
        level = 0
    sys.meta_path.insert(0, _QuietImport(level, hidden=KERAS_EXTRAS))
    # keras-hub's kagglehub imports IPython too (to tell Colab)
    sys.meta_path.insert(0, _QuietImport(0, hidden=KERAS_EXTRAS, name="keras_hub"))


def keep(line, level):
    """Whether a line TensorFlow printed while it loaded is shown at log level `level`."""
    match = _LOG_LINE.match(line)
    if match:
        return _SEVERITY[match.group(1) or match.group(2)] >= level
    if line.startswith(_ABSL_NOTICE):
        return level < 2
    return True


def filtered(text, level):
    """`text` without the lines `keep` drops (and the lines that continue them)."""
    kept, dropped = [], False
    for line in text.splitlines(keepends=True):
        if dropped and line.startswith(_CONTINUED):
            continue
        dropped = not keep(line, level)
        if not dropped:
            kept.append(line)
    return "".join(kept)


@contextlib.contextmanager
def _stderr_filtered(level):
    """File descriptor 2 (C++ writes there) goes to a temporary file meanwhile; then what
    `filtered` keeps of it is written to stderr."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            text = filtered(capture.read().decode("utf-8", "replace"), level)
            if text:
                sys.stderr.write(text)
                sys.stderr.flush()


@contextlib.contextmanager
def _unimportable(names):
    """`import name` raises ImportError meanwhile, for each of `names` not yet imported
    (None in sys.modules); afterwards they import as usual."""
    hidden = [name for name in names if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None
    try:
        yield
    finally:
        for name in hidden:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


class _QuietImport:
    """A meta-path finder that finds `name` (tensorflow) once, as the next finders would,
    and has its module run under `_stderr_filtered` (log level > 0) with `hidden`
    unimportable; then it steps aside."""

    def __init__(self, level, hidden=(), name="tensorflow"):
        self.level, self.hidden, self.name = level, tuple(hidden), name

    def find_spec(self, name, path=None, target=None):
        if name != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader, level, hidden = spec.loader, self.level, self.hidden
        run = loader.exec_module

        def exec_module(module):
            try:
                with (_stderr_filtered(level) if level > 0 else contextlib.nullcontext()), \
                        _unimportable(hidden):
                    run(module)
            finally:
                del loader.exec_module  # this loader only, this once

        try:
            loader.exec_module = exec_module
        except AttributeError:  # a loader that takes no attributes: imported unfiltered
            pass
        return spec
