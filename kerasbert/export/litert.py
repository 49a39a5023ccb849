"""LiteRT (TFLite) export of a finished run: serve it from raw text without TensorFlow.

    python -m kerasbert.export.litert --run_dir=runs/sst2 --export_dir=exports/sst2-lite
    → exports/sst2-lite/<version>/ model.tflite   the encoder and head (token ids in)
                                   vocab.txt      the run's WordPiece vocabulary
                                   serving.json   task, kind, labels, max_seq_length, casing,
                                                  and which run and weights it came from

    from kerasbert.lite import LiteModel          # imports no TensorFlow
    LiteModel("exports/sst2-lite/1").predict("a gripping film")   # as kerasbert.load(run).predict

Why a second export beside the SavedModel (kerasbert/export/saved_model.py, for TF
Serving): a Python process serving the SavedModel must import TensorFlow, ~750 MB resident
before the model loads and seconds to start; the LiteRT interpreter (`pip install
ai-edge-litert`) and kerasbert/lite/ are what a LiteRT server holds (measured in
docs/experiments/speed-and-memory.md). The tokenizer is the one thing outside the
flatbuffer: TFLite has no tokenizer ops, so kerasbert/lite/wordpiece.py does it in Python,
id for id as the SavedModel's graph does.

Sentence and sentence-pair classification and regression, tagging (CoNLL-2003 and
--task=token_classification: whitespace words in, a tag each out, long sentences in the
run's windows; not --document_context runs), and span answers (squad_v1, squad_v2 and
--task=question_answering: question + context in, the answer out, with the run's windows,
n-best decoding and v2 threshold, which the SavedModel carries in its graph and
kerasbert/lite/spans.py repeats in numpy). Multiple choice (SWAG) is not served. The export
checks itself: the interpreter's outputs on a few texts must equal the TensorFlow model's
(to 1e-4), and span answers the SavedModel graph's, or nothing is written.
"""

import json
import os
import secrets
import sys
import tempfile

import numpy as np

from kerasbert import storage
from kerasbert.errors import InputError, at
from kerasbert.export import saved_model
from kerasbert.lite import model as lite

CHECK_TEXTS = ("a gripping, beautifully acted film", "Dull.", "It's not bad at all!",
               "naïve café au lait — 100% worth it")
# Span runs: a context long enough for several windows of any max_seq_length up to 512.
CHECK_QUESTIONS = ("Who opened the café?", "When did the river city grow?", "What?")
CHECK_CONTEXTS = ("Ada Lovelace opened Café Déjà Vu in 1843, not 1844.",
                  " ".join(f"In {1800 + i} the river city of Zürich-{i} grew by {i}%."
                           for i in range(60)), "")


def logits_function(run):
    """The task model as a tf.function of token ids: {"outputs": float32 [batch, K]}
    ([batch, positions, K] for tagging)."""
    import tensorflow as tf

    model = run.model

    @tf.function(input_signature=[{name: tf.TensorSpec([None, None], tf.int32, name=name)
                                   for name in lite.INPUTS}], autograph=False)
    def outputs(inputs):
        return {"outputs": tf.cast(model(inputs, training=False), tf.float32)}

    return outputs


QUANTIZATIONS = ("none", "dynamic_int8")


def convert(run, quantize="none"):
    """The run's encoder and head as TFLite flatbuffer bytes (TFLite's own ops): float32,
    or with `quantize="dynamic_int8"` the weight matrices in int8 (activations quantized on
    the fly per batch; smaller and faster matmuls, answers no longer equal float32's).

    Through a SavedModel of the one function: the converter then freezes the variables the
    function reads (converting the concrete function with Keras 3's variables leaves them
    out of the flatbuffer)."""
    import tensorflow as tf

    function = logits_function(run)
    concrete = function.get_concrete_function()
    root = tf.Module()
    root.outputs = function
    root.weights = list({id(v): v for v in concrete.variables}.values())
    with tempfile.TemporaryDirectory(prefix="kerasbert-litert-") as folder:
        tf.saved_model.save(root, folder, signatures={"serving_default": concrete})
        converter = tf.lite.TFLiteConverter.from_saved_model(folder)
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        if quantize == "dynamic_int8":
            converter.optimizations = [tf.lite.Optimize.DEFAULT]  # no dataset: dynamic range
        return converter.convert(), function


