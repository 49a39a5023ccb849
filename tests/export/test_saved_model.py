"""SavedModel export: what TF Serving loads gives what the trained model gives.

Tiny runs (2 layers, hidden 32) of sst2 (one text), mrpc (pairs), stsb (regression) and swag
(multiple choice) are trained once for the module and exported; one fresh Python process that
imports only tensorflow and tensorflow_text then loads every export and runs all the serving
checks, while `saved_model_cli` inspects the signatures beside it.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import types

import numpy as np
import pytest

from kerasbert import plugins
from kerasbert import run as run_lib
from kerasbert.config import RunConfig
from kerasbert.errors import InputError
from kerasbert.export import saved_model
from kerasbert.hookspecs import hookimpl
from kerasbert.tasks.base import Example, Task

# The raw [CLS] state instead of the pooler: a tiny random encoder's pooled output barely
# depends on the input (outputs differ by ~1e-5 between texts); without the pooler they
# differ by ~1e-4, enough for ATOL to tell a wrong tokenization from a right one.
TINY = dict(init_checkpoint="random", model_size="2/32/2", max_seq_length=32,
            num_train_epochs=1.0, max_train_examples=16, train_batch_size=8,
            max_eval_examples=8, seed=3, head_options={"cls_linear_use_pooler": False})
# Served vs in-process outputs: 1e-5 is the promise; the export matches to ~1e-7 (padding
# columns are trimmed in the graph, so the matmuls differ in shape), and 1e-6 keeps the check
# well below how much the outputs vary between inputs.
ATOL = 1e-6
TASKS = ("sst2", "mrpc", "stsb", "swag")
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}

# Text the model sees in each parity check: accents and capitals (lower-cased and stripped
# by the uncased vocab), CJK, an emoji, an empty text and one far over max_seq_length=32.
LONG = "the plot wanders through " + " ".join(f"scene {i} and its aftermath" for i in range(40))
TEXTS_A = ["A quiet, well acted film.", "Café DÉJÀ VU at the Museum!", "東京の夜 is bright 🙂",
           "", LONG]
TEXTS_B = ["It was quiet and well acted.", LONG, "a night in tokyo", "nothing here", "short"]
CONTEXTS = ["She opens the door.", "The crowd cheers as the runner", ""]
ENDINGS = [["She walks out.", "The door eats a sandwich.", LONG, ""],
           ["crosses the finish line.", "falls asleep.", "sings.", "Über alles!"],
           ["one", "two", "three", "four"]]


def _inputs_of(kind, sentence_pair):
    if kind == "multiple_choice":
        return {"context": CONTEXTS, "endings": ENDINGS}
    return {"text_a": TEXTS_A, **({"text_b": TEXTS_B} if sentence_pair else {})}


def _examples(kind, inputs):
    if kind == "multiple_choice":
        from kerasbert.tasks.swag import ChoiceExample

        return [ChoiceExample(guid=f"t-{i}", text_a=c, endings=tuple(e))
                for i, (c, e) in enumerate(zip(inputs["context"], inputs["endings"]))]
    texts_b = inputs.get("text_b", [None] * len(inputs["text_a"]))
    return [Example(guid=f"t-{i}", text_a=a, text_b=b)
            for i, (a, b) in enumerate(zip(inputs["text_a"], texts_b))]


def _softmax(x):
    z = np.exp(x - x.max(-1, keepdims=True))
    return z / z.sum(-1, keepdims=True)


def _reference(run, inputs):
    """What the trained TaskModel gives in this process, on the training featurization."""
    features = run.task.featurize(_examples(run.task.kind, inputs), run.tokenizer,
                                  run.config.max_seq_length)
    outputs = np.asarray(run.model(features.inputs, training=False), np.float64)
    if run.task.kind == "regression":
        expected = {"score": outputs[:, 0]}
    elif run.task.kind == "multiple_choice":
        expected = {"probabilities": _softmax(outputs), "choice": outputs.argmax(-1)}
    else:
        expected = {"probabilities": _softmax(outputs),
                    "label": [run.task.label_list[i] for i in outputs.argmax(-1)]}
    return features.inputs, expected


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """task -> (run dir, export dir, version folder, LoadedRun, inputs, token ids, expected)."""
    registry = plugins.registry()
    root = tmp_path_factory.mktemp("export")
    result = {}
    for name in TASKS:
        if name not in registry.tasks:  # swag is registered by kerasbert.tasks.builtin
            continue
        run_dir, export_dir = str(root / f"run_{name}"), str(root / f"serving_{name}")
        config = dict(TINY, do_eval=name == "stsb")  # stsb: dev metrics to reproduce
        if name == "swag":
            config["max_train_examples"] = 8  # one step of 8 x 4 sequences
        run_lib.execute(RunConfig(task=name, output_dir=run_dir, **config), registry)
        path = saved_model.export_run(run_dir, export_dir)
        run = saved_model.load_run(run_dir)
        inputs = _inputs_of(run.task.kind, run.sentence_pair)
        token_ids, expected = _reference(run, inputs)
        result[name] = types.SimpleNamespace(run_dir=run_dir, export_dir=export_dir, path=path,
                                             run=run, inputs=inputs, token_ids=token_ids,
                                             expected=expected)
    return result


# One fresh process for every export: only tensorflow and tensorflow_text, like a server.
SERVE_SCRIPT = textwrap.dedent(r"""
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer's ops)

    def plain(value):
        value = value.numpy() if hasattr(value, "numpy") else value
        if value.dtype == object:
            return [x.decode("utf-8", "replace") for x in value.reshape(-1)]
        return value.tolist()

    def call(fn, **inputs):
        try:
            out = fn(**{k: tf.convert_to_tensor(v) for k, v in inputs.items()})
        except Exception as e:  # a clean error: reported, the process goes on
            return {"error": f"{type(e).__name__}: {e}"[:500]}
        return {"outputs": {k: plain(v) for k, v in out.items()},
                "shapes": {k: list(v.shape) for k, v in out.items()}}

    def hostile_cases(names):
        long_words, one_word = "word " * 20000, "x" * 100000  # 100,000 characters each
        cases = {}
        for label, value in [("empty", b""), ("long_words", long_words.encode()),
                             ("long_word", one_word.encode()), ("not_utf8", b"\xff\xfe\xc3")]:
            if names[0] == "context":
                cases[label] = {"context": [value], "endings": [[value, b"ok", value, b""]]}
            else:
                cases[label] = {n: [value] for n in names}
        empty = tf.zeros([0, 4] if names[0] == "context" else [0], tf.string)
        cases["batch_of_0"] = {n: empty if n == "endings" else tf.zeros([0], tf.string)
                               for n in names}
        if len(names) == 2:  # mismatched batch sizes
            cases["mismatched"] = {names[0]: [b"a", b"b"],
                                   names[1]: [[b"c"] * 4] if names[1] == "endings" else [b"c"]}
        return cases

    def session_run(path, inputs):
        # What TF Serving does: load the MetaGraph into a Session (the init op fills the
        # vocabulary tables) and run the signature's tensors by name.
        with tf.compat.v1.Graph().as_default(), tf.compat.v1.Session() as sess:
            meta = tf.compat.v1.saved_model.loader.load(sess, ["serve"], path)
            sig = meta.signature_def["serving_default"]
            feed = {sig.inputs[k].name: v for k, v in inputs.items()}
            names = sorted(sig.outputs)
            values = sess.run([sig.outputs[k].name for k in names], feed)
            return {k: plain(v) for k, v in zip(names, values)}

    jobs = json.load(open(sys.argv[1]))
    results = {}
    for job in jobs:
        loaded = tf.saved_model.load(job["path"])
        text = loaded.signatures["serving_default"]
        ids = loaded.signatures["serve_token_ids"]
        results[job["name"]] = {
            "text": call(text, **job["inputs"]),
            "ids": call(ids, **job["token_ids"]),
            "hostile": {k: call(text, **v) for k, v in hostile_cases(list(job["inputs"])).items()},
            "session": session_run(job["path"], job["inputs"]) if job["session"] else None,
        }
    results["modules"] = sorted(m for m in sys.modules if m.split(".")[0] in
                                ("kerasbert", "keras_hub", "keras_nlp"))
    json.dump(results, open(sys.argv[2], "w"))
