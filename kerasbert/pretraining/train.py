"""Pre-training an encoder on the shards of `kerasbert.pretraining.data`.

The step is kerasbert's fine-tuning step (`kerasbert.training.loop.Trainer`: strategy.run,
global-norm clipping after the cross-replica sum, AdamW with warmup and linear decay from
`optimization.create_optimizer`) with the objective's loss, so the same command runs on
one CPU, mirrored GPUs or in mixed precision. The output folder holds:

  encoder/                 the encoder, loadable with --init_checkpoint=<output_dir>
  pretraining.weights.h5   encoder + LM/NSP heads (to look at or continue from)
  history.csv              step, training loss (every --log_every steps)
  metrics.json             held-out MLM accuracy/perplexity and NSP accuracy (bert), MLM
                           (no_nsp) or LM accuracy/perplexity (ltr); plus timing
  pretrain_config.json     the settings of the run
  step-<N>/                with --snapshot_steps: the encoder, history and held-out metrics
                           as they were after step N (each an --init_checkpoint of its own)
"""

import dataclasses
import logging
import os

import keras
import numpy as np
import tensorflow as tf

from kerasbert import distribute, run_folder
from kerasbert.data.tokenization import read_vocab
from kerasbert.errors import InputError
from kerasbert.io_utils import atomic_write_json, read_json_object, write_history
from kerasbert.kinds.base import TaskKind
from kerasbert.model import encoders
from kerasbert.pretraining import data as data_lib
from kerasbert.pretraining import objectives
from kerasbert.training.run_state import save_weights_atomically
from kerasbert.training.loop import Timer, Trainer
from kerasbert.training.optimization import create_optimizer

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class PretrainConfig:
    input_file: str  # comma-separated globs of training shards
    output_dir: str
    objective: str = "bert"
    eval_input_file: str | None = None  # default: heldout.tfrecord beside the input
    init_checkpoint: str | None = None  # None/"random": random at model_size
    model_size: str = "tiny"
    vocab_file: str | None = None  # default: the data's
    do_lower_case: bool | None = None
    train_batch_size: int = 32
    eval_batch_size: int = 64
    num_train_steps: int = 1000
    num_warmup_steps: int = 100
    learning_rate: float = 1e-4
    weight_decay: float = 0.01
    max_eval_steps: int = 100
    dropout: float = 0.1
    max_position: int = 512
    seed: int = 42
    log_every: int = 10
    distribution_strategy: str = "one_device"
    mixed_precision: str | None = None  # None | "bfloat16"
    jit_compile: bool = False
    # Steps after which the encoder is also written to step-<N>/: one run, several
    # pre-training budgets (its learning rate not yet decayed, unlike a run of N steps).
    snapshot_steps: tuple[int, ...] = ()

    def check(self):
        objectives.check_objective(self.objective)
        for name in ("train_batch_size", "eval_batch_size", "num_train_steps", "log_every"):
            if getattr(self, name) < 1:
                raise InputError(f"--{name}: must be at least 1, got {getattr(self, name)}")
        if self.num_warmup_steps < 0 or self.max_eval_steps < 0:
            raise InputError("--num_warmup_steps and --max_eval_steps must be >= 0")
        if self.learning_rate <= 0:
            raise InputError(f"--learning_rate: must be positive, got {self.learning_rate}")
        wrong = [s for s in self.snapshot_steps if not 0 < s < self.num_train_steps]
        if wrong:
            raise InputError(f"--snapshot_steps: each must be between 1 and --num_train_steps "
                             f"- 1 ({self.num_train_steps - 1}), got {wrong[0]}")
        # float16 would need loss scaling, which the shared clip-then-apply step lacks.
        if self.mixed_precision not in (None, "bfloat16"):
            raise InputError(f"--mixed_precision={self.mixed_precision}: only bfloat16 is "
                             "supported")
        if not self.output_dir:
            raise InputError("--output_dir: required")


def _data_config(files):
    folder = os.path.dirname(files[0])
    return folder, data_lib.read_data_config(folder)


def _make_encoder(config, data_config, vocab_file, do_lower_case):
    causal = config.objective == "ltr"
    if config.init_checkpoint in (None, "", "random"):
        loaded = encoders.random_encoder(
            config.model_size, vocab_file=vocab_file, do_lower_case=do_lower_case,
            max_position=config.max_position, dropout=config.dropout, seed=config.seed,
            causal=causal)
    else:
        loaded = encoders.load_encoder(config.init_checkpoint, dropout=config.dropout)
        if bool(getattr(loaded.backbone, "causal", False)) != causal:
            raise InputError(f"--init_checkpoint={config.init_checkpoint}: a "
                             f"{'causal' if not causal else 'bidirectional'} encoder cannot "
                             f"be pre-trained with --objective={config.objective}")
    backbone = loaded.backbone

    if backbone.vocabulary_size < len(read_vocab(vocab_file)):
        raise InputError(f"--vocab_file={vocab_file}: larger than the encoder's vocabulary "
                         f"({backbone.vocabulary_size})")
    if data_config["max_seq_length"] > backbone.max_sequence_length:
        raise InputError(f"--input_file: sequences of {data_config['max_seq_length']} tokens "
                         f"but the encoder has {backbone.max_sequence_length} positions")
    return backbone


