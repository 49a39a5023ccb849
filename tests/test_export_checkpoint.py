"""A fine-tuned run out to keras-hub and HuggingFace: what the other side loads computes
what the run computes.

One tiny run (2 layers, hidden 32, one training step) per head that HF has an equivalent
for: sst2 (BertForSequenceClassification and keras-hub's BertTextClassifier), stsb
(regression), swag (BertForMultipleChoice), conll2003 (BertForTokenClassification),
squad_v1 (BertForQuestionAnswering), and sst2 on the raw [CLS] state (no equivalent).
A tiny random encoder's outputs barely depend on the input (N(0, 0.02) weights), so after
training every weight is redrawn at a scale where a wrong transpose or name shows (the
run's own files are rewritten with them); the references are then:
  kerasbert's TaskModel on the same token ids (what the run computes);
  kerasbert's own HF loader reading the folder back (bit-exact round trip);
  the independent float64 numpy BERT of tests/helpers/hf_bert.py on model.safetensors;
  transformers in the torch interpreter that KERASBERT_TORCH_PYTHON names (large; skipped
  without one).
"""

import json
import os
import subprocess
import sys
import textwrap
import types

import numpy as np
import pytest
from safetensors.numpy import load_file

from kerasbert import run as run_lib
from kerasbert.config import RunConfig
from kerasbert.export import checkpoint
from kerasbert.model import encoders
from kerasbert.tasks.base import Example
from tests.helpers.hf_bert import reference_bert

HERE = os.path.dirname(os.path.abspath(__file__))
TORCH_PYTHON = os.environ.get("KERASBERT_TORCH_PYTHON")  # with torch and transformers
TINY = dict(init_checkpoint="random", model_size="2/32/2", dropout=0.0, max_seq_length=32,
            max_query_length=16, doc_stride=16, train_batch_size=4, max_train_examples=4,
            do_eval=False, num_train_epochs=1.0, seed=1)
RUNS = {  # name -> (task, head options, HF class)
    "sst2": ("sst2", {}, "BertForSequenceClassification"),
    "stsb": ("stsb", {}, "BertForSequenceClassification"),
    "swag": ("swag", {}, "BertForMultipleChoice"),
    "conll": ("conll2003", {}, "BertForTokenClassification"),
    "squad": ("squad_v1", {}, "BertForQuestionAnswering"),
    "sst2_raw_cls": ("sst2", {"cls_linear_use_pooler": False}, None),
}
ATOL = 1e-5


def _redraw_weights(model, rng):
    """Every weight at BERT-checkpoint-like scale: N(0, 0.2) kernels and embeddings,
    non-zero biases, LayerNorm gammas around 1."""
    for weight in model.weights:
        name = weight.path.rsplit("/", 1)[-1]
        shape = tuple(weight.shape)
        value = {"gamma": 1.0 + 0.1 * rng.standard_normal(shape),
                 "beta": 0.1 * rng.standard_normal(shape),
                 "bias": 0.1 * rng.standard_normal(shape)}.get(
                     name, 0.2 * rng.standard_normal(shape))
        weight.assign(value.astype("float32"))


def _token_inputs(vocab_size, multiple_choice, rng):
    """3 sequences of 12 (x 4 choices), the last two padded, some segment 1."""
    batch, length = (2, 4) if multiple_choice else (3,), 12
    shape = (*batch, length) if multiple_choice else (batch[0], length)
    ids = rng.integers(5, vocab_size, size=shape).astype("int32")
    mask = np.ones(shape, "int32")
    mask[..., -1, 8:] = 0
    mask[..., -2, 10:] = 0
    segments = np.zeros(shape, "int32")
    segments[..., 6:] = 1
    ids, segments = ids * mask, segments * mask
    ids[..., 0] = 2  # [CLS]'s position: what the pooler reads
    return {"token_ids": ids, "segment_ids": segments, "padding_mask": mask}


