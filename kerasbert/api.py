"""The Python API: `kerasbert.finetune(...)`, `kerasbert.load(run_dir)`,
`kerasbert.run_experiment(name, ...)`.

    run = kerasbert.finetune(task="sst2", output_dir="runs/mine", num_train_epochs=3)
    run.metrics                          # the dev metrics, as metrics.json has them
    model = kerasbert.load("runs/mine")  # or run.model
    model.predict(["a great film", "dull"])
    model.save("mine.keras")             # keras.saving.load_model: strings in, probabilities out
    model.export("export/mine")          # the TF Serving SavedModel
    kerasbert.run_experiment("stability", task="rte", seeds=[1, 2, 3], output_dir="runs/st")

Keywords are the command line's flag names (RunConfig's fields, the head's own flags);
the run is `kerasbert.run.execute`, as `kerasbert.main` runs it. Errors raise
`kerasbert.InputError`; progress goes to absl logging (INFO), and none of the CLI's hints.
"""

import collections
import dataclasses
import difflib
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
from absl import flags, logging

from kerasbert import plugins
from kerasbert import run as run_lib
from kerasbert.config import RunConfig
from kerasbert.errors import InputError, TrainingError

def _config_fields():
    return {f.name for f in dataclasses.fields(RunConfig)} - {"head_options"}


def _head_flags(registry):
    """{flag name: default} of every head's own flags, as the plugins define them."""
    flag_values = flags.FlagValues()
    registry.manager.hook.kerasbert_define_flags(flag_values=flag_values)
    return {name: flag_values[name].default for name in flag_values}


def _unknown(name, known):
    close = difflib.get_close_matches(name, sorted(known), n=3)
    return InputError(f"{name}: not a kerasbert flag (a keyword of finetune)"
                      + (f"; did you mean {', '.join(close)}?" if close else
                         " (keywords are the flag names of `kerasbert --helpfull`)"))


def make_config(registry, task, output_dir=None, **options):
    """The RunConfig of `finetune`'s keywords: flag names, checked as the CLI checks them."""
    fields = _config_fields()
    head_flags = _head_flags(registry)
    values, head_options = {}, dict(options.pop("head_options", None) or {})
    version_2 = options.pop("version_2_with_negative", False)
    for name, value in options.items():
        if name in fields:
            values[name] = value
        elif name in head_flags:
            head_options[name] = value
        else:
            raise _unknown(name, fields | set(head_flags)
                           | {"version_2_with_negative", "head_options"})
    if task in ("squad", "squad_v1") and version_2:
        task = "squad_v2"
    elif task == "squad":
        task = "squad_v1"
    spec = registry.task(task)  # an unknown task: InputError naming the known ones
    head = values.get("head") or spec.default_head
    for name in head_options:
        if not name.startswith(head + "_"):
            raise InputError(f"{name}={head_options[name]!r}: a flag of another head than "
                             f"the run's {head} head")
    if output_dir is None:  # as the CLI: a fresh folder per run
        output_dir = os.path.join("kerasbert_runs",
                                  f"{spec.name}-{time.strftime('%Y%m%d-%H%M%S')}")
    return RunConfig(task=task, output_dir=os.fspath(output_dir), **values,
                     head_options=head_options)


@dataclasses.dataclass
class FineTuneResult:
    """What `finetune` returns: the run's dev metrics and its folder; `.model` loads it."""

    metrics: dict
    output_dir: str
    _model: "FineTunedModel | None" = dataclasses.field(default=None, repr=False)

    @property
    def model(self):
        """The fine-tuned model (loaded once, on first use)."""
        if self._model is None:
            self._model = load(self.output_dir)
        return self._model


