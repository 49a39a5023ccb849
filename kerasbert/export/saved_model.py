"""SavedModel export of a finished run for TF Serving: raw text in, task answers out.

    <run_dir>/ run_config.json, encoder/, model.weights.h5
        → the task model, rebuilt as `kerasbert.main` built it, with the trained weights
        → tf.saved_model.save: the model's variables and the WordPiece tokenizer's tables
        → <export_dir>/<version>/   written as <export_dir>/.tmp-*, renamed when complete

    python -m kerasbert.export.saved_model --run_dir=runs/mrpc --export_dir=/srv/kerasbert

Signatures (each returns the outputs of the task's kind):

    serving_default   raw UTF-8 strings; WordPiece + [CLS] A [SEP] (B [SEP]) packing to the
                      run's max_seq_length happen inside the graph
                        sentence / sentence-pair tasks: text_a [None] (+ text_b [None])
                        multiple choice:  context [None], endings [None, num_choices]
                        span (SQuAD):     question [None], context [None]
                        tagging (NER):    text [None] (words separated by whitespace)
    serve_token_ids   token_ids, segment_ids, padding_mask int32 [None, None]
                      ([None, num_choices, None] for multiple choice), for callers that
                      tokenize themselves
Outputs:
    classification    probabilities float32 [None, num_labels], label string [None]
    regression        score float32 [None] (STS-B: the raw score, not clipped to [0, 5])
    multiple_choice   probabilities float32 [None, num_choices], choice int32 [None]
    span              answer string [None], score float32 [None], start / end int32 [None]
                      (character offsets in the context, end exclusive, -1 for no answer),
                      v2 also null_odds float32 [None]; the answer is "" when null_odds
                      exceeds the run's tuned threshold (see span_graph.py)
                      serve_token_ids: start_logits, end_logits float32 [None, None]
    tagging           tags, words string [None, None] (padded with ""), num_words int32
                      [None] (see tagging_graph.py); serve_token_ids: probabilities float32
                      [None, None, num_labels], tag string [None, None] per position

Span and tagging answers need windows over long inputs and post-processing (n-best span
decoding, word re-alignment); the graph repeats the Python decoders op for op, one
question or sentence at a time, so served answers equal the run's own predictions.

Loading the export in Python needs `import tensorflow_text` first (it registers the
tokenizer's ops); TF Serving's model server has them built in.
"""

import argparse
import copy
import dataclasses
import hashlib
import json
import os
import re
import secrets
import shutil
import sys
from typing import Callable

from kerasbert import run_folder
from kerasbert.errors import InputError, at
from kerasbert.tasks.base import (
    CLASSIFICATION,
    MULTIPLE_CHOICE,
    REGRESSION,
    SPAN,
    TAGGING,
)

METADATA = os.path.join("assets.extra", "kerasbert.json")  # TF Serving ignores the rest of it
TEMP_PREFIX = ".tmp-"  # TF Serving only loads folders named by a number
TOKEN_ID_INPUTS = ("token_ids", "segment_ids", "padding_mask")


# --- What each task kind exports ---------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class KindExport:
    """How one task kind is served.

    text_inputs(sentence_pair) -> {input name: shape} of the raw-string signature;
    encode(tokenizer, inputs, max_seq_length) -> int32 model inputs (padded to max length);
    outputs(task, model_outputs) -> the named outputs both signatures return;
    ids_rank: the rank of each `serve_token_ids` input;
    answer(run) -> a function of the raw-string inputs for kinds whose answers need more
    than one model call and post-processing (span, tagging); `encode` is then unused and
    `outputs` serves only `serve_token_ids`.
    """

    text_inputs: Callable
    encode: Callable | None
    outputs: Callable
    ids_rank: int = 2
    answer: Callable | None = None


def _sentence_inputs(sentence_pair):
    return {"text_a": [None], **({"text_b": [None]} if sentence_pair else {})}


def _encode_sentences(tokenizer, inputs, max_seq_length):
    import tensorflow as tf

    from kerasbert.data.tokenization import pack_inputs

    ids_a = tokenizer.tokenize_ids(inputs["text_a"])
    ids_b = None
    if "text_b" in inputs:
        tf.debugging.assert_equal(tf.size(inputs["text_a"]), tf.size(inputs["text_b"]),
                                  message="text_a and text_b need the same number of texts")
        ids_b = tokenizer.tokenize_ids(inputs["text_b"])
    return pack_inputs(tokenizer, ids_a, ids_b, max_seq_length)