# Each run costs ~12 s (building and tracing): the default suite covers sst2 (the keras-hub
# task preset, BertForSequenceClassification) and conll (a per-token head); `large` the rest.
FAST = ("sst2", "conll")
NAMES = [name if name in FAST else pytest.param(name, marks=pytest.mark.large)
         for name in RUNS]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """name -> namespace(run_dir, run (TrainedRun), inputs, outputs, hf, keras_hub), each
    run trained and exported the first time a test asks for it."""
    root = tmp_path_factory.mktemp("checkpoint_export")
    return _Runs(root)


class _Runs(dict):
    def __init__(self, root):
        super().__init__()
        self.root = root

    def __missing__(self, name):
        self[name] = _trained_and_exported(self.root, name)
        return self[name]


def _trained_and_exported(root, name):
    rng = np.random.default_rng(sorted(RUNS).index(name))
    task, options, hf_class = RUNS[name]
    run_dir = str(root / f"run_{name}")
    run_lib.execute(RunConfig(task=task, output_dir=run_dir, head_options=options, **TINY))
    trained = checkpoint.load_trained_run(run_dir)
    _redraw_weights(trained.model, rng)
    trained.model.save_weights(os.path.join(run_dir, "model.weights.h5"))
    encoders.save_encoder(trained.model.backbone, trained.tokenizer.vocab_file,
                          trained.tokenizer.do_lower_case, run_dir)
    hf, kh = str(root / f"hf_{name}"), str(root / f"kh_{name}")
    hf_lines = checkpoint.export_checkpoint(run_dir, hf, "huggingface")
    kh_lines = checkpoint.export_checkpoint(run_dir, kh, "keras_hub")
    run = checkpoint.load_trained_run(run_dir)  # what the run's files hold now
    inputs = _token_inputs(run.model.backbone.vocabulary_size, task == "swag", rng)
    flat = {k: v.reshape(-1, v.shape[-1]) for k, v in inputs.items()}
    encoded = run.model.backbone(flat)
    # The run's model as keras-hub's BertBackbone computes it: the tanh GELU
    tanh = checkpoint.load_trained_run(run_dir)
    _use_tanh_gelu(tanh.model.backbone)
    tanh_encoded = tanh.model.backbone(flat)
    return types.SimpleNamespace(
        name=name, task=task, hf_class=hf_class, run_dir=run_dir, run=run, hf=hf, kh=kh,
        hf_lines=hf_lines, kh_lines=kh_lines, inputs=inputs, flat=flat, tanh=tanh,
        logits=np.asarray(run.model(inputs, training=False), np.float64),
        sequence=np.asarray(encoded["sequence_output"], np.float64),
        pooled=np.asarray(encoded["pooled_output"], np.float64),
        tanh_logits=np.asarray(tanh.model(inputs, training=False), np.float64),
        tanh_sequence=np.asarray(tanh_encoded["sequence_output"], np.float64),
        tanh_pooled=np.asarray(tanh_encoded["pooled_output"], np.float64))


def _use_tanh_gelu(backbone):
    """What keras-hub's BertBackbone computes (its hard-coded activation), in place, the way
    kerasbert's BertEncoder sets its own activation."""
    from kerasbert.model.backbone import gelu_tanh

    for layer in backbone.transformer_layers:
        layer.activation = layer._feedforward_intermediate_dense.activation = gelu_tanh


def _real_positions(r):
    return r.flat["padding_mask"].astype(bool)


