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
    serve_with_context  tagging runs trained with --document_context only: text,
                      left_context, right_context [None] (the document's text before and
                      after each sentence, "" for none); serving_default then tags each
                      sentence alone
Outputs:
    classification    probabilities float32 [None, num_labels], label string [None]
    regression        score float32 [None] (STS-B: the raw score, not clipped to [0, 5])
    multiple_choice   probabilities float32 [None, num_choices], choice int32 [None]
    span              answer string [None], score float32 [None], start / end int32 [None]
                      (character offsets in the context, end exclusive, -1 for no answer),
                      v2 also null_odds float32 [None]; the answer is "" when null_odds
                      exceeds the run's tuned threshold (see tasks/squad/serving.py)
                      serve_token_ids: start_logits, end_logits float32 [None, None]
    tagging           tags, words string [None, None] (padded with ""), num_words int32
                      [None] (see tasks/conll/serving.py); serve_token_ids: probabilities float32
                      [None, None, num_labels], tag string [None, None] per position

Span and tagging answers need windows over long inputs and post-processing (n-best span
decoding, word re-alignment); the graph repeats the Python decoders op for op, one
question or sentence at a time, so served answers equal the run's own predictions.

Loading the export in Python needs `import tensorflow_text` first (it registers the
tokenizer's ops), or only its three op libraries (docs/serving.md, "Serving fast and
lean"); TF Serving's model server has them built in. Each signature is also an attribute
of the same name taking one dict, what `keras.layers.TFSMLayer(path,
call_endpoint="serving_default")` calls. assets.extra/tf_serving_warmup_requests holds one
request per signature, which TF Serving runs before it serves a version.
"""

import copy
import dataclasses
import hashlib
import json
import os
import re
import secrets
import sys

import numpy as np
import tensorflow as tf

from kerasbert import plugins, run_folder, storage
from kerasbert.config import configure_task
from kerasbert.errors import InputError, at
from kerasbert.io_utils import atomic_write_json, check_can_create
from kerasbert.model.builder import rebuild_trained_model

METADATA = os.path.join("assets.extra", "kerasbert.json")  # TF Serving ignores the rest of it
# Requests TF Serving runs once per signature while loading a version, before it serves it:
# the first real request then finds the graph already optimised (see docs/serving.md).
WARMUP = os.path.join("assets.extra", "tf_serving_warmup_requests")
WARMUP_TEXT = "A short warm-up text."
TEMP_PREFIX = ".tmp-"  # TF Serving only loads folders named by a number
TOKEN_ID_INPUTS = ("token_ids", "segment_ids", "padding_mask")


# --- What the task's kind serves --------------------------------------------------------

def kind_export(task, registry=None):
    """The task kind's Serving (kerasbert/kinds/base.py); an InputError for a kind that
    defines none, raised before any heavy work."""
    registry = registry or plugins.registry()
    serving = registry.kind_of(task).serving
    if serving is None:
        exportable = sorted(name for name, (kind, _) in registry.kinds.items() if kind.serving)
        raise InputError(f"--task={task.name}: no serving signature is defined for {task.kind} "
                         f"tasks; exportable kinds: {', '.join(exportable)}")
    return serving


# --- Rebuilding a finished run -----------------------------------------------------------

@dataclasses.dataclass
class LoadedRun:
    """A finished run's task model with its trained weights, tokenizer and settings."""

    config: object  # kerasbert.config.RunConfig
    task: object
    model: object  # kerasbert.model.task_model.TaskModel
    tokenizer: object  # kerasbert.data.tokenization.WordPieceTokenizer
    sentence_pair: bool  # serving_default takes text_a and text_b
    run_dir: str = ""
    kind: object = None  # kerasbert.kinds.base.TaskKind


def load_run(run_dir, registry=None):
    """Rebuilds the task model of a finished run and loads its trained weights."""
    if not storage.isdir(run_dir):
        raise InputError(f"{at(run_dir)}--run_dir: no such folder")
    config = run_folder.read_run_config(run_dir)
    weights = run_folder.path(run_dir, run_folder.MODEL_WEIGHTS)
    if not storage.isfile(weights):
        raise InputError(f"{at(weights)}missing: the run did not finish training "
                         "(--do_train writes it at the end)")
    registry = registry or plugins.registry()
    task = copy.copy(registry.task(config.task))  # the run's options, not the shared task's
    configure_task(task, config)  # SQuAD's doc_stride, max_query_length, ... of the run
    serving = kind_export(task, registry)  # fails before the heavy work for other kinds
    sentence_pair = "text_b" in serving.text_inputs(task)
    # TensorFlow and keras-hub load only now: a wrong path fails in a blink (lazy).

    model, tokenizer = rebuild_trained_model(run_dir, config, task, registry)
    return LoadedRun(config, task, model, tokenizer, sentence_pair, run_dir,
                     registry.kind_of(task))


# --- Writing the SavedModel --------------------------------------------------------------

def _specs(shapes, dtype):
    """One dict argument: its keys become the signature's input names."""
    return [{name: tf.TensorSpec(shape, dtype, name=name) for name, shape in shapes.items()}]


def _trim_padding(inputs):
    """Drops the all-padding columns after packing to max_seq_length (short requests then
    cost what their longest text costs; padded positions are masked, results are equal)."""
    length = tf.maximum(tf.reduce_max(tf.reduce_sum(inputs["padding_mask"], axis=-1)), 1)
    return {k: v[..., :length] for k, v in inputs.items()}


def write_saved_model(run, path):
    """Writes the two serving signatures of `run` as a SavedModel at `path`.

    Plain `tf.saved_model.save` of a small tf.Module rather than keras.export.ExportArchive:
    the archive traces every endpoint twice (once to find its variables, once to save it),
    and tracing the tokenizer graph is most of an export's time. Here each signature is
    traced once and saved as that concrete function.
    """
    spec = run.kind.serving
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

    functions = {  # traced once each; saved as signatures and as attributes (below)
        "serving_default": tf.function(serve_text, input_signature=_specs(
            spec.text_inputs(task), tf.string), autograph=False),
        "serve_token_ids": tf.function(serve_token_ids, input_signature=_specs(
            {n: [None] * run.kind.inputs_rank for n in TOKEN_ID_INPUTS}, tf.int32),
            autograph=False),
    }
    for name, (shapes, fn) in spec.signatures(run).items():
        functions[name] = tf.function(fn, input_signature=_specs(shapes, tf.string),
                                      autograph=False)
    signatures = {name: fn.get_concrete_function() for name, fn in functions.items()}
    # What the signatures capture must be reachable from the saved object: the vocabulary
    # tables (through the tokenizer) and the variables. The variables are the tf.Variables
    # the functions read, not the Keras wrappers of model.variables: with the wrappers,
    # tf.saved_model.load works but a TF1 Session load (what TF Serving does) finds them
    # uninitialised ("Could not find variable ...").
    root = tf.Module()
    root.tokenizer = tokenizer
    # A signature takes keyword arguments only; keras.layers.TFSMLayer calls its endpoint
    # with one positional dict, which finds the same function as an attribute first.
    for name, fn in functions.items():
        setattr(root, name, fn)
    root.model_variables = list({id(v): v for fn in signatures.values()
                                 for v in fn.variables}.values())
    tf.saved_model.save(root, path, signatures=signatures)
    _write_warmup(path, signatures, tokenizer)


# --- TF Serving warm-up records ----------------------------------------------------------

def _field(number, payload):
    """One length-delimited protobuf field (wire type 2)."""
    def varint(n):
        out = bytearray()
        while True:
            out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
            n >>= 7
            if not n:
                return bytes(out)
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def predict_log(signature_name, inputs):
    """A serialized tensorflow.serving.PredictionLog holding one PredictRequest (field
    numbers of tensorflow_serving/apis/prediction_log.proto, predict.proto, model.proto),
    written by hand so that exporting needs no tensorflow-serving-api."""
    spec = _field(3, signature_name.encode())  # ModelSpec.signature_name
    request = _field(1, spec) + b"".join(  # PredictRequest.model_spec, .inputs map entries
        _field(2, _field(1, name.encode()) + _field(2, tf.make_tensor_proto(value)
                                                   .SerializeToString()))
        for name, value in sorted(inputs.items()))
    return _field(6, _field(1, request))  # PredictionLog.predict_log, PredictLog.request


def warmup_inputs(function, tokenizer):
    """One small request for a signature, from its input specs: a batch of one short text
    per string input, [CLS] [SEP] for token ids."""
    inputs = {}
    args, kwargs = function.structured_input_signature  # traced: one dict; loaded: kwargs
    for name, spec in (kwargs or args[0]).items():
        shape = [1 if d is None else d for d in spec.shape.as_list()]
        if spec.dtype == tf.string:
            inputs[name] = np.full(shape, WARMUP_TEXT.encode(), dtype=object)
        else:
            row = {"token_ids": [tokenizer.cls_id, tokenizer.sep_id],
                   "segment_ids": [0, 0]}.get(name, [1, 1])
            inputs[name] = np.broadcast_to(np.asarray(row, spec.dtype.as_numpy_dtype),
                                           shape[:-1] + [2]).copy()
    return inputs


def _write_warmup(path, signatures, tokenizer):
    """assets.extra/tf_serving_warmup_requests: one request per signature, each first
    checked against the function it warms (a request TF Serving cannot run would stop it
    from loading the version)."""
    storage.makedirs(os.path.join(path, "assets.extra"))
    with tf.io.TFRecordWriter(os.path.join(path, WARMUP)) as writer:
        for name, function in sorted(signatures.items()):
            inputs = warmup_inputs(function, tokenizer)
            function({k: tf.constant(v) for k, v in inputs.items()})
            writer.write(predict_log(name, inputs))


def _write_metadata(run, path):
    """assets.extra/kerasbert.json: what a client needs to read the outputs."""
    spec = run.kind.serving
    atomic_write_json(os.path.join(path, METADATA), {
        **export_identity(run.run_dir),
        "task": run.task.name, "kind": run.task.kind, "head": run.config.head,
        "label_list": list(run.task.label_list) if run.task.label_list else None,
        "max_seq_length": run.config.max_seq_length,
        "do_lower_case": run.tokenizer.do_lower_case,
        "serving_default_inputs": list(spec.text_inputs(run.task)),
        "serve_token_ids_inputs": list(TOKEN_ID_INPUTS),
        **{f"{name}_inputs": list(shapes) for name, (shapes, _) in spec.signatures(run).items()},
        **spec.metadata(run),
    })


def export_identity(run_dir):
    """Which run and which trained weights an export was made from (in its metadata)."""
    digest = hashlib.sha256()
    with storage.open_file(run_folder.path(run_dir, run_folder.MODEL_WEIGHTS), "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return {"run_dir": storage.absolute(run_dir), "weights_sha256": digest.hexdigest()}


def find_export(run_dir, export_dir):
    """The version folder of `export_dir` already exported from this run's current weights,
    or None (a run killed between an export and its record finds it again)."""
    identity = None
    for version in reversed(existing_versions(export_dir)):
        metadata = os.path.join(export_dir, str(version), METADATA)
        try:
            with storage.open_file(metadata) as f:
                recorded = json.load(f)
        except ValueError:
            continue
        except Exception as e:
            if not storage.is_io_error(e):
                raise
            continue
        if recorded.get("run_dir") != storage.absolute(run_dir):
            continue
        identity = identity or export_identity(run_dir)
        if recorded.get("weights_sha256") == identity["weights_sha256"]:
            return os.path.join(export_dir, str(version))
    return None


def existing_versions(export_dir):
    if not storage.isdir(export_dir):
        return []
    return sorted(int(name) for name in storage.listdir(export_dir)
                  if re.fullmatch(r"\d+", name) and storage.isdir(os.path.join(export_dir, name)))


def check_version(version):
    """An InputError unless `version` is None (the next one) or a positive integer."""
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)
                                or version < 1):
        raise InputError(f"--version={version}: must be a positive integer")