def serving_record(run, quantize="none"):
    record = {"task": run.task.name, "kind": run.kind.name, "quantize": quantize,
              "document_context": str(getattr(run.task, "document_context", "0")),
              "labels": list(run.task.label_list) if run.task.label_list else None,
              "sentence_pair": run.sentence_pair,
              "max_seq_length": run.config.max_seq_length,
              "do_lower_case": run.tokenizer.do_lower_case,
              **saved_model.export_identity(run.run_dir)}
    if run.kind.name == "span":  # what the SavedModel's metadata holds (squad/serving.py)
        from kerasbert.tasks.squad.serving import null_threshold

        record.update(squad_options={name: int(getattr(run.task, name)) for name in (
                          "doc_stride", "max_query_length", "n_best_size", "max_answer_length")},
                      version_2=bool(run.task.version_2),
                      null_score_diff_threshold=null_threshold(run))
    return record


def _check_answers(served, run):
    """A span export's answers on CHECK_QUESTIONS equal the SavedModel graph's (the text,
    its offsets, and the score to 1e-4)."""
    import tensorflow as tf

    want = run.task.serving_answer(run).answer({"question": tf.constant(CHECK_QUESTIONS),
                                                "context": tf.constant(CHECK_CONTEXTS)})
    got = served.serve(list(CHECK_QUESTIONS), list(CHECK_CONTEXTS))
    same = ([a.decode() for a in want["answer"].numpy()] == got["answer"]
            and np.array_equal(want["start"].numpy(), got["start"])
            and np.array_equal(want["end"].numpy(), got["end"])
            and np.allclose(want["score"].numpy(), got["score"], atol=1e-4))
    if not same:
        raise InputError(f"--run_dir={run.run_dir}: the LiteRT answers differ from the "
                         f"SavedModel's ({got['answer']} vs {want['answer'].numpy()}); not "
                         "exported; please report this")


def check_against_tensorflow(folder, run, function, quantize="none"):
    """The pure-Python tokenizer's ids equal the run's TF tokenizer's (every whitespace word
    of CHECK_TEXTS and the texts whole), the packing equals the SavedModel's, and the
    interpreter's outputs equal the TF model's on the same ids (to 1e-4; not checked for
    int8 weights, whose cost docs/experiments/speed-and-memory.md measures): an InputError
    otherwise."""
    served = lite.LiteModel(folder)
    texts = list(CHECK_TEXTS)
    pieces = [w for text in texts for w in text.split()] + texts
    if [served.wordpiece.ids(x) for x in pieces] != run.tokenizer.tokenize_ids(pieces).to_list():
        raise InputError(f"--run_dir={run.run_dir}: the Python tokenizer's word pieces differ "
                         "from the run's own; please report this with the run's vocab")
    if served.kind == "tagging":
        inputs = served.encode_words(texts)[0]
    elif served.kind == "span":
        inputs = served.encode(list(CHECK_QUESTIONS), list(CHECK_CONTEXTS))
    else:
        from kerasbert.kinds.classification import encode_sentences

        texts_b = list(reversed(texts)) if served.sentence_pair else None
        inputs = served.encode(texts, texts_b)
        packed = encode_sentences(run.tokenizer, {"text_a": texts, **(
            {"text_b": texts_b} if texts_b else {})}, run.config.max_seq_length)
        width = inputs["token_ids"].shape[1]
        if any(not np.array_equal(np.asarray(packed[name])[:, :width], inputs[name])
               for name in lite.INPUTS):
            raise InputError(f"--run_dir={run.run_dir}: the Python packing differs from the "
                             "SavedModel's; please report this")
    if quantize != "none":
        return
    want = function(inputs)["outputs"].numpy()
    got = served._run(**inputs)["outputs"]
    if not np.allclose(got, want, atol=1e-4):
        raise InputError(f"--run_dir={run.run_dir}: the LiteRT model's outputs differ from "
                         f"TensorFlow's by {np.abs(got - want).max():.2g}; not exported")
    if served.kind == "span":
        _check_answers(served, run)