# --- HuggingFace folder --------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_the_hf_folder_has_the_files_and_config_of_the_checkpoint(runs, name):
    r = runs[name]
    assert sorted(os.listdir(r.hf)) == ["README.md", "config.json", "kerasbert.json",
                                        "model.safetensors", "tokenizer_config.json", "vocab.txt"]
    config = json.load(open(os.path.join(r.hf, "config.json")))
    backbone = r.run.model.backbone
    assert config["architectures"] == [r.hf_class or "BertModel"]
    assert (config["hidden_act"], config["layer_norm_eps"]) == ("gelu", 1e-12)
    assert (config["hidden_size"], config["num_hidden_layers"], config["num_attention_heads"],
            config["intermediate_size"], config["vocab_size"]) == (
                32, 2, 2, 128, backbone.vocabulary_size)
    with open(os.path.join(r.hf, "vocab.txt"), encoding="utf-8") as f:
        assert f.read() == open(r.run.tokenizer.vocab_file, encoding="utf-8").read()
    tokenizer_config = json.load(open(os.path.join(r.hf, "tokenizer_config.json")))
    assert tokenizer_config["do_lower_case"] is r.run.tokenizer.do_lower_case
    tensors = load_file(os.path.join(r.hf, "model.safetensors"))
    head = {"BertForQuestionAnswering": "qa_outputs"}.get(r.hf_class, "classifier")
    if r.hf_class:
        assert all(k.startswith(("bert.", head + ".")) for k in tensors)
        assert tensors[f"{head}.weight"].shape == (r.logits.shape[-1] if name != "swag" else 1, 32)
    else:
        assert not any(k.startswith(("bert.", "classifier")) for k in tensors)
        assert any("holds BertModel only" in line for line in r.hf_lines)
    if r.hf_class in ("BertForSequenceClassification", "BertForTokenClassification"):
        labels = list(r.run.task.label_list or ["LABEL_0"])  # stsb: one score
        assert list(config["id2label"].values()) == labels
    if r.task == "stsb":
        assert config["problem_type"] == "regression"


@pytest.mark.parametrize("name", NAMES)
def test_kerasbert_reads_the_hf_folder_back_bit_for_bit(runs, name):
    r = runs[name]
    loaded = encoders.load_encoder(r.hf)
    assert loaded.source == "huggingface"
    assert loaded.do_lower_case is r.run.tokenizer.do_lower_case
    for mine, back in zip(r.run.model.backbone.weights, loaded.backbone.weights):
        np.testing.assert_array_equal(np.asarray(mine), np.asarray(back), err_msg=mine.path)
    out = loaded.backbone(r.flat)
    np.testing.assert_allclose(out["sequence_output"], r.sequence, atol=ATOL)
    np.testing.assert_allclose(out["pooled_output"], r.pooled, atol=ATOL)


@pytest.mark.parametrize("name", NAMES)
def test_the_numpy_bert_on_model_safetensors_gives_the_runs_outputs(runs, name):
    r = runs[name]
    tensors = load_file(os.path.join(r.hf, "model.safetensors"))
    config = json.load(open(os.path.join(r.hf, "config.json")))
    prefix = "bert." if r.hf_class else ""
    sequence, pooled = reference_bert(tensors, config, r.flat, prefix=prefix)
    real = _real_positions(r)
    np.testing.assert_allclose(sequence[real], r.sequence[real], atol=ATOL)
    np.testing.assert_allclose(pooled, r.pooled, atol=ATOL)
    if not r.hf_class:
        return
    head = "qa_outputs" if r.hf_class == "BertForQuestionAnswering" else "classifier"
    weight, bias = (tensors[f"{head}.{n}"].astype(np.float64) for n in ("weight", "bias"))
    if r.hf_class in ("BertForSequenceClassification", "BertForMultipleChoice"):
        logits = (pooled @ weight.T + bias).reshape(r.logits.shape)
        np.testing.assert_allclose(logits, r.logits, atol=ATOL)
    else:  # per token; the run's span head marks padding with PADDING_LOGIT, HF does not
        logits = sequence @ weight.T + bias
        np.testing.assert_allclose(logits[real], r.logits[real], atol=ATOL)


# --- keras-hub preset ----------------------------------------------------------------------

# keras-hub's BertBackbone computes the tanh GELU; the tiny runs' encoders the exact (erf)
# one, as BERT's checkpoints do: with the redrawn N(0, 0.2) weights the outputs differ, by
# less than this bound (they equal the run's model with the tanh GELU to ATOL).
GELU_GAP = 0.1