def define_version_flag(fv):
    """The export commands' --version flag (this one's and kerasbert.export.litert's)."""
    from absl import flags

    flags.DEFINE_integer("version", None, "The version number. Default: one more than the "
                         "highest existing version (1 for a new folder).", flag_values=fv)


def next_version(export_dir):
    """One more than the highest numeric version folder; 1 in an empty or new folder."""
    return max(existing_versions(export_dir), default=0) + 1


def check_export_dir(export_dir):
    """The InputError `export_run` would give for an `export_dir` that cannot be made or
    written (a file in its place or above it, no permission), found without creating
    anything: a run checks it before training."""
    check_can_create(export_dir, "--export_dir")


def export_run(run_dir, export_dir, version=None, registry=None):
    """Exports a finished run as `<export_dir>/<version>/`; returns that folder.

    The SavedModel is written into a hidden temporary folder of `export_dir` and renamed to
    its version number only when complete, so TF Serving (which watches `export_dir` and
    loads numeric folders) never sees a half-written model, and a failed export leaves no
    version folder behind.
    """
    check_version(version)
    version = next_version(export_dir) if version is None else version
    target = os.path.join(export_dir, str(version))
    if storage.exists(target):
        raise InputError(f"{at(target)}version {version} already exists; versions are "
                         "immutable once TF Serving may have loaded them: pick another")
    check_export_dir(export_dir)
    run = load_run(run_dir, registry)  # every input problem surfaces before export_dir is touched
    try:
        storage.makedirs(export_dir)
    except Exception as e:
        if not storage.is_io_error(e):
            raise
        raise InputError(f"--export_dir={export_dir}: cannot create it "
                         f"({storage.reason(e)})") from None
    # os.mkdir (not mkdtemp, whose 0700 would hide the model from a server running as
    # another user): the folder gets the usual umask permissions.
    tmp = os.path.join(export_dir, f"{TEMP_PREFIX}{version}-{secrets.token_hex(4)}")
    storage.makedirs(tmp)
    try:
        write_saved_model(run, tmp)
        _write_metadata(run, tmp)
        try:  # locally rename(2), which fails if another export took this version meanwhile;
            # on an object store a copy of every file (TF Serving may see it half copied)
            storage.move_folder(tmp, target)
        except Exception as e:
            if not storage.is_io_error(e):
                raise
            raise InputError(f"{at(target)}cannot move the export into place "
                             f"({storage.reason(e)}); was the version taken meanwhile?") from None
    except BaseException:
        if storage.exists(tmp):
            storage.rmtree(tmp)
        raise
    return target