# The pre-training inputs whose last axis is the sequence (the masked-LM arrays are not).
SEQUENCE_INPUTS = ("input_ids", "input_mask", "segment_ids")


def _trim(features):
    """A batch as the Trainer takes it, (features, one dummy label per example), without
    its all-padding columns (the records are padded to max_seq_length). Under --jit_compile
    the Trainer pads them back up to a multiple of 32 (few shapes for XLA to compile)."""
    length = tf.maximum(tf.reduce_max(tf.reduce_sum(features["input_mask"], -1)), 2)
    out = dict(features)
    for k in SEQUENCE_INPUTS:
        out[k] = features[k][:, :length]
    return out, tf.zeros([tf.shape(out["input_ids"])[0]], tf.int32)


class PretrainingKind(TaskKind):
    """Pre-training's own kind: its loss is the objective's (PretrainingTrainer), so the
    kind only says that there is no accuracy and no per-token label layout. No task is of
    it, so it is not registered."""

    name = "pretraining"


def make_trainer_class():
    class PretrainingTrainer(Trainer):
        """kerasbert's Trainer with the pre-training objective as its loss."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, sequence_inputs=SEQUENCE_INPUTS, **kwargs)

        def _loss_and_gradients(self, inputs, labels, variables, scale, global_batch_size):
            with tf.GradientTape() as tape:
                outputs = self.model(inputs, training=True)
                stats = objectives.statistics(self.model.objective, inputs, outputs)
                # This (micro-)batch's share of the step's global batch: the shared step
                # sums the shares of micro-batches and replicas into the global mean.
                share = (tf.cast(tf.shape(labels)[0], tf.float32)
                         / tf.cast(global_batch_size, tf.float32))
                loss = objectives.training_loss(stats) * share
                scaled = loss if scale is None else loss * scale
            return loss, tape.gradient(scaled, variables), tf.constant(0.0)

        def heldout_metrics(self, dataset, max_steps):
            @tf.function(reduce_retracing=True)
            def step(inputs):
                def replica(inputs):
                    outputs = self.model(inputs, training=False)
                    return objectives.statistics(self.model.objective, inputs, outputs)

                per_replica = self.strategy.run(replica, args=(inputs,))
                return {k: self.strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None)
                        for k, v in per_replica.items()}

            totals, steps = {}, 0
            for inputs, _ in self.strategy.experimental_distribute_dataset(dataset):
                if max_steps and steps >= max_steps:
                    break
                for k, v in step(inputs).items():
                    totals[k] = totals.get(k, 0.0) + float(v)
                steps += 1
            return objectives.summarize(self.model.objective, totals), steps

    return PretrainingTrainer


def snapshot_folder(output_dir, step):
    return os.path.join(output_dir, f"step-{step}")


CONFIG_FILE = "pretrain_config.json"
HEADS_FILE = "pretraining.weights.h5"


def _pretraining_folder(path):
    """The pre-training output folder that `path` (--init_checkpoint: an output folder, its
    encoder/ or a step-<N>/ snapshot) names, or None for anything else."""
    if not path or path == "random":
        return None
    folder = os.path.realpath(path)
    if os.path.basename(folder) == "encoder" and not run_folder.is_finished(folder):
        folder = os.path.dirname(folder)
    return folder if run_folder.is_finished(folder) else None


def _run_config(folder):
    """The pretrain_config.json of the run that wrote `folder` (a step-<N>/ snapshot's is
    its run's), or None."""
    if os.path.basename(folder).startswith("step-"):
        folder = os.path.dirname(folder)
    config_file = os.path.join(folder, CONFIG_FILE)
    return read_json_object(config_file) if os.path.isfile(config_file) else None


def continued_heads(config):
    """The file of LM/NSP layers a continued run starts from: the --init_checkpoint run's
    own, when it is a finished pre-training output of the same objective (google-research/
    bert's init_checkpoint restores its cls/ heads too); None otherwise (a snapshot, another
    objective, an encoder from elsewhere: the heads start afresh). AdamW always does."""
    folder = _pretraining_folder(config.init_checkpoint)
    if folder is None or not os.path.isfile(os.path.join(folder, HEADS_FILE)):  # a snapshot
        return None
    same_objective = (_run_config(folder) or {}).get("objective") == config.objective
    return os.path.join(folder, HEADS_FILE) if same_objective else None


def pretraining_runs(folder):
    """The steps of each pre-training run behind the encoder in `folder` (an output
    folder, one of its step-<N>/ snapshots, or either's encoder/), oldest first: a run
    continued with --init_checkpoint from another one counts that one's steps too, e.g.
    [10000, 20000]. [] when `folder` holds no pre-training metrics (a random encoder, a
    checkpoint from elsewhere)."""
    runs, seen = [], set()
    while (folder := _pretraining_folder(folder)) and folder not in seen:
        seen.add(folder)
        runs.append(run_folder.read_metrics(folder).get("train_steps"))
        folder = (_run_config(folder) or {}).get("init_checkpoint")
    return [steps for steps in reversed(runs) if steps is not None]


def run_pretraining(config, show_progress=None):
    """Pre-trains and writes the output folder; returns the held-out metrics (a dict)."""
    config.check()
    files = data_lib.expand_files(config.input_file)
    data_dir, data_config = _data_config(files)
    if config.eval_input_file:
        eval_files = data_lib.expand_files(config.eval_input_file, "eval_input_file")
    else:
        heldout = os.path.join(data_dir, data_lib.HELDOUT_FILE)
        eval_files = [heldout] if os.path.isfile(heldout) and data_config.get(
            "heldout_instances", 1) else []
    vocab_file = config.vocab_file or data_config["vocab_file"]
    do_lower_case = (data_config["do_lower_case"] if config.do_lower_case is None
                     else config.do_lower_case)
    if config.mixed_precision:
        keras.mixed_precision.set_global_policy(f"mixed_{config.mixed_precision}")
    try:
        keras.utils.set_random_seed(config.seed)
        strategy = distribute.make_strategy(config.distribution_strategy)
        with strategy.scope():
            backbone = _make_encoder(config, data_config, vocab_file, do_lower_case)
            model = objectives.PretrainingModel(backbone, config.objective)
        seq, preds = data_config["max_seq_length"], data_config["max_predictions_per_seq"]
        train_ds = data_lib.make_dataset(files, seq, preds, config.train_batch_size, True,
                                         config.seed).map(_trim)
        with strategy.scope():
            model(next(iter(train_ds))[0])  # creates every weight
            heads = continued_heads(config)
            if heads:
                model.load_weights(heads)  # the encoder again (the same), and its heads
                log.info("continuing %s with its LM/NSP layers", heads)
            optimizer = create_optimizer(model.trainable_variables, config.learning_rate,
                                         config.num_train_steps, config.num_warmup_steps,
                                         config.weight_decay)
        trainer = make_trainer_class()(model, PretrainingKind(), strategy, optimizer,
                                       jit_compile=config.jit_compile)
        os.makedirs(config.output_dir, exist_ok=True)
        atomic_write_json(os.path.join(config.output_dir, CONFIG_FILE),
                          dataclasses.asdict(config))
        history, losses = [], []
        eval_ds = None
        if eval_files and config.max_eval_steps:
            eval_ds = data_lib.make_dataset(eval_files, seq, preds, config.eval_batch_size,
                                            False).map(_trim)
        timer = Timer()

        def write_folder(folder, steps):
            """encoder/, history.csv and metrics.json as they are after `steps` steps."""
            metrics = {"objective": config.objective, "train_steps": steps,
                       "train_loss_mean": float(np.mean(losses)) if losses else float("nan"),
                       "train_loss_last": history[-1]["loss"] if history else float("nan"),
                       "train_seconds": timer.seconds()}
            if eval_ds is not None:
                heldout_metrics, batches = trainer.heldout_metrics(eval_ds, config.max_eval_steps)
                metrics.update({f"heldout_{k}": v for k, v in heldout_metrics.items()},
                               heldout_batches=batches)
            encoders.save_encoder(backbone, vocab_file, do_lower_case, folder)
            write_history(run_folder.path(folder, run_folder.HISTORY), history)
            atomic_write_json(run_folder.path(folder, run_folder.METRICS), metrics)
            return metrics

        snapshots = set(config.snapshot_steps)

        def on_step(step, loss):
            losses.append(loss)
            if step % config.log_every == 0 or step == config.num_train_steps or step in snapshots:
                history.append({"step": step, "loss": loss})
            if step in snapshots:
                write_folder(snapshot_folder(config.output_dir, step), step)

        trainer.train_epoch(train_ds, config.num_train_steps, on_step=on_step,
                            show_progress=show_progress)
        save_weights_atomically(model, os.path.join(config.output_dir, HEADS_FILE))
        metrics = write_folder(config.output_dir, config.num_train_steps)
    finally:
        if config.mixed_precision:
            keras.mixed_precision.set_global_policy("float32")
    if not np.isfinite(metrics["train_loss_last"]):
        log.warning("the final training loss is %s", metrics["train_loss_last"])
    return metrics