@pytest.mark.parametrize("name", NAMES)
def test_keras_hub_loads_the_backbone_preset_with_its_vocabulary(runs, name):
    import keras_hub

    r = runs[name]
    backbone = keras_hub.models.BertBackbone.from_preset(r.kh)
    assert type(backbone) is keras_hub.models.BertBackbone  # no kerasbert class named
    out = backbone(r.flat)
    np.testing.assert_allclose(out["sequence_output"], r.tanh_sequence, atol=ATOL)
    np.testing.assert_allclose(out["pooled_output"], r.tanh_pooled, atol=ATOL)
    np.testing.assert_allclose(out["sequence_output"], r.sequence, atol=GELU_GAP)
    tokenizer = keras_hub.models.BertTokenizer.from_preset(r.kh)
    assert tokenizer.get_vocabulary() == list(r.run.tokenizer.vocab)
    # kerasbert's own loader reads the preset too (--init_checkpoint=<preset>)
    assert encoders.load_encoder(r.kh).source == "keras_hub_preset"
    # the tiny run's exact GELU is not keras-hub's: one line says so
    assert any("computes the tanh GELU" in line for line in r.kh_lines)


@pytest.mark.parametrize("name", ["sst2", pytest.param("stsb", marks=pytest.mark.large)])
def test_keras_hub_text_classifier_predicts_what_the_run_predicts(runs, name):
    import keras_hub

    r = runs[name]
    classifier = keras_hub.models.BertTextClassifier.from_preset(r.kh)
    logits = np.asarray(classifier(r.flat, training=False))
    np.testing.assert_allclose(logits, r.tanh_logits, atol=ATOL)
    np.testing.assert_allclose(logits, r.logits, atol=GELU_GAP)
    # raw text through keras-hub's own preprocessor = the run's featurization + model
    # accents: BERT's uncased tokenizer strips them (keras-hub's keeps them by default, and
    # "amélie" / "café" would then be [UNK] in an uncased vocabulary)
    text_pair = name == "stsb"
    predicted = classifier.predict((TEXTS, PAIRS) if text_pair else TEXTS, verbose=0)
    np.testing.assert_allclose(predicted, _text_logits(r, text_pair), atol=ATOL)


TEXTS = ["a quiet and well acted film", "the plot is a mess , like amélie",
         "it is not bad at all in the café"]
PAIRS = ["the film is quiet", "it was a mess", "not at all"]


def _text_logits(r, text_pair):
    """What the run's model (with keras-hub's tanh GELU) gives on TEXTS (and PAIRS)."""
    features = r.tanh.task.featurize(
        [Example(guid=str(i), text_a=a, text_b=b if text_pair else None)
         for i, (a, b) in enumerate(zip(TEXTS, PAIRS))],
        r.tanh.tokenizer, r.tanh.config.max_seq_length)
    return np.asarray(r.tanh.model(features.inputs, training=False))


# In a process that never imports kerasbert: keras-hub loads the preset (backbone and task)
# and the HF folder (its transformers converter), and they compute what the run computes.
ELSEWHERE = textwrap.dedent(r"""
    import json, sys
    import numpy as np
    import keras_hub
    kh, hf, inputs, texts, out = sys.argv[1:6]
    flat = dict(np.load(inputs))
    result = {}
    backbone = keras_hub.models.BertBackbone.from_preset(kh)
    result["sequence"] = np.asarray(backbone(flat)["sequence_output"])
    classifier = keras_hub.models.BertTextClassifier.from_preset(kh)
    result["text_logits"] = np.asarray(classifier.predict(json.load(open(texts)), verbose=0))
    from_hf = keras_hub.models.BertBackbone.from_preset(hf)
    result["hf_sequence"] = np.asarray(from_hf(flat)["sequence_output"])
    assert not [m for m in sys.modules if m.split(".")[0] == "kerasbert"], "kerasbert imported"
    np.savez(out, **result)
""")