def export_run(run_dir, export_dir, version=None, registry=None, quantize="none"):
    """Exports a finished run as `<export_dir>/<version>/` (model.tflite, vocab.txt,
    serving.json), written into a hidden folder and renamed when complete and checked;
    returns the version folder. `quantize`: one of QUANTIZATIONS (see `convert`)."""
    if quantize not in QUANTIZATIONS:
        raise InputError(f"--quantize={quantize}: expected one of {', '.join(QUANTIZATIONS)}")
    saved_model.check_version(version)
    lite._interpreter_class()  # a missing interpreter is said before any heavy work
    version = saved_model.next_version(export_dir) if version is None else version
    target = os.path.join(export_dir, str(version))
    if os.path.exists(target):
        raise InputError(f"{at(target)}version {version} already exists: pick another")
    saved_model.check_export_dir(export_dir)
    run = saved_model.load_run(run_dir, registry)
    if run.kind.name not in lite.KINDS:
        raise InputError(f"--run_dir={run_dir}: a {run.kind.name} task ({run.task.name}); "
                         f"the LiteRT export serves {', '.join(lite.KINDS)} tasks: use "
                         "`python -m kerasbert.export.saved_model` for this one")
    from kerasbert.tasks.squad.task import SquadTask

    if run.kind.name == "span" and not isinstance(run.task, SquadTask):
        raise InputError(f"--run_dir={run_dir}: the span task {run.task.name} decodes its "
                         "own answers; the LiteRT export serves SQuAD's (squad_v1, squad_v2, "
                         "question_answering): use `python -m kerasbert.export.saved_model`")
    if str(getattr(run.task, "document_context", "0")) != "0":
        raise InputError(f"--run_dir={run_dir}: trained with --document_context; the LiteRT "
                         "export tags sentences alone: use `python -m "
                         "kerasbert.export.saved_model` (serve_with_context)")
    if storage.scheme(export_dir):
        raise InputError(f"--export_dir={export_dir}: a local folder (the interpreter reads "
                         "files from disk)")
    flatbuffer, function = convert(run, quantize)
    os.makedirs(export_dir, exist_ok=True)
    tmp = os.path.join(export_dir, f"{saved_model.TEMP_PREFIX}{version}-{secrets.token_hex(4)}")
    os.makedirs(tmp)
    try:
        with open(os.path.join(tmp, lite.MODEL_FILE), "wb") as f:
            f.write(flatbuffer)
        with open(os.path.join(tmp, lite.VOCAB_FILE), "w", encoding="utf-8") as f:
            f.writelines(token + "\n" for token in run.tokenizer.vocab)
        with open(os.path.join(tmp, lite.SERVING_FILE), "w", encoding="utf-8") as f:
            json.dump(serving_record(run, quantize), f, indent=1)
        check_against_tensorflow(tmp, run, function, quantize)
        os.rename(tmp, target)
    except BaseException:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def main(argv=None):
    """`python -m kerasbert.export.litert --run_dir=RUN --export_dir=DIR`; the exit status."""
    from absl import flags

    from kerasbert import command

    fv = flags.FlagValues()
    flags.DEFINE_string("run_dir", None, "The --output_dir of a finished kerasbert run "
                        "(classification, regression, tagging or SQuAD span answers).",
                        flag_values=fv)
    flags.DEFINE_string("export_dir", None, "A local folder; the export goes to "
                        "<export_dir>/<version>/.", flag_values=fv)
    saved_model.define_version_flag(fv)
    flags.DEFINE_enum("quantize", "none", QUANTIZATIONS, "none: float32, answers equal the "
                      "SavedModel's; dynamic_int8: int8 weight matrices (a quarter of the "
                      "size, faster matmuls; SST-2 accuracy −0.2 points in "
                      "docs/experiments/speed-and-memory.md).", flag_values=fv)
    flags.mark_flags_as_required(["run_dir", "export_dir"], flag_values=fv)

    def export(args):
        if len(args) > 1:
            raise InputError(f"unexpected arguments: {' '.join(args[1:])}")
        path = export_run(fv.run_dir, fv.export_dir, fv.version, quantize=fv.quantize)
        print(f"kerasbert: exported {fv.run_dir} to {path} (LiteRT)", flush=True)
        print(f"kerasbert: next: `from kerasbert.lite import LiteModel; "
              f"LiteModel({path!r}).predict(...)` (see docs/guide/export-serving.md)",
              flush=True)
        return 0

    usage = ("usage: python -m kerasbert.export.litert --run_dir=RUN --export_dir=DIR "
             "[--version=N] [--quantize=dynamic_int8]\nExport a finished kerasbert run for serving "
             "without TensorFlow "
             "(LiteRT).\n\n" + command.flags_usage(fv))
    return command.run(export, fv, usage=usage,
                       argv=["kerasbert.export.litert", *(sys.argv[1:] if argv is None
                                                          else argv)])


if __name__ == "__main__":
    sys.exit(main())
