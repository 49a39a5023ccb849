"""One frozen, validated RunConfig made from the flags, saved as run_config.json.

Everything downstream reads the config, never the flags, so runs can be built in tests
and sweeps without touching absl's global state.
"""

import dataclasses
import os
from typing import Any, Mapping

from kerasbert.errors import InputError
from kerasbert.io_utils import atomic_write_json

DISTRIBUTION_STRATEGIES = ("one_device", "mirrored", "multi_worker", "tpu")


@dataclasses.dataclass(frozen=True)
class RunConfig:
    task: str
    output_dir: str
    head: str | None = None
    data_dir: str | None = None
    use_tfds: bool = False
    tfds_data_dir: str | None = None
    max_train_examples: int | None = None
    max_eval_examples: int | None = None
    max_seq_length: int | None = None
    train_file: str | None = None
    predict_file: str | None = None
    doc_stride: int = 128
    max_query_length: int = 64
    n_best_size: int = 20
    max_answer_length: int = 30
    null_score_diff_threshold: float = 0.0
    init_checkpoint: str | None = None
    model_size: str = "tiny"
    vocab_file: str | None = None
    do_lower_case: bool | None = None
    overwrite_output_dir: bool = False
    export_dir: str | None = None
    feature_cache_dir: str | None = None
    do_train: bool = True
    do_eval: bool = True
    do_predict: bool = False
    train_batch_size: int | None = None
    eval_batch_size: int = 64
    learning_rate: float | None = None
    num_train_epochs: float | None = None
    frozen_epochs: float = 0.0
    frozen_learning_rate: float = 1e-3
    frozen_patience: int | None = None
    warmup_proportion: float = 0.1
    weight_decay: float = 0.01
    dropout: float | None = None
    seed: int = 42
    save_checkpoints_steps: int = 1000
    distribution_strategy: str = "one_device"
    deterministic: bool = False
    save_trajectory_every: int = 0
    tpu: str | None = None
    mixed_precision: str = "none"
    jit_compile: bool = False
    gradient_accumulation_steps: int = 1
    stream_train_data: str = "auto"
    shuffle_buffer_size: int = 100_000
    head_options: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        self.validate()

    def validate(self):
        """Checks flag values and combinations before any heavy work starts."""

        def need(ok, flag, why):
            if not ok:
                raise InputError(f"--{flag}={getattr(self, flag)}: {why}")

        need(bool(self.task), "task", "a task is required (see --list_tasks)")
        need(bool(self.output_dir), "output_dir", "an output folder is required")
        need(self.do_train or self.do_eval or self.do_predict, "do_train",
             "nothing to do: set at least one of --do_train, --do_eval, --do_predict")
        need(self.max_seq_length is None or self.max_seq_length >= 3, "max_seq_length",
             "must be at least 3 ([CLS] x [SEP])")
        for flag in ("doc_stride", "max_query_length", "n_best_size", "max_answer_length"):
            need(getattr(self, flag) > 0, flag, "must be a positive integer")
        for flag in ("train_file", "predict_file"):
            path = getattr(self, flag)
            need(path is None or os.path.isfile(path), flag, "no such file")
        for flag in ("train_batch_size", "eval_batch_size"):
            value = getattr(self, flag)
            need(value is None or value > 0, flag, "must be a positive integer")
        for flag in ("max_train_examples", "max_eval_examples"):
            value = getattr(self, flag)
            need(value is None or value > 0, flag, "must be a positive integer")
        need(self.learning_rate is None or self.learning_rate > 0, "learning_rate",
             "must be positive")
        need(self.num_train_epochs is None or self.num_train_epochs >= 0, "num_train_epochs",
             "must not be negative")
        need(self.frozen_epochs >= 0, "frozen_epochs", "must not be negative")
        need(self.frozen_learning_rate > 0, "frozen_learning_rate", "must be positive")
        need(self.frozen_patience is None or self.frozen_patience > 0, "frozen_patience",
             "must be a positive integer")
        need(0 <= self.warmup_proportion <= 1, "warmup_proportion", "must be within [0, 1]")
        need(self.save_checkpoints_steps >= 0, "save_checkpoints_steps",
             "must be 0 (only at epoch ends) or a positive number of steps")
        need(self.save_trajectory_every >= 0, "save_trajectory_every",
             "must not be negative (0 = off)")
        need(self.weight_decay >= 0, "weight_decay", "must not be negative")
        need(self.dropout is None or 0 <= self.dropout < 1, "dropout", "must be within [0, 1)")
        need(self.export_dir is None or self.do_train, "export_dir",
             "exports the trained model: needs --do_train (use python -m "
             "kerasbert.export.saved_model --run_dir=... for an existing run)")
        need(not self.use_tfds or self.data_dir is None, "use_tfds",
             "--use_tfds reads from --tfds_data_dir; do not also give --data_dir")
        need(self.distribution_strategy in DISTRIBUTION_STRATEGIES, "distribution_strategy",
             "must be one of " + ", ".join(DISTRIBUTION_STRATEGIES))
        need(self.distribution_strategy != "tpu" or bool(self.tpu), "distribution_strategy",
             "needs --tpu (the TPU's name or address)")
        need(self.mixed_precision in ("none", "mixed_float16", "mixed_bfloat16"),
             "mixed_precision", "must be none, mixed_float16 or mixed_bfloat16")
        need(self.gradient_accumulation_steps >= 1, "gradient_accumulation_steps",
             "must be a positive integer")
        need(self.train_batch_size is None
             or self.train_batch_size >= self.gradient_accumulation_steps,
             "gradient_accumulation_steps", "more micro-batches than examples in a batch")
        need(self.stream_train_data in ("auto", "true", "false"), "stream_train_data",
             "must be auto, true or false")
        need(self.shuffle_buffer_size > 0, "shuffle_buffer_size", "must be a positive integer")
        if self.data_dir is not None and not os.path.isdir(self.data_dir):
            raise InputError(f"--data_dir={self.data_dir}: no such folder")
        if self.vocab_file is not None and not os.path.isfile(self.vocab_file):
            raise InputError(f"--vocab_file={self.vocab_file}: no such file")

    @classmethod
    def from_flags(cls, flag_values, head_options=None):
        names = [f.name for f in dataclasses.fields(cls) if f.name != "head_options"]
        values = {name: flag_values[name].value for name in names}
        return cls(**values, head_options=dict(head_options or {}))

    def to_dict(self):
        d = dataclasses.asdict(self)
        d["head_options"] = dict(self.head_options)
        return d

    def save(self, path):
        atomic_write_json(path, self.to_dict())

    def resolved(self, task):
        """The config with the task's recipe filled in where no flag was given.

        The recipe is the paper's; on the bundled sample (no data given) a task may
        override it with a `sample_recipe` that lets the small demo learn visibly.
        """
        recipe = dict(learning_rate=task.default_learning_rate,
                      train_batch_size=task.default_train_batch_size,
                      num_train_epochs=task.default_num_train_epochs)
        if self.data_dir is None and not self.use_tfds and self.train_file is None:
            recipe.update(getattr(task, "sample_recipe", {}))
        return dataclasses.replace(
            self,
            head=self.head or task.default_head,
            max_seq_length=self.max_seq_length or getattr(task, "default_max_seq_length", 128),
            learning_rate=self.learning_rate or recipe["learning_rate"],
            train_batch_size=self.train_batch_size or recipe["train_batch_size"],
            num_train_epochs=(recipe["num_train_epochs"] if self.num_train_epochs is None
                              else self.num_train_epochs),
        )


TASK_OPTIONS = ("doc_stride", "max_query_length", "n_best_size", "max_answer_length",
                "null_score_diff_threshold")


def configure_task(task, config):
    """Hands the run's task options to the tasks that have them (SQuAD's), by BERT's names."""
    task.configure(**{name: getattr(config, name) for name in TASK_OPTIONS if hasattr(task, name)})
    if task.kind == "span" and config.max_seq_length <= config.max_query_length + 3:
        raise InputError(
            f"--max_seq_length={config.max_seq_length}: must exceed --max_query_length="
            f"{config.max_query_length} + 3 ([CLS] and two [SEP]) to leave room for the passage")