# --- CLI ---------------------------------------------------------------------------------

def main(argv=None):
    """`python -m kerasbert.export.saved_model --run_dir=RUN --export_dir=DIR` (argv: the
    arguments after the program's name); the exit status."""
    from absl import flags

    from kerasbert import command

    fv = flags.FlagValues()
    flags.DEFINE_string("run_dir", None, "The --output_dir of a finished kerasbert run.",
                        flag_values=fv)
    flags.DEFINE_string("export_dir", None, "The model base path TF Serving watches; the "
                        "export goes to <export_dir>/<version>/.", flag_values=fv)
    define_version_flag(fv)
    flags.mark_flags_as_required(["run_dir", "export_dir"], flag_values=fv)

    def export(args):
        if len(args) > 1:
            raise InputError(f"unexpected arguments: {' '.join(args[1:])}")
        path = export_run(fv.run_dir, fv.export_dir, fv.version)
        print(f"kerasbert: exported {fv.run_dir} to {path}", flush=True)
        print("kerasbert: next: `tensorflow_model_server --rest_api_port=8501 "
              f"--model_name=kerasbert --model_base_path={os.path.abspath(fv.export_dir)}` "
              "(see docs/serving.md)", flush=True)
        return 0

    usage = ("usage: python -m kerasbert.export.saved_model --run_dir=RUN --export_dir=DIR "
             "[--version=N]\nExport a finished kerasbert run as a versioned SavedModel for "
             "TF Serving.\n\n" + command.flags_usage(fv))
    return command.run(export, fv, usage=usage,
                       argv=["kerasbert.export.saved_model", *(sys.argv[1:] if argv is None
                                                               else argv)])


if __name__ == "__main__":
    sys.exit(main())