def finetune(task, output_dir=None, **flag_values):
    """Fine-tunes as `kerasbert --task=... --output_dir=...` would; returns a FineTuneResult.

    Every other keyword is a flag by its name (`train_file`, `validation_file`,
    `num_train_epochs`, `init_checkpoint`, `model_size`, `learning_rate`, a head's own flag
    such as `cls_linear_use_pooler`, ...). Bad input raises InputError before training.
    """
    registry = plugins.registry()
    config = make_config(registry, task, output_dir, **flag_values)
    with run_lib.progress_to(logging.info):
        metrics = run_lib.execute(config, registry)  # what metrics.json holds as "metrics"
    return FineTuneResult(dict(metrics), config.output_dir)


@dataclasses.dataclass
class ExperimentResult:
    """What `run_experiment` returns: the experiment's report (the Markdown it printed) and
    its folder (`output_dir`, or `findings`' `output`), where its JSON and figures are."""

    name: str
    output_dir: "str | None"
    report: str


def experiment_argv(flag_values):
    """`--name=value` per keyword, as absl reads them: True → `--name`, False → `--noname`,
    a list → comma-separated, None → left out (the flag's default)."""
    argv = []
    for name, value in flag_values.items():
        if value is None:
            continue
        if isinstance(value, bool):
            argv.append(f"--{name}" if value else f"--no{name}")
        elif isinstance(value, (list, tuple)):
            argv.append(f"--{name}=" + ",".join(_flag_text(v) for v in value))
        else:
            argv.append(f"--{name}={_flag_text(value)}")
    return argv


def _flag_text(value):
    return os.fspath(value) if isinstance(value, os.PathLike) else str(value)


def run_experiment(name, **flag_values):
    """Runs a registered experiment as `python -m kerasbert.experiments NAME --flags` does,
    in its own process (an experiment starts one process per run and parses absl flags);
    returns an ExperimentResult. Keywords are the experiment's flags (`... NAME --help`):
    `seeds=[1, 2, 3]`, `recipes=["bert", "mosbach"]`, `plane=True`. Its progress goes to
    stderr as on the command line. Bad input raises InputError with the command's one line,
    a run that cannot go on TrainingError."""
    experiments = plugins.registry().experiments
    if name not in experiments:
        close = difflib.get_close_matches(name, sorted(experiments), n=3)
        raise InputError(f"{name!r}: not a registered experiment; "
                         + (f"did you mean {', '.join(close)}?" if close else
                            "these are: " + ", ".join(sorted(experiments))))
    where = flag_values.get("output_dir", flag_values.get("output"))
    command = [sys.executable, "-m", "kerasbert.experiments", name,
               *experiment_argv(flag_values)]
    tail = collections.deque(maxlen=20)
    with tempfile.TemporaryFile("w+") as stdout:
        with subprocess.Popen(command, stdout=stdout, stderr=subprocess.PIPE, text=True) as child:
            for line in child.stderr:  # shown as it comes, the last lines kept for the error
                sys.stderr.write(line)
                tail.append(line.rstrip("\n"))
        stdout.seek(0)
        report = stdout.read()
    if child.returncode != 0:
        last = next((line for line in reversed(tail) if line.strip()), "")
        message = last.split("error: ", 1)[1] if "kerasbert: error: " in last else last
        if child.returncode == 2:
            raise InputError(message)
        if child.returncode == 1 and "kerasbert: error: " in last:
            raise TrainingError(message)
        raise RuntimeError(f"experiment {name} exited with status {child.returncode}: "
                           + "\n".join(tail))
    return ExperimentResult(name, None if where is None else os.fspath(where), report)


def load(run_dir):
    """The fine-tuned model of a finished run folder (a FineTunedModel)."""
    from kerasbert.export.saved_model import load_run

    return FineTunedModel(load_run(os.fspath(run_dir)))