def _encode_choices(tokenizer, inputs, max_seq_length):
    """[CLS] context [SEP] ending_k [SEP] for every k, as [batch, choices, max_seq_length]."""
    import tensorflow as tf

    from kerasbert.data.tokenization import pack_inputs

    context, endings = inputs["context"], inputs["endings"]
    batch, choices = tf.shape(endings)[0], tf.shape(endings)[1]
    tf.debugging.assert_equal(tf.size(context), batch,
                              message="context and endings need the same number of rows")
    # Each context is tokenized once and repeated for its endings, as SwagTask.featurize does.
    ids_context = tf.gather(tokenizer.tokenize_ids(context),
                            tf.repeat(tf.range(batch), choices))
    ids_endings = tokenizer.tokenize_ids(tf.reshape(endings, [-1]))
    packed = pack_inputs(tokenizer, ids_context, ids_endings, max_seq_length)
    return {k: tf.reshape(v, [batch, choices, max_seq_length]) for k, v in packed.items()}


def _label_outputs(task, logits):
    import tensorflow as tf

    logits = tf.cast(logits, tf.float32)
    best = tf.argmax(logits, axis=-1, output_type=tf.int32)
    return {"probabilities": tf.nn.softmax(logits, axis=-1),
            "label": tf.gather(tf.constant(list(task.label_list), tf.string), best)}


def _score_outputs(task, outputs):
    import tensorflow as tf

    return {"score": tf.cast(outputs[:, 0], tf.float32)}


def _choice_outputs(task, logits):
    import tensorflow as tf

    logits = tf.cast(logits, tf.float32)
    return {"probabilities": tf.nn.softmax(logits, axis=-1),
            "choice": tf.argmax(logits, axis=-1, output_type=tf.int32)}


def _span_answer(run):
    from kerasbert.export.span_graph import SpanAnswerer

    answerer = SpanAnswerer(run.model, run.tokenizer, run.task, run.config.max_seq_length,
                            null_threshold(run))
    return lambda inputs: answerer(inputs["question"], inputs["context"])


def _span_logits(task, logits):
    import tensorflow as tf

    logits = tf.cast(logits, tf.float32)
    return {"start_logits": logits[:, :, 0], "end_logits": logits[:, :, 1]}


def _tagging_answer(run):
    from kerasbert.export.tagging_graph import WordTagger

    tagger = WordTagger(run.model, run.tokenizer, run.task.label_list, run.config.max_seq_length)
    return lambda inputs: tagger(inputs["text"])


def _token_tags(task, logits):
    import tensorflow as tf

    logits = tf.cast(logits, tf.float32)
    best = tf.argmax(logits, axis=-1, output_type=tf.int32)
    return {"probabilities": tf.nn.softmax(logits, axis=-1),
            "tag": tf.gather(tf.constant(list(task.label_list), tf.string), best)}


KINDS = {
    CLASSIFICATION: KindExport(_sentence_inputs, _encode_sentences, _label_outputs),
    REGRESSION: KindExport(_sentence_inputs, _encode_sentences, _score_outputs),
    MULTIPLE_CHOICE: KindExport(lambda sentence_pair: {"context": [None], "endings": [None, None]},
                                _encode_choices, _choice_outputs, ids_rank=3),
    SPAN: KindExport(lambda sentence_pair: {"question": [None], "context": [None]}, None,
                     _span_logits, answer=_span_answer),
    TAGGING: KindExport(lambda sentence_pair: {"text": [None]}, None, _token_tags,
                        answer=_tagging_answer),
}


def null_threshold(run):
    """SQuAD 2.0: the threshold tuned on dev (best_f1_thresh) when the run evaluated, else
    the one it was given (--null_score_diff_threshold). A run exports before it writes
    metrics.json (so that a kill during export resumes), hence eval_results.txt first."""
    if run.task.version_2:
        tuned = run_folder.read_eval_results(run.run_dir).get("best_f1_thresh")
        if tuned is None:
            tuned = run_folder.read_metrics(run.run_dir).get("best_f1_thresh")
        if isinstance(tuned, (int, float)):
            return float(tuned)
    return float(run.config.null_score_diff_threshold)


def kind_export(task):
    if task.kind in KINDS:
        return KINDS[task.kind]
    raise InputError(f"--task={task.name}: no serving signature is defined for {task.kind} "
                     f"tasks; exportable kinds: {', '.join(KINDS)}")


# --- Rebuilding a finished run -----------------------------------------------------------

@dataclasses.dataclass
class LoadedRun:
    """A finished run's task model with its trained weights, tokenizer and settings."""

    config: object  # kerasbert.config.RunConfig
    task: object
    model: object  # kerasbert.model.task_model.TaskModel
    tokenizer: object  # kerasbert.data.tokenization.WordPieceTokenizer
    sentence_pair: bool
    run_dir: str = ""


