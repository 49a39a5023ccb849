"""The model card (`README.md`) of an exported folder: what a reader of the Hub expects.

task and kind, labels, the data the run read, the recipe (encoder, head, learning rate,
epochs, batch size, max_seq_length, seed), the dev metrics of metrics.json and the command
that repeats the run. Everything comes from the run folder (run_config.json, metrics.json,
encoder/), so the card cannot disagree with the weights beside it.
"""

import dataclasses
import json
import os

from kerasbert import run_folder
from kerasbert.config import RunConfig

FILE = "README.md"
# RunConfig fields a user reads as the recipe, in this order.
RECIPE = ("init_checkpoint", "model_size", "head", "learning_rate", "num_train_epochs",
          "train_batch_size", "max_seq_length", "warmup_proportion", "weight_decay",
          "frozen_epochs", "lora_rank", "trainable_encoder", "seed")


def command(config):
    """The command line that repeats the run: every flag whose value is not the default."""
    defaults = {f.name: f.default for f in dataclasses.fields(RunConfig)}
    parts = ["kerasbert"]
    for name, value in config.to_dict().items():
        if name == "head_options":
            parts += [f"--{k}={_flag(v)}" for k, v in sorted(value.items())]
        elif value is not None and value != defaults.get(name):
            parts.append(f"--{name}={_flag(value)}")
    return " ".join(parts)


def _flag(value):
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def _description(task):
    description = getattr(task, "description", "")
    return f": {description}" if description else ""


def _data(config, task):
    files = [f"--{name}={getattr(config, name)}" for name in
             ("train_file", "predict_file", "validation_file", "test_file")
             if getattr(config, name, None)]
    if files:
        return ", ".join(files)
    if config.data_dir:
        return f"the official files in `--data_dir={config.data_dir}`"
    if config.use_tfds:
        return f"TensorFlow Datasets (`--tfds_data_dir={config.tfds_data_dir}`)"
    return f"kerasbert's bundled {task.name} sample (a demo, not the real data set)"


def write(folder, run_dir, config, task, hf_class):
    """Writes `folder/README.md` for the run in `run_dir`."""
    with open(run_folder.path(run_dir, run_folder.METRICS), encoding="utf-8") as f:
        metrics = {k: v for k, v in json.load(f).items() if isinstance(v, (int, float))}
    labels = list(task.label_list or [])
    lines = [
        "---",
        "library_name: transformers",
        "tags: [bert, kerasbert, " + task.kind.replace("_", "-") + "]",
        "---",
        "",
        f"# {task.name} fine-tuned with kerasbert",
        "",
        f"- **Task**: {task.name} ({task.kind}){_description(task)}",
        f"- **Labels**: {', '.join(map(str, labels)) if labels else '(none: ' + task.kind + ')'}",
        f"- **Data**: {_data(config, task)}",
        f"- **Loads as**: `transformers.{hf_class}.from_pretrained` (this folder)",
        "",
        "## Recipe",
        "",
        *[f"- {name}: {getattr(config, name)}" for name in RECIPE
          if getattr(config, name, None) not in (None, "")],
        *[f"- {name}: {value}" for name, value in sorted(config.head_options.items())],
        "",
        "## Dev metrics",
        "",
        *([f"| {name} | {value:.4f} |" for name, value in metrics.items()]
          and ["| metric | value |", "|---|---|",
               *[f"| {name} | {value:.4f} |" for name, value in metrics.items()]]
          or ["(the run did not evaluate)"]),
        "",
        "## The command that made it",
        "",
        "```",
        command(config),
        "```",
        "",
    ]
    with open(os.path.join(folder, FILE), "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