""")


def _saved_model_cli():
    found = shutil.which("saved_model_cli")
    return found or os.path.join(os.path.dirname(sys.executable), "saved_model_cli")


CLI_CHECKED = ("mrpc",)  # each run is a TF start-up; read_signature_defs checks them all


@pytest.fixture(scope="module")
def served(exported, tmp_path_factory):
    """Results of the fresh serving process, and `saved_model_cli show --all` outputs."""
    work = tmp_path_factory.mktemp("serve")
    jobs = [{"name": name, "path": e.path, "inputs": e.inputs, "session": name == "mrpc",
             "token_ids": {k: v.tolist() for k, v in e.token_ids.items()}}
            for name, e in exported.items()]
    (work / "jobs.json").write_text(json.dumps(jobs))
    (work / "serve.py").write_text(SERVE_SCRIPT)
    clis = {name: subprocess.Popen([_saved_model_cli(), "show", "--dir", e.path, "--all"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   env=ENV)
            for name, e in exported.items() if name in CLI_CHECKED}
    proc = subprocess.run([sys.executable, str(work / "serve.py"), str(work / "jobs.json"),
                           str(work / "results.json")], capture_output=True, text=True,
                          timeout=300, env=ENV, cwd=str(work))
    shows = {}
    for name, cli in clis.items():
        out, err = cli.communicate(timeout=300)
        assert cli.returncode == 0, err[-2000:]
        shows[name] = out
    assert proc.returncode == 0, proc.stderr[-3000:]  # no hostile input crashed the process
    return json.loads((work / "results.json").read_text()), shows


def _need(exported, name):
    if name not in exported:
        pytest.skip(f"task {name} is not registered")
    return exported[name]


def _assert_outputs_match(actual, expected, label_list=None):
    """Scores to ATOL; the decision (label / choice) equal to the reference wherever the
    reference is not a near-tie, and always the argmax of the served probabilities."""
    assert set(actual) == set(expected)
    for key, value in expected.items():
        if key not in ("label", "choice"):
            assert np.ptp(value, axis=0).max() > 20 * ATOL  # the inputs give distinct outputs
            np.testing.assert_allclose(actual[key], value, rtol=0, atol=ATOL)
    if "probabilities" in expected:
        key = "label" if "label" in expected else "choice"
        served = np.asarray(actual["probabilities"])
        top2 = np.sort(np.asarray(expected["probabilities"]), -1)[:, -2:]
        decisive = top2[:, 1] - top2[:, 0] > ATOL  # a float-rounding tie may go either way
        assert [a for a, d in zip(actual[key], decisive) if d] == [
            e for e, d in zip(expected[key], decisive) if d]
        argmax = served.argmax(-1)
        assert actual[key] == ([label_list[i] for i in argmax] if key == "label" else
                               argmax.tolist())


# --- serving results --------------------------------------------------------------------

@pytest.mark.parametrize("name", TASKS)
def test_raw_text_signature_equals_the_trained_model(exported, served, name):
    e = _need(exported, name)
    result = served[0][name]["text"]
    assert "error" not in result, result
    _assert_outputs_match(result["outputs"], e.expected, e.run.task.label_list)


@pytest.mark.parametrize("name", TASKS)
def test_in_graph_encoding_equals_the_training_features(exported, name):
    """Token by token: what serving_default feeds the model is what training fed it."""
    import tensorflow as tf

    e = _need(exported, name)
    spec = saved_model.kind_export(e.run.task)
    # Eagerly: the same ops as in the graph; the served outputs check the graph itself.
    encoded = spec.encode(e.run.tokenizer, {k: tf.constant(v) for k, v in e.inputs.items()},
                          e.run.config.max_seq_length)
    assert set(encoded) == set(e.token_ids)
    for key, value in e.token_ids.items():
        np.testing.assert_array_equal(encoded[key].numpy(), value, err_msg=key)


@pytest.mark.parametrize("name", TASKS)
def test_token_id_signature_equals_the_trained_model(exported, served, name):
    e = _need(exported, name)
    result = served[0][name]["ids"]
    assert "error" not in result, result
    _assert_outputs_match(result["outputs"], e.expected, e.run.task.label_list)


@pytest.mark.parametrize("name", TASKS)
def test_keras_tfsm_layer_wraps_both_signatures(exported, name):
    """keras.layers.TFSMLayer calls an endpoint with one positional dict (a signature alone
    takes keywords only: "too many positional arguments"); the export serves both."""
    import keras
    import tensorflow as tf

    e = _need(exported, name)
    for endpoint, inputs in (("serving_default", e.inputs), ("serve_token_ids", e.token_ids)):
        layer = keras.layers.TFSMLayer(e.path, call_endpoint=endpoint)
        out = layer({k: tf.constant(v) for k, v in inputs.items()})
        actual = {k: (v.numpy().astype(str).tolist() if v.dtype == tf.string else
                      v.numpy().tolist()) for k, v in out.items()}
        _assert_outputs_match(actual, e.expected, e.run.task.label_list)


def test_output_dtypes_and_shapes_per_kind(exported, served):
    results = served[0]
    assert results["sst2"]["text"]["shapes"] == {"probabilities": [5, 2], "label": [5]}
    assert results["stsb"]["text"]["shapes"] == {"score": [5]}
    if "swag" in results:
        assert results["swag"]["text"]["shapes"] == {"probabilities": [3, 4], "choice": [3]}
        assert all(0 <= c < 4 for c in results["swag"]["text"]["outputs"]["choice"])
    assert set(results["sst2"]["text"]["outputs"]["label"]) <= {"0", "1"}


@pytest.mark.parametrize("name", TASKS)
def test_hostile_inputs_give_results_or_clean_errors(exported, served, name):
    _need(exported, name)
    hostile = served[0][name]["hostile"]
    kind = exported[name].run.task.kind
    for case in ("empty", "long_words", "long_word", "not_utf8"):
        result = hostile[case]
        assert "error" not in result, (case, result)
        if kind == "regression":
            assert np.isfinite(result["outputs"]["score"]).all()
        else:
            probabilities = np.asarray(result["outputs"]["probabilities"])
            np.testing.assert_allclose(probabilities.sum(-1), 1.0, atol=1e-5)
    empty = hostile["batch_of_0"]
    assert "error" not in empty, empty
    expected_shapes = {"classification": {"probabilities": [0, 2], "label": [0]},
                       "regression": {"score": [0]},
                       "multiple_choice": {"probabilities": [0, 4], "choice": [0]}}[kind]
    assert empty["shapes"] == expected_shapes
    if "mismatched" in hostile:
        assert "InvalidArgumentError" in hostile["mismatched"]["error"]
        assert "same number" in hostile["mismatched"]["error"]


def test_session_loading_as_tf_serving_does_gives_the_same_answers(exported, served):
    e = exported["mrpc"]
    _assert_outputs_match(served[0]["mrpc"]["session"], e.expected, e.run.task.label_list)


def test_serving_process_needs_no_kerasbert_or_keras_hub(served):
    assert served[0]["modules"] == []


# --- signatures, as TF Serving and saved_model_cli see them -----------------------------

def _shape(text):
    if text == "unknown_rank":  # the __saved_model_init_op pseudo-signature
        return None
    return tuple(int(d) for d in text.strip("()").split(",") if d.strip())


def parse_signature_defs(text):
    """saved_model_cli `show --all` -> {signature: {"inputs"|"outputs": {name: (dtype, shape)}}}."""
    signatures, current, section, name = {}, None, None, None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("Concrete Functions"):
            break
        if m := re.fullmatch(r"signature_def\['(\w+)'\]:", line):
            current = signatures.setdefault(m[1], {"inputs": {}, "outputs": {}})
        elif m := re.fullmatch(r"(inputs|outputs)\['(\w+)'\] tensor_info:", line):
            section, name = m[1], m[2]
        elif current is not None and (m := re.fullmatch(r"dtype: (\w+)", line)):
            current[section][name] = (m[1],)
        elif current is not None and (m := re.fullmatch(r"shape: (.*)", line)):
            current[section][name] += (_shape(m[1]),)
    return signatures


def read_signature_defs(path):
    """The same, read from saved_model.pb directly."""
    from tensorflow.core.framework import types_pb2
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        proto.ParseFromString(f.read())
    (meta,) = proto.meta_graphs

    def describe(infos):
        return {k: (types_pb2.DataType.Name(v.dtype), tuple(d.size for d in v.tensor_shape.dim))
                for k, v in infos.items()}

    return {k: {"inputs": describe(v.inputs), "outputs": describe(v.outputs)}
            for k, v in meta.signature_def.items()}


def _expected_signatures(kind, sentence_pair):
    if kind == "multiple_choice":
        text_inputs = {"context": ("DT_STRING", (-1,)), "endings": ("DT_STRING", (-1, -1))}
        outputs = {"probabilities": ("DT_FLOAT", (-1, -1)), "choice": ("DT_INT32", (-1,))}
    else:
        text_inputs = {"text_a": ("DT_STRING", (-1,))}
        if sentence_pair:
            text_inputs["text_b"] = ("DT_STRING", (-1,))
        outputs = ({"score": ("DT_FLOAT", (-1,))} if kind == "regression" else
                   {"probabilities": ("DT_FLOAT", (-1, 2)), "label": ("DT_STRING", (-1,))})
    ids_shape = (-1, -1, -1) if kind == "multiple_choice" else (-1, -1)
    return {
        "serving_default": {"inputs": text_inputs, "outputs": outputs},
        "serve_token_ids": {"inputs": {k: ("DT_INT32", ids_shape) for k in
                                       ("token_ids", "segment_ids", "padding_mask")},
                            "outputs": outputs},
    }


@pytest.mark.parametrize("name", TASKS)
def test_signatures_have_the_documented_names_dtypes_and_shapes(exported, name):
    e = _need(exported, name)
    signatures = read_signature_defs(e.path)
    expected = _expected_signatures(e.run.task.kind, e.run.sentence_pair)
    assert {k: signatures.get(k) for k in expected} == expected
    assert e.run.sentence_pair == (name in ("mrpc", "stsb"))


@pytest.mark.parametrize("name", CLI_CHECKED)
def test_saved_model_cli_lists_both_signatures(exported, served, name):
    e = _need(exported, name)
    signatures = parse_signature_defs(served[1][name])
    expected = _expected_signatures(e.run.task.kind, e.run.sentence_pair)
    assert {k: signatures.get(k) for k in expected} == expected


def _serving_protos():
    """PredictionLog, built here from the field numbers of tensorflow_serving/apis/*.proto
    (tensorflow-serving-api is not a dependency): a reading of the warm-up records
    independent of the hand-written bytes of `saved_model.predict_log`."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    from tensorflow.core.framework import tensor_pb2

    pool = descriptor_pool.Default()  # holds TensorFlow's TensorProto
    try:
        return message_factory.GetMessageClass(pool.FindMessageTypeByName(
            "serving_test.PredictionLog"))  # built by an earlier test
    except KeyError:
        pass
    f = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(
        name="serving_test.proto", package="serving_test", syntax="proto3",
        dependency=[tensor_pb2.DESCRIPTOR.name])

    def message(name, fields, parent=None):
        m = (parent.nested_type if parent else file.message_type).add(name=name)
        for field_name, number, kind, type_name in fields:
            label = f.LABEL_REPEATED if field_name == "inputs" else f.LABEL_OPTIONAL
            m.field.add(name=field_name, number=number, type=kind, label=label,
                        type_name=type_name)
        return m

    message("ModelSpec", [("signature_name", 3, f.TYPE_STRING, None)])
    request = message("PredictRequest", [
        ("model_spec", 1, f.TYPE_MESSAGE, ".serving_test.ModelSpec"),
        ("inputs", 2, f.TYPE_MESSAGE, ".serving_test.PredictRequest.InputsEntry")])
    entry = message("InputsEntry", [("key", 1, f.TYPE_STRING, None),
                                    ("value", 2, f.TYPE_MESSAGE, ".tensorflow.TensorProto")],
                    parent=request)
    entry.options.map_entry = True
    message("PredictLog", [("request", 1, f.TYPE_MESSAGE, ".serving_test.PredictRequest")])
    message("PredictionLog", [("predict_log", 6, f.TYPE_MESSAGE, ".serving_test.PredictLog")])
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(
        "serving_test.PredictionLog"))


@pytest.mark.parametrize("name", ["mrpc", "swag"])
def test_warmup_requests_run_in_a_session_as_tf_serving_runs_them(exported, name):
    """assets.extra/tf_serving_warmup_requests: one PredictionLog per signature, whose
    request a TF1 Session load (what TF Serving does before it serves a version) runs."""
    import tensorflow as tf

    e = _need(exported, name)
    log_class = _serving_protos()
    path = os.path.join(e.path, saved_model.WARMUP)
    requests = [log_class.FromString(r.numpy()).predict_log.request
                for r in tf.data.TFRecordDataset(path)]
    with tf.compat.v1.Graph().as_default(), tf.compat.v1.Session() as sess:
        meta = tf.compat.v1.saved_model.loader.load(sess, ["serve"], e.path)
        assert sorted(r.model_spec.signature_name for r in requests) == sorted(
            k for k in meta.signature_def if k != "__saved_model_init_op")
        for request in requests:
            sig = meta.signature_def[request.model_spec.signature_name]
            assert set(request.inputs) == set(sig.inputs)
            feed = {sig.inputs[k].name: tf.make_ndarray(v) for k, v in request.inputs.items()}
            outputs = sess.run({k: v.name for k, v in sig.outputs.items()}, feed)
            assert {v.shape[0] for v in outputs.values()} == {1}  # one answer per request
    texts = [tf.make_ndarray(v) for r in requests for v in r.inputs.values()
             if v.dtype == tf.string.as_datatype_enum]
    assert texts and all(x == saved_model.WARMUP_TEXT.encode() for t in texts for x in t.flat)


# --- the export folder --------------------------------------------------------------------

def test_export_writes_a_numbered_version_with_client_metadata(exported):
    e = exported["mrpc"]
    assert e.path == os.path.join(e.export_dir, "1")
    assert os.listdir(e.export_dir) == ["1"]  # nothing temporary left behind
    assert os.path.isfile(os.path.join(e.path, "saved_model.pb"))
    metadata = json.load(open(os.path.join(e.path, "assets.extra", "kerasbert.json")))
    assert metadata["label_list"] == ["0", "1"] and metadata["max_seq_length"] == 32
    assert metadata["serving_default_inputs"] == ["text_a", "text_b"]


def test_failed_export_leaves_no_version_folder(exported, tmp_path, monkeypatch):
    e = exported["sst2"]
    export_dir = tmp_path / "serving"
    seen = []

    def fail_after_the_savedmodel_is_written(run, path):
        seen.append(sorted(os.listdir(path)))
        raise RuntimeError("disk full")

    monkeypatch.setattr(saved_model, "_write_metadata", fail_after_the_savedmodel_is_written)
    with pytest.raises(RuntimeError, match="disk full"):
        saved_model.export_run(e.run_dir, str(export_dir))
    assert "saved_model.pb" in seen[0]  # it failed mid-export, with files already written
    assert os.listdir(export_dir) == []


def test_next_export_is_version_2_and_versions_are_never_replaced(exported, capsys):
    e = exported["stsb"]
    before = os.path.getmtime(os.path.join(e.path, "saved_model.pb"))
    assert saved_model.main(["--run_dir", e.run_dir, "--export_dir", e.export_dir]) == 0
    second = os.path.join(e.export_dir, "2")
    assert f"exported {e.run_dir} to {second}" in capsys.readouterr().out
    assert sorted(os.listdir(e.export_dir)) == ["1", "2"]
    assert os.path.getmtime(os.path.join(e.path, "saved_model.pb")) == before
    with pytest.raises(InputError, match=r"/2: version 2 already exists"):
        saved_model.export_run(e.run_dir, e.export_dir, version=2)
    with pytest.raises(InputError, match="--version=0: must be a positive integer"):
        saved_model.export_run(e.run_dir, e.export_dir, version=0)
    assert saved_model.next_version(e.export_dir) == 3


def test_next_version_ignores_what_tf_serving_ignores(tmp_path):
    assert saved_model.next_version(str(tmp_path / "new")) == 1
    for name in ("3", "10", ".tmp-11-abcd", "notes"):
        (tmp_path / name).mkdir()
    (tmp_path / "12").write_text("a file, not a version")
    assert saved_model.next_version(str(tmp_path)) == 11


# --- rebuilding runs and clear errors ---------------------------------------------------

def test_rebuilt_model_reproduces_the_runs_dev_metrics(exported):
    e = exported["stsb"]
    run = e.run
    examples = run.task.read_examples(run.task.sample_dir(), "dev")[:TINY["max_eval_examples"]]
    features = run.task.featurize(examples, run.tokenizer, run.config.max_seq_length)
    outputs = np.asarray(run.model(features.inputs, training=False))
    metrics = run.task.compute_metrics(run.task.predictions(outputs), features.labels)
    recorded = json.load(open(os.path.join(e.run_dir, "metrics.json")))
    assert metrics["pearson"] == pytest.approx(recorded["pearson"], abs=1e-4)


def test_unfinished_run_is_a_clear_error(exported, tmp_path, capsys):
    run_dir = tmp_path / "unfinished"
    run_dir.mkdir()
    shutil.copy(os.path.join(exported["sst2"].run_dir, "run_config.json"), run_dir)
    with pytest.raises(InputError, match=r"model\.weights\.h5: missing"):
        saved_model.load_run(str(run_dir))
    assert saved_model.main(["--run_dir", str(tmp_path / "nope"),
                             "--export_dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("kerasbert: error: ") and "nope" in err[0]
    assert not (tmp_path / "out").exists()


def test_a_kind_without_a_serving_signature_is_a_clear_error():
    from kerasbert.kinds.base import TaskKind

    class Ranking(TaskKind):
        name = "ranking"  # no `serving`: cannot be exported

    @hookimpl
    def kerasbert_kinds():
        return [Ranking()]

    manager, _, _ = plugins.make_manager(autoload=False)
    manager.register(types.SimpleNamespace(kerasbert_kinds=kerasbert_kinds), name="ranking")
    registry = plugins.Registry(manager)
    task = types.SimpleNamespace(name="third_party", kind="ranking")
    with pytest.raises(InputError, match="no serving signature is defined for ranking tasks; "
                                         "exportable kinds: classification, multiple_choice"):
        saved_model.kind_export(task, registry)


def test_pair_detection_falls_back_to_the_bundled_sample():
    class PairTask(Task):
        name = "third_party"

        def sample_dir(self):
            return "unused"

        def read_examples(self, data_dir, split):
            return [Example(guid="train-0", text_a="a", text_b="b")]

    assert PairTask().is_sentence_pair()

    class Silent(PairTask):
        def read_examples(self, data_dir, split):
            raise NotImplementedError

    with pytest.raises(InputError, match="one text or a pair"):
        Silent().is_sentence_pair()
