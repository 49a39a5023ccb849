"""The child processes of benchmarks/memory_phases.py: one fine-tuning, kerasbert's or the
HuggingFace reference's (benchmarks/parity_hf.py), with the process's memory read at the
end of each phase. Only the standard library at the top: the first phases are the imports.

    python -m benchmarks.phase_probe kerasbert <spec.json>
    <torch python> -m benchmarks.phase_probe huggingface <spec.json>

At each mark: VmRSS (resident now) and VmHWM (the resident high-water mark since the
previous mark: /proc/self/clear_refs is reset at every mark) from /proc/self/status, the
anonymous and file-backed parts of the resident set (RssAnon: heaps, tensors; RssFile: the
shared libraries' pages), and with tracemalloc on, the Python heap now and its peak in the
phase (tracemalloc's own bookkeeping is in the RSS: `tracemalloc_mb`).

The phases are found by wrapping the run's own functions, not by changing them: the
kerasbert run is `python -m kerasbert.main` (run here by runpy, after the imports), the
reference is parity_hf.main.
"""

import functools
import json
import runpy
import sys
import time
import tracemalloc

FIELDS = ("VmRSS", "VmHWM", "RssAnon", "RssFile")


def status_mb():
    """{field: MiB} of FIELDS from /proc/self/status ({} where there is none)."""
    values = {}
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                name = line.split(":")[0]
                if name in FIELDS:
                    values[name] = int(line.split()[1]) / 1024
    except OSError:
        pass
    return values


def reset_high_water_mark():
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
    except OSError:
        pass


class Probe:
    """Marks phases: mark(name) records the memory at the end of the phase `name`."""

    def __init__(self, trace_python):
        self.started = time.perf_counter()
        self.trace_python = trace_python
        self.marks = []
        if trace_python:
            tracemalloc.start()
        reset_high_water_mark()

    def mark(self, name):
        values = status_mb()
        mark = {"phase": name, "seconds": round(time.perf_counter() - self.started, 2),
                "rss_mb": values.get("VmRSS"), "phase_peak_rss_mb": values.get("VmHWM"),
                "anon_mb": values.get("RssAnon"), "file_mb": values.get("RssFile")}
        if self.trace_python:
            current, peak = tracemalloc.get_traced_memory()
            mark.update(python_heap_mb=current / 2**20, python_heap_peak_mb=peak / 2**20,
                        tracemalloc_mb=tracemalloc.get_tracemalloc_memory() / 2**20)
            tracemalloc.reset_peak()
        self.marks.append(mark)
        print(f"phase_probe: {name}: RSS {mark['rss_mb']:.0f} MB, phase peak "
              f"{mark['phase_peak_rss_mb']:.0f} MB", file=sys.stderr, flush=True)
        reset_high_water_mark()

    def write(self, path, **extra):
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"marks": self.marks, **extra}, f, indent=1)


def after(function, probe, name, only_first=False):
    """`function`, marking `name` when it returns (only the first time: only_first)."""
    calls = [0]

    @functools.wraps(function)
    def wrapped(*args, **kwargs):
        result = function(*args, **kwargs)
        calls[0] += 1
        if not only_first or calls[0] == 1:
            probe.mark(name)
        return result

    return wrapped


class FirstCall:
    """A tf.function stand-in that marks `name` after its first call; every attribute
    (get_concrete_function) is the function's own."""

    def __init__(self, function, probe, name, done):
        self._function, self._probe, self._name, self._done = function, probe, name, done

    def __call__(self, *args, **kwargs):
        result = self._function(*args, **kwargs)
        if not self._done:
            self._done.append(True)
            float(result[0])  # the step has run, not only been dispatched
            self._probe.mark(self._name)
        return result

    def __getattr__(self, name):
        return getattr(self._function, name)


# --- kerasbert ----------------------------------------------------------------------------