def is_sentence_pair(task):
    """Whether the task reads text_a and text_b. GLUE tasks say so (`text_b`); for a task
    that does not, one example of its bundled sample tells."""
    if hasattr(task, "text_b"):
        return task.text_b is not None
    try:
        examples = task.read_examples(task.sample_dir(), "train")
    except (NotImplementedError, InputError, OSError):
        raise InputError(
            f"--task={task.name}: cannot tell whether it takes one text or a pair; give the "
            "task a `text_b` attribute (None for single-text tasks)") from None
    return bool(examples) and examples[0].text_b is not None


def load_run(run_dir, registry=None):
    """Rebuilds the task model of a finished run and loads its trained weights."""
    from kerasbert import plugins

    if not os.path.isdir(run_dir):
        raise InputError(f"{at(run_dir)}--run_dir: no such folder")
    config = run_folder.read_run_config(run_dir)
    weights = run_folder.path(run_dir, run_folder.MODEL_WEIGHTS)
    if not os.path.isfile(weights):
        raise InputError(f"{at(weights)}missing: the run did not finish training "
                         "(--do_train writes it at the end)")
    registry = registry or plugins.registry()
    task = copy.copy(registry.task(config.task))  # the run's options, not the shared task's
    from kerasbert.config import configure_task

    configure_task(task, config)  # SQuAD's doc_stride, max_query_length, ... of the run
    kind_export(task)  # fails before the heavy work for kinds not exported yet
    sentence_pair = task.kind in (CLASSIFICATION, REGRESSION) and is_sentence_pair(task)
    # TensorFlow and keras-hub load only now: a wrong path fails in a blink (lazy).
    from kerasbert.model.builder import rebuild_trained_model

    model, tokenizer = rebuild_trained_model(run_dir, config, task, registry)
    return LoadedRun(config, task, model, tokenizer, sentence_pair, run_dir)


# --- Writing the SavedModel --------------------------------------------------------------

def _specs(shapes, dtype):
    """One dict argument: its keys become the signature's input names."""
    import tensorflow as tf

    return [{name: tf.TensorSpec(shape, dtype, name=name) for name, shape in shapes.items()}]


def _trim_padding(inputs):
    """Drops the all-padding columns after packing to max_seq_length (short requests then
    cost what their longest text costs; padded positions are masked, results are equal)."""
    import tensorflow as tf

    length = tf.maximum(tf.reduce_max(tf.reduce_sum(inputs["padding_mask"], axis=-1)), 1)
    return {k: v[..., :length] for k, v in inputs.items()}


def write_saved_model(run, path):
    """Writes the two serving signatures of `run` as a SavedModel at `path`.

    Plain `tf.saved_model.save` of a small tf.Module rather than keras.export.ExportArchive:
    the archive traces every endpoint twice (once to find its variables, once to save it),
    and tracing the tokenizer graph is most of an export's time. Here each signature is
    traced once and saved as that concrete function.
    """
    import tensorflow as tf

    spec = kind_export(run.task)
    max_seq_length = run.config.max_seq_length
    model, tokenizer, task = run.model, run.tokenizer, run.task

    answer = spec.answer(run) if spec.answer else None

    def serve_text(inputs):
        if answer is not None:
            return answer(inputs)
        model_inputs = _trim_padding(spec.encode(tokenizer, inputs, max_seq_length))
        return spec.outputs(task, model(model_inputs, training=False))

    def serve_token_ids(inputs):
        return spec.outputs(task, model(inputs, training=False))

    def concrete(fn, shapes, dtype):
        return tf.function(fn, input_signature=_specs(shapes, dtype),
                           autograph=False).get_concrete_function()

    signatures = {
        "serving_default": concrete(serve_text, spec.text_inputs(run.sentence_pair), tf.string),
        "serve_token_ids": concrete(serve_token_ids,
                                    {n: [None] * spec.ids_rank for n in TOKEN_ID_INPUTS},
                                    tf.int32),
    }
    # What the signatures capture must be reachable from the saved object: the vocabulary
    # tables (through the tokenizer) and the variables. The variables are the tf.Variables
    # the functions read, not the Keras wrappers of model.variables: with the wrappers,
    # tf.saved_model.load works but a TF1 Session load (what TF Serving does) finds them
    # uninitialised ("Could not find variable ...").
    root = tf.Module()
    root.tokenizer = tokenizer
    root.model_variables = list({id(v): v for fn in signatures.values()
                                 for v in fn.variables}.values())
    tf.saved_model.save(root, path, signatures=signatures)