def test_the_preset_and_hf_folder_load_where_kerasbert_is_never_imported(runs, tmp_path):
    r = runs["sst2"]
    np.savez(tmp_path / "in.npz", **r.flat)
    (tmp_path / "texts.json").write_text(json.dumps(TEXTS))
    (tmp_path / "elsewhere.py").write_text(ELSEWHERE)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # kerasbert not on it
    result = subprocess.run(
        [sys.executable, str(tmp_path / "elsewhere.py"), r.kh, r.hf, str(tmp_path / "in.npz"),
         str(tmp_path / "texts.json"), str(tmp_path / "out.npz")],
        capture_output=True, text=True, timeout=300, cwd=str(tmp_path),
        env={**env, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""})
    assert result.returncode == 0, result.stderr[-3000:]
    out = np.load(tmp_path / "out.npz")
    np.testing.assert_allclose(out["sequence"], r.tanh_sequence, atol=ATOL)
    np.testing.assert_allclose(out["text_logits"], _text_logits(r, False), atol=ATOL)
    real = _real_positions(r)
    np.testing.assert_allclose(out["hf_sequence"][real], r.tanh_sequence[real], atol=ATOL)


def test_the_hf_folder_has_a_model_card(runs):
    r = runs["sst2"]
    card = open(os.path.join(r.hf, "README.md"), encoding="utf-8").read()
    metrics = json.load(open(os.path.join(r.run_dir, "metrics.json")))
    assert "# sst2 fine-tuned with kerasbert" in card
    assert "- **Labels**: 0, 1" in card
    assert "bundled sst2 sample" in card
    assert "transformers.BertForSequenceClassification.from_pretrained" in card
    assert "- learning_rate: " in card and "- seed: 1" in card
    for name, value in metrics.items():
        if isinstance(value, float):
            assert f"| {name} | {value:.4f} |" in card
    command = card.split("```\n")[1].strip()
    assert command.startswith("kerasbert --task=sst2 --output_dir=") and "--seed=1" in command
    assert "--model_size=2/32/2" in command and "--do_eval=false" in command


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.large) if n not in FAST
                                  else n for n in ("swag", "conll", "squad", "sst2_raw_cls")])
def test_heads_keras_hub_has_no_task_for_give_a_backbone_preset_and_say_so(runs, name):
    r = runs[name]
    assert not os.path.exists(os.path.join(r.kh, "task.json"))
    assert any("the preset holds the encoder and tokenizer only" in line for line in r.kh_lines)


def test_exact_keras_hub_writes_kerasbert_bert_encoder_and_says_it_needs_kerasbert(runs, tmp_path):
    import keras_hub

    r = runs["sst2"]
    lines = checkpoint.export_checkpoint(r.run_dir, str(tmp_path / "exact"), "keras_hub",
                                         exact_keras_hub=True)
    config = json.load(open(tmp_path / "exact" / "config.json"))
    assert config["registered_name"] == "kerasbert>BertEncoder"
    assert any("import kerasbert.model.backbone" in line for line in lines)
    backbone = keras_hub.models.BertBackbone.from_preset(str(tmp_path / "exact"))
    out = backbone(r.flat)
    np.testing.assert_allclose(out["sequence_output"], r.sequence, atol=ATOL)


# --- Errors: one line, exit 2, nothing written ---------------------------------------------

def _cli(*args):
    return subprocess.run([sys.executable, "-m", "kerasbert.export.checkpoint", *args],
                          capture_output=True, text=True,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3",
                               "PYTHONPATH": os.path.dirname(HERE)})