def run_kerasbert(spec):
    probe = Probe(spec["tracemalloc"])
    probe.mark("interpreter")
    # As `kerasbert ...` starts (kerasbert/startup.py: the first TensorFlow import quieted
    # and made without Keras' unused extras): this process is then a kerasbert command.
    sys.argv = ["kerasbert", *spec["flags"]]
    sys.orig_argv = [sys.executable, "-m", "kerasbert.main", *spec["flags"]]
    import kerasbert  # noqa: F401
    import tensorflow
    probe.mark("import tensorflow (+ keras)")
    import keras_hub  # noqa: F401
    probe.mark("import keras_hub")
    from kerasbert import run as run_lib
    from kerasbert.model import encoders
    from kerasbert.training import loop, run_state
    probe.mark("import kerasbert")

    run_lib.load_encoder = after(run_lib.load_encoder, probe, "encoder loaded")
    run_lib.featurize_splits = after(run_lib.featurize_splits, probe, "data featurized")
    run_lib.build_model = after(run_lib.build_model, probe, "model built")
    first_step = []
    trainer_init = loop.Trainer.__init__

    def init(self, *args, **kwargs):
        trainer_init(self, *args, **kwargs)
        self._train_step = FirstCall(self._train_step, probe, "first step (traced)", first_step)

    loop.Trainer.__init__ = init
    dev_metrics_of = run_lib.dev_metrics_of

    def evaluating(*args, **kwargs):
        dev_metrics = dev_metrics_of(*args, **kwargs)

        def measured(trainer):
            probe.mark("training")
            metrics = dev_metrics(trainer)
            probe.mark("evaluation")
            return metrics

        return measured

    run_lib.dev_metrics_of = evaluating
    run_state.RunState.save = after(run_state.RunState.save, probe, "checkpoint")
    run_state.save_weights_atomically = after(run_state.save_weights_atomically, probe,
                                              "model.weights.h5")
    encoders.save_encoder = after(encoders.save_encoder, probe, "encoder/ written")
    try:  # the command itself, as `python -m kerasbert.main` runs it
        runpy.run_module("kerasbert.main", run_name="__main__", alter_sys=True)
    except SystemExit as e:
        if e.code not in (0, None):
            raise
    probe.mark("outputs written")
    probe.write(spec["output_file"], side="kerasbert", framework="kerasbert (TensorFlow "
                f"{tensorflow.__version__})")


# --- HuggingFace ------------------------------------------------------------------------------

def run_huggingface(spec):
    probe = Probe(spec["tracemalloc"])
    probe.mark("interpreter")
    import torch
    probe.mark("import torch")
    import transformers
    from transformers import BertForSequenceClassification  # noqa: F401  (the lazy import)
    probe.mark("import transformers")
    from benchmarks import parity_hf
    from transformers import modeling_utils

    loading = modeling_utils.PreTrainedModel.from_pretrained.__func__

    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        model = loading(cls, *args, **kwargs)
        probe.mark("encoder loaded")
        return model

    modeling_utils.PreTrainedModel.from_pretrained = from_pretrained
    featurize = parity_hf.featurize
    featurized = []

    def featurize_counted(*args, **kwargs):
        result = featurize(*args, **kwargs)
        featurized.append(True)
        if len(featurized) == 1 + spec["eval_splits"]:
            probe.mark("data featurized")
        return result

    parity_hf.featurize = featurize_counted
    parity_hf.train_step = after(parity_hf.train_step, probe, "first step (traced)",
                                 only_first=True)
    # model.eval() before each evaluation, model.train() before each epoch (both also run
    # inside from_pretrained, before the first step: ignored there)
    module_train = torch.nn.Module.train
    evaluating = []

    def train(self, mode=True):
        started = bool(parity_hf_steps())
        if started and not mode and not evaluating:
            probe.mark("training")
            evaluating.append(True)
        elif started and mode and evaluating:
            probe.mark("evaluation")
            evaluating.clear()
        return module_train(self, mode)

    def parity_hf_steps():
        return probe.marks and any(m["phase"] == "first step (traced)" for m in probe.marks)

    torch.nn.Module.train = train
    parity_hf.main(spec["hf_spec_file"])
    if evaluating:
        probe.mark("evaluation")
    probe.write(spec["output_file"], side="huggingface",
                framework=f"PyTorch {torch.__version__} + transformers {transformers.__version__}")


if __name__ == "__main__":
    side, spec_file = sys.argv[1:3]
    with open(spec_file, encoding="utf-8") as f:
        spec = json.load(f)
    {"kerasbert": run_kerasbert, "huggingface": run_huggingface}[side](spec)