class FineTunedModel:
    """A finished run's model: `predict` on raw text, `save` as .keras, `export` for serving."""

    def __init__(self, run):
        self.run = run  # kerasbert.export.saved_model.LoadedRun
        self.task = run.task
        self.labels = list(run.task.label_list) if run.task.label_list else None
        self._serve = None

    def __repr__(self):
        return (f"<kerasbert.FineTunedModel {self.task.name} ({self.task.kind}) from "
                f"{self.run.run_dir}>")

    @property
    def input_names(self):
        return tuple(self.run.kind.serving.text_inputs(self.task))

    def keras_model(self):
        """The `keras.Model` that `save` writes (raw strings in; classification, regression
        and multiple-choice runs)."""
        from kerasbert.export.keras_model import TextModel

        return TextModel.from_run(self.run)

    def _serving(self):
        """inputs dict → the SavedModel's serving_default outputs, in this process."""
        if self._serve is None:
            spec = self.run.kind.serving
            if spec.answer is not None:
                self._serve = spec.answer(self.run)
            else:
                self._serve = self.keras_model().outputs
        return self._serve

    def _inputs(self, examples):
        names = self.input_names
        columns = {name: [] for name in names}
        for i, example in enumerate(examples):
            parts = (example,) if isinstance(example, str) else tuple(example)
            if len(parts) != len(names) or (len(names) == 1 and not isinstance(example, str)):
                raise InputError(f"predict: example {i} is {example!r}; the {self.task.name} "
                                 f"model takes {' and '.join(names)} per example")
            for name, part in zip(names, parts):
                columns[name].append(list(part) if name == "endings" else part)
        return columns

    def predict(self, texts):
        """Answers for one text (a str) or a list of them; a pair task takes (a, b) tuples,
        multiple choice (context, [endings]), SQuAD (question, context).

        Returns per example a dict: classification {"label", "probabilities": {label: p}},
        regression {"score"}, multiple choice {"choice", "probabilities"}, tagging
        {"words", "tags"}, span {"answer", "score", "start", "end"}. One text in, one dict out.
        """
        import tensorflow as tf

        names = self.input_names
        single = isinstance(texts, str) or (  # one (a, b) pair, (context, endings), ...
            len(names) > 1 and isinstance(texts, tuple) and len(texts) == len(names)
            and isinstance(texts[0], str))
        examples = [texts] if single else list(texts)
        if not examples:
            return []
        inputs = {k: tf.constant(v, tf.string) for k, v in self._inputs(examples).items()}
        outputs = {k: np.asarray(v) for k, v in self._serving()(inputs).items()}
        answers = [self._answer(outputs, i) for i in range(len(examples))]
        return answers[0] if single else answers

    def _answer(self, outputs, i):
        def text(value):
            return value.decode("utf-8") if isinstance(value, bytes) else str(value)

        if "label" in outputs:
            return {"label": text(outputs["label"][i]),
                    "probabilities": {str(label): float(p) for label, p
                                      in zip(self.labels, outputs["probabilities"][i])}}
        if "choice" in outputs:
            return {"choice": int(outputs["choice"][i]),
                    "probabilities": [float(p) for p in outputs["probabilities"][i]]}
        if "tags" in outputs:
            n = int(outputs["num_words"][i])
            return {"words": [text(w) for w in outputs["words"][i][:n]],
                    "tags": [text(t) for t in outputs["tags"][i][:n]]}
        if "answer" in outputs:
            answer = {"answer": text(outputs["answer"][i]), "score": float(outputs["score"][i]),
                      "start": int(outputs["start"][i]), "end": int(outputs["end"][i])}
            if "null_odds" in outputs:
                answer["null_odds"] = float(outputs["null_odds"][i])
            return answer
        return {"score": float(outputs["score"][i])}

    def save(self, path):
        """Writes the model as one `.keras` file that takes raw strings (see
        kerasbert/export/keras_model.py); returns the path."""
        path = os.fspath(path)
        if not path.endswith(".keras"):
            raise InputError(f"{path}: a Keras model file's name ends in .keras")
        self.keras_model().save(path)
        return path

    def export(self, export_dir, version=None):
        """The SavedModel for TF Serving (and keras.layers.TFSMLayer) as
        `<export_dir>/<version>/`; returns that folder."""
        from kerasbert.export.saved_model import export_run

        return export_run(self.run.run_dir, os.fspath(export_dir), version)