def test_bad_input_is_one_line_exit_2_and_nothing_written(runs, tmp_path, capsys):
    run_dir = runs["sst2"].run_dir
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    (unfinished / "run_config.json").write_text(
        open(os.path.join(run_dir, "run_config.json")).read())
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "x").write_text("")
    cases = [
        ([f"--run_dir={tmp_path / 'nope'}", "--format=huggingface"], "no such folder"),
        ([f"--run_dir={unfinished}", "--format=huggingface"], "is not a finished run"),
        ([f"--run_dir={run_dir}", "--format=onnx"], "--format=onnx: unknown format"),
    ]
    for args, message in cases:  # in process: a fresh interpreter per case costs ~7 s
        out = tmp_path / "out"
        assert checkpoint.main([*args, f"--output={out}"]) == 2
        captured = capsys.readouterr()
        assert captured.err.count("\n") == 1 and message in captured.err, captured.err
        assert captured.err.startswith("kerasbert: error: ") and not captured.out
        assert not out.exists()
    result = _cli(f"--run_dir={run_dir}", "--format=keras_hub", f"--output={taken}")
    assert result.returncode == 2
    assert result.stderr == f"kerasbert: error: --output={taken}: exists and is not empty; " \
                            "pick a new folder\n"
    assert os.listdir(taken) == ["x"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_the_cli_exports_into_an_empty_folder_and_says_what_it_wrote(runs, tmp_path):
    out = tmp_path / "empty"
    out.mkdir()
    result = _cli(f"--run_dir={runs['conll'].run_dir}", "--format=huggingface",
                  f"--output={out}")
    assert result.returncode == 0, result.stderr
    assert "as HuggingFace BertForTokenClassification" in result.stdout
    assert (out / "model.safetensors").is_file()
    assert json.load(open(out / "kerasbert.json"))["task"] == "conll2003"


# --- transformers (torch interpreter) ------------------------------------------------------

TORCH_SCRIPT = textwrap.dedent(r"""
    import json, sys
    import numpy as np, torch, transformers
    jobs = json.load(open(sys.argv[1]))
    for job in jobs:
        inputs = {k: torch.tensor(np.load(job["inputs"])[k], dtype=torch.long)
                  for k in ("token_ids", "segment_ids", "padding_mask")}
        args = dict(input_ids=inputs["token_ids"], token_type_ids=inputs["segment_ids"],
                    attention_mask=inputs["padding_mask"])
        flat = {k: v.reshape(-1, v.shape[-1]) for k, v in args.items()}
        out = {}
        with torch.no_grad():
            model = transformers.BertModel.from_pretrained(job["folder"]).eval()
            encoded = model(**flat)
            out["sequence"] = encoded.last_hidden_state.numpy()
            out["pooled"] = encoded.pooler_output.numpy()
            if job["hf_class"]:
                head = getattr(transformers, job["hf_class"]).from_pretrained(job["folder"]).eval()
                result = head(**args)
                if job["hf_class"] == "BertForQuestionAnswering":
                    out["logits"] = torch.stack([result.start_logits, result.end_logits], -1).numpy()
                else:
                    out["logits"] = result.logits.numpy()
        np.savez(job["output"], **out)
""")


@pytest.mark.large
def test_transformers_loads_the_folder_and_agrees(runs, tmp_path):
    if not (TORCH_PYTHON and os.path.isfile(TORCH_PYTHON)):
        pytest.skip("no torch interpreter: set KERASBERT_TORCH_PYTHON to one with torch and "
                    "transformers")
    jobs = []
    for name in RUNS:
        r = runs[name]
        np.savez(tmp_path / f"{name}_in.npz", **r.inputs)
        jobs.append({"folder": r.hf, "hf_class": r.hf_class,
                     "inputs": str(tmp_path / f"{name}_in.npz"),
                     "output": str(tmp_path / f"{name}_out.npz")})
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    (tmp_path / "run.py").write_text(TORCH_SCRIPT)
    result = subprocess.run([TORCH_PYTHON, str(tmp_path / "run.py"), str(tmp_path / "jobs.json")],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    for name in RUNS:
        r = runs[name]
        out = np.load(tmp_path / f"{name}_out.npz")
        real = _real_positions(r)
        np.testing.assert_allclose(out["sequence"][real], r.sequence[real], atol=1e-4)
        np.testing.assert_allclose(out["pooled"], r.pooled, atol=1e-4)
        if r.hf_class is None:
            continue
        if r.hf_class in ("BertForTokenClassification", "BertForQuestionAnswering"):
            np.testing.assert_allclose(out["logits"][real], r.logits[real], atol=1e-4)
        else:
            np.testing.assert_allclose(out["logits"], r.logits, atol=1e-4, err_msg=name)