def _write_metadata(run, path):
    """assets.extra/kerasbert.json: what a client needs to read the outputs."""
    from kerasbert.io_utils import atomic_write_json

    spec = kind_export(run.task)
    atomic_write_json(os.path.join(path, METADATA), {
        **export_identity(run.run_dir),
        "task": run.task.name, "kind": run.task.kind, "head": run.config.head,
        "label_list": list(run.task.label_list) if run.task.label_list else None,
        "max_seq_length": run.config.max_seq_length,
        "do_lower_case": run.tokenizer.do_lower_case,
        "serving_default_inputs": list(spec.text_inputs(run.sentence_pair)),
        "serve_token_ids_inputs": list(TOKEN_ID_INPUTS),
        **({"squad_options": {name: getattr(run.task, name) for name in (
            "doc_stride", "max_query_length", "n_best_size", "max_answer_length")},
            "null_score_diff_threshold": null_threshold(run)} if run.task.kind == SPAN else {}),
    })


def export_identity(run_dir):
    """Which run and which trained weights an export was made from (in its metadata)."""
    digest = hashlib.sha256()
    with open(run_folder.path(run_dir, run_folder.MODEL_WEIGHTS), "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return {"run_dir": os.path.abspath(run_dir), "weights_sha256": digest.hexdigest()}


def find_export(run_dir, export_dir):
    """The version folder of `export_dir` already exported from this run's current weights,
    or None (a run killed between an export and its record finds it again)."""
    identity = None
    for version in reversed(existing_versions(export_dir)):
        metadata = os.path.join(export_dir, str(version), METADATA)
        try:
            with open(metadata, encoding="utf-8") as f:
                recorded = json.load(f)
        except (OSError, ValueError):
            continue
        if recorded.get("run_dir") != os.path.abspath(run_dir):
            continue
        identity = identity or export_identity(run_dir)
        if recorded.get("weights_sha256") == identity["weights_sha256"]:
            return os.path.join(export_dir, str(version))
    return None


def existing_versions(export_dir):
    if not os.path.isdir(export_dir):
        return []
    return sorted(int(name) for name in os.listdir(export_dir)
                  if re.fullmatch(r"\d+", name) and os.path.isdir(os.path.join(export_dir, name)))


def next_version(export_dir):
    """One more than the highest numeric version folder; 1 in an empty or new folder."""
    return max(existing_versions(export_dir), default=0) + 1


def export_run(run_dir, export_dir, version=None, registry=None):
    """Exports a finished run as `<export_dir>/<version>/`; returns that folder.

    The SavedModel is written into a hidden temporary folder of `export_dir` and renamed to
    its version number only when complete, so TF Serving (which watches `export_dir` and
    loads numeric folders) never sees a half-written model, and a failed export leaves no
    version folder behind.
    """
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)
                                or version < 1):
        raise InputError(f"--version={version}: must be a positive integer")
    version = next_version(export_dir) if version is None else version
    target = os.path.join(export_dir, str(version))
    if os.path.exists(target):
        raise InputError(f"{at(target)}version {version} already exists; versions are "
                         "immutable once TF Serving may have loaded them: pick another")
    run = load_run(run_dir, registry)  # every input problem surfaces before export_dir is touched
    try:
        os.makedirs(export_dir, exist_ok=True)
    except OSError as e:
        raise InputError(f"--export_dir={export_dir}: cannot create it ({e.strerror})") from None
    # os.mkdir (not mkdtemp, whose 0700 would hide the model from a server running as
    # another user): the folder gets the usual umask permissions.
    tmp = os.path.join(export_dir, f"{TEMP_PREFIX}{version}-{secrets.token_hex(4)}")
    os.mkdir(tmp)
    try:
        write_saved_model(run, tmp)
        _write_metadata(run, tmp)
        try:
            os.rename(tmp, target)  # fails if another export took this version meanwhile
        except OSError as e:
            raise InputError(f"{at(target)}cannot move the export into place "
                             f"({e.strerror}); was the version taken meanwhile?") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


# --- CLI ---------------------------------------------------------------------------------

def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m kerasbert.export.saved_model",
        description="Export a finished kerasbert run as a versioned SavedModel for TF Serving.")
    parser.add_argument("--run_dir", required=True,
                        help="The --output_dir of a finished kerasbert run.")
    parser.add_argument("--export_dir", required=True,
                        help="The model base path TF Serving watches; the export goes to "
                             "<export_dir>/<version>/.")
    parser.add_argument("--version", type=int, default=None,
                        help="The version number. Default: one more than the highest "
                             "existing version (1 for a new folder).")
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        path = export_run(args.run_dir, args.export_dir, args.version)
    except InputError as e:
        print(f"kerasbert: error: {e}", file=sys.stderr)
        return 2
    print(f"kerasbert: exported {args.run_dir} to {path}", flush=True)
    print("kerasbert: next: `tensorflow_model_server --rest_api_port=8501 "
          f"--model_name=kerasbert --model_base_path={os.path.abspath(args.export_dir)}` "
          "(see docs/serving.md)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
