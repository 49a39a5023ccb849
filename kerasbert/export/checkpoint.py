"""A fine-tuned run out to the ecosystem: a keras-hub preset or a HuggingFace folder.

    python -m kerasbert.export.checkpoint --run_dir=runs/sst2 --format=keras_hub --output=sst2-kh
    python -m kerasbert.export.checkpoint --run_dir=runs/sst2 --format=huggingface --output=sst2-hf

    <run_dir>/ run_config.json, encoder/, model.weights.h5, metrics.json (a finished run)
        → the task model, rebuilt as kerasbert.run built it (kerasbert/model/builder.py)
        → <output>/   written as <parent>/.<name>.tmp-*, renamed when complete

keras_hub: `save_to_preset` of the encoder and its WordPiece vocabulary
(`keras_hub.models.BertBackbone.from_preset(output)` loads it, in a process that never
imports kerasbert). A head that is keras-hub's BertTextClassifier (cls_linear on the pooled
[CLS], a classification or regression task) makes it a task preset:
`keras_hub.models.BertTextClassifier.from_preset(output)` loads it and predicts on raw text.
The preset names keras-hub's own classes (plain BertBackbone), whose encoder hard-codes the
tanh GELU and epsilon 1e-12: an encoder that computes anything else (BERT's exact erf GELU,
another epsilon) then differs slightly in keras-hub (one line says so), and a causal
encoder is refused. `export_checkpoint(..., exact_keras_hub=True)` saves kerasbert's
BertEncoder instead, which computes exactly the run's encoder but loads only after
`import kerasbert.model.backbone` (it registers the class, and the tokenizer and
classifier classes keras-hub looks up for it).

huggingface: `config.json` (the encoder's real hidden_act and layer_norm_eps),
`model.safetensors`, `vocab.txt`, `tokenizer_config.json`, and the model card `README.md`
(task, labels, data, recipe, dev metrics, the command; kerasbert/export/model_card.py);
the BertModel weights always, and under HF's names the head where one of HF's BERT heads
computes the same:
    cls_linear on the pooler, classification / regression → BertForSequenceClassification
    cls_linear on the pooler, multiple choice              → BertForMultipleChoice
    tagger (linear on every token)                         → BertForTokenClassification
    span (start / end logits)                              → BertForQuestionAnswering
Any other head: BertModel only (one line says so). The weights are the exact inverse of
what `--init_checkpoint` reads from an HF folder (kerasbert/model/encoders.py).

Both formats also hold `kerasbert.json`: the run, the task, its labels and max_seq_length.
"""

import copy
import dataclasses
import json
import os
import secrets
import shutil
import sys

import numpy as np

from kerasbert import plugins, run_folder
from kerasbert.config import configure_task
from kerasbert.errors import InputError, at
from kerasbert.export import model_card
from kerasbert.export.saved_model import export_identity
from kerasbert.heads.classifier import ClsClassifier
from kerasbert.heads.span import SpanHead
from kerasbert.heads.tagger import TokenTagger
from kerasbert.io_utils import atomic_write_json, check_can_create
from kerasbert.model import encoders
from kerasbert.model.backbone import (
    BertEncoder,
    BertEncoderTextClassifier,
    BertEncoderTextClassifierPreprocessor,
    BertEncoderTokenizer,
)
from kerasbert.model.builder import rebuild_trained_model
from kerasbert.tasks import base

FORMATS = ("keras_hub", "huggingface")
METADATA = "kerasbert.json"
HF_WEIGHTS = "model.safetensors"
# What keras-hub's stock BertBackbone computes (TransformerEncoder's defaults).
STOCK_ACTIVATIONS = ("gelu_new", "gelu_pytorch_tanh")
STOCK_EPSILON = 1e-12


# --- The finished run --------------------------------------------------------------------

@dataclasses.dataclass
class TrainedRun:
    config: object  # kerasbert.config.RunConfig
    task: object
    model: object  # kerasbert.model.task_model.TaskModel
    tokenizer: object  # kerasbert.data.tokenization.WordPieceTokenizer
    run_dir: str


def load_trained_run(run_dir, registry=None):
    """The task model of a finished run with its trained weights (any kind: unlike the
    SavedModel export, no serving signature is needed)."""
    if not os.path.isdir(run_dir):
        raise InputError(f"--run_dir={run_dir}: no such folder")
    if not run_folder.is_finished(run_dir):
        raise InputError(f"{at(run_folder.path(run_dir, run_folder.METRICS))}missing: "
                         f"--run_dir={run_dir} is not a finished run "
                         f"({run_folder.status(run_dir)})")
    config = run_folder.read_run_config(run_dir)
    weights = run_folder.path(run_dir, run_folder.MODEL_WEIGHTS)
    if not os.path.isfile(weights):
        raise InputError(f"{at(weights)}missing: the run kept no trained weights")
    registry = registry or plugins.registry()
    task = copy.copy(registry.task(config.task))
    configure_task(task, config)
    model, tokenizer = rebuild_trained_model(run_dir, config, task, registry)
    return TrainedRun(config, task, model, tokenizer, run_dir)


# --- Which HF / keras-hub head computes what the run's head computes ---------------------

@dataclasses.dataclass(frozen=True)
class HeadMatch:
    hf_class: str | None  # e.g. "BertForSequenceClassification"; None: BertModel only
    hf_prefix: str  # HF's name of the head's Linear layer ("classifier", "qa_outputs")
    keras_hub_task: bool  # keras_hub.models.BertTextClassifier computes it
    note: str  # why there is no match ("" when there is)


def match_head(run):
    head, kind = run.model.head, run.task.kind
    name = run.config.head or run.task.default_head
    if isinstance(head, ClsClassifier) and head.use_pooler:
        if kind in (base.CLASSIFICATION, base.REGRESSION):
            return HeadMatch("BertForSequenceClassification", "classifier", True, "")
        if kind == base.MULTIPLE_CHOICE:
            return HeadMatch("BertForMultipleChoice", "classifier", False, "")
    if isinstance(head, ClsClassifier) and not head.use_pooler:
        why = ("reads the raw [CLS] state (--cls_linear_use_pooler=false), HF's and "
               "keras-hub's heads read the pooler")
    elif isinstance(head, TokenTagger) and kind == base.TAGGING:
        return HeadMatch("BertForTokenClassification", "classifier", False, "")
    elif isinstance(head, SpanHead) and kind == base.SPAN:
        return HeadMatch("BertForQuestionAnswering", "qa_outputs", False, "")
    else:
        why = "has no HuggingFace or keras-hub equivalent"
    return HeadMatch(None, "", False, f"the {name} head {why}")


def _head_dense(run):
    """The head's one Linear layer: (weight [out, in] as HF stores it, bias)."""
    kernel, bias = (np.asarray(w, np.float32) for w in run.model.head.output_dense.get_weights())
    return np.ascontiguousarray(kernel.T), np.ascontiguousarray(bias)


# --- HuggingFace -------------------------------------------------------------------------

def write_huggingface(run, folder, match):
    from safetensors.numpy import save_file

    backbone = run.model.backbone
    config = encoders.hf_config(backbone)  # a causal encoder: InputError, before any file
    prefix = "bert." if match.hf_class else ""  # BertForX nests BertModel under "bert."
    tensors = encoders.hf_tensors(backbone, prefix)
    config["architectures"] = [match.hf_class or "BertModel"]
    vocab = run.tokenizer.vocab
    config["pad_token_id"] = vocab.index("[PAD]") if "[PAD]" in vocab else 0
    config["torch_dtype"] = "float32"
    if match.hf_class:
        weight, bias = _head_dense(run)
        tensors[f"{match.hf_prefix}.weight"], tensors[f"{match.hf_prefix}.bias"] = weight, bias
        config.update(_hf_head_config(run, match, num_outputs=len(bias)))
    save_file(tensors, os.path.join(folder, HF_WEIGHTS), metadata={"format": "pt"})
    model_card.write(folder, run.run_dir, run.config, run.task, match.hf_class or "BertModel")
    with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2, sort_keys=True)
    shutil.copyfile(run.tokenizer.vocab_file, os.path.join(folder, encoders.VOCAB))
    with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"tokenizer_class": "BertTokenizer",
                   "do_lower_case": run.tokenizer.do_lower_case,
                   "model_max_length": backbone.max_sequence_length,
                   "unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
                   "cls_token": "[CLS]", "mask_token": "[MASK]"}, f, indent=2)


def _hf_head_config(run, match, num_outputs):
    config = {}
    dropout = getattr(run.model.head, "dropout", None)
    if match.hf_class in ("BertForSequenceClassification", "BertForTokenClassification",
                          "BertForMultipleChoice"):
        # HF's heads use classifier_dropout, or hidden_dropout_prob when it is None.
        config["classifier_dropout"] = (None if dropout is None
                                        or dropout == run.model.backbone.dropout else dropout)
    if match.hf_class == "BertForSequenceClassification":
        config["problem_type"] = ("regression" if run.task.kind == base.REGRESSION
                                  else "single_label_classification")
    if match.hf_class in ("BertForSequenceClassification", "BertForTokenClassification"):
        labels = list(run.task.label_list or [])
        if len(labels) != num_outputs:
            labels = [f"LABEL_{i}" for i in range(num_outputs)]
        config["id2label"] = {str(i): str(label) for i, label in enumerate(labels)}
        config["label2id"] = {str(label): i for i, label in enumerate(labels)}
    return config


# --- keras-hub ---------------------------------------------------------------------------

def is_stock_keras_hub(backbone):
    """Whether keras-hub's own BertBackbone computes exactly what `backbone` computes."""
    return (getattr(backbone, "hidden_act", STOCK_ACTIVATIONS[0]) in STOCK_ACTIVATIONS
            and getattr(backbone, "layer_norm_eps", STOCK_EPSILON) == STOCK_EPSILON
            and not getattr(backbone, "causal", False))


def keras_hub_backbone(backbone, exact=False):
    """The backbone the preset names: plain BertBackbone (loads without kerasbert), or
    kerasbert's BertEncoder itself where `exact` asks for the run's own computation."""
    import keras_hub

    if exact and not is_stock_keras_hub(backbone):
        return backbone
    if getattr(backbone, "causal", False):
        raise InputError("--format=keras_hub: the encoder is causal (left-to-right), which "
                         "keras-hub's BertBackbone cannot compute (exact_keras_hub=True saves "
                         "kerasbert's BertEncoder)")
    config = {k: v for k, v in backbone.get_config().items()
              if k not in ("hidden_act", "layer_norm_eps", "causal")}
    plain = keras_hub.models.BertBackbone.from_config(config)
    plain.set_weights(backbone.get_weights())
    return plain


def write_keras_hub(run, folder, match, exact=False):
    import keras_hub

    backbone = keras_hub_backbone(run.model.backbone, exact)
    if isinstance(backbone, BertEncoder):  # keras-hub finds these by their backbone_cls
        classes = (BertEncoderTokenizer, BertEncoderTextClassifierPreprocessor,
                   BertEncoderTextClassifier)
    else:
        classes = (keras_hub.models.BertTokenizer,
                   keras_hub.models.BertTextClassifierPreprocessor,
                   keras_hub.models.BertTextClassifier)
    tokenizer_cls, preprocessor_cls, classifier_cls = classes
    # BERT's uncased text: lower-cased AND accents stripped (keras-hub's default keeps
    # accents, which turns "amélie" into [UNK] in an uncased vocabulary)
    tokenizer = tokenizer_cls(vocabulary=run.tokenizer.vocab_file,
                              lowercase=run.tokenizer.do_lower_case,
                              strip_accents=run.tokenizer.do_lower_case)
    if match.keras_hub_task:
        preprocessor = preprocessor_cls(tokenizer, sequence_length=run.config.max_seq_length)
        classifier = classifier_cls(
            backbone, num_classes=run.model.head.num_outputs, preprocessor=preprocessor,
            dropout=run.model.head.dropout)
        classifier.output_dense.set_weights(run.model.head.output_dense.get_weights())
        classifier.save_to_preset(folder)
    else:
        backbone.save_to_preset(folder)
        tokenizer.save_to_preset(folder)
    return backbone


# --- Writing the folder ------------------------------------------------------------------

def check_output(output):
    """The refusals of `export_checkpoint` for --output, touching nothing."""
    if os.path.isdir(output) and os.listdir(output):
        raise InputError(f"--output={output}: exists and is not empty; pick a new folder")
    if os.path.exists(output) and not os.path.isdir(output):
        raise InputError(f"--output={output}: exists and is not a folder")
    check_can_create(output, "--output")


def export_checkpoint(run_dir, output, fmt, registry=None, exact_keras_hub=False):
    """Writes the finished run `run_dir` as `fmt` into `output`; returns the lines that say
    what went where. keras_hub: keras-hub's own BertBackbone, or kerasbert's BertEncoder with
    `exact_keras_hub`. Every input problem is an InputError before anything is written."""
    if fmt not in FORMATS:
        raise InputError(f"--format={fmt}: unknown format; choose one of {', '.join(FORMATS)}")
    check_output(output)
    run = load_trained_run(run_dir, registry)
    match = match_head(run)
    if fmt == "huggingface":
        encoders.hf_config(run.model.backbone)  # a causal encoder fails before any writing
    elif not exact_keras_hub and getattr(run.model.backbone, "causal", False):
        keras_hub_backbone(run.model.backbone)  # its InputError, before any writing
    output = os.path.abspath(output)
    parent = os.path.dirname(output)
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, f".{os.path.basename(output)}.tmp-{secrets.token_hex(4)}")
    os.mkdir(tmp)
    try:
        lines = []
        if fmt == "huggingface":
            write_huggingface(run, tmp, match)
            lines.append(f"HuggingFace {match.hf_class or 'BertModel'} (transformers."
                         f"{match.hf_class or 'BertModel'}.from_pretrained)")
            if match.note:
                lines.append(f"{match.note}: the folder holds BertModel only")
        else:
            backbone = write_keras_hub(run, tmp, match, exact_keras_hub)
            what = ("keras_hub.models.BertTextClassifier.from_preset" if match.keras_hub_task
                    else "keras_hub.models.BertBackbone.from_preset")
            lines.append(f"keras-hub preset ({what})")
            if not match.keras_hub_task:
                lines.append(f"{match.note or 'keras-hub has no ' + run.task.kind + ' task'}"
                             ": the preset holds the encoder and tokenizer only")
            if backbone is run.model.backbone:
                lines.append(f"exact_keras_hub: the encoder computes hidden_act="
                             f"{backbone.hidden_act}, layer_norm_eps={backbone.layer_norm_eps}"
                             f"{', causal' if backbone.causal else ''}, which keras-hub's "
                             "BertBackbone does not: the preset names kerasbert's "
                             "BertEncoder; load it after `import kerasbert.model.backbone`")
            elif not is_stock_keras_hub(run.model.backbone):
                lines.append("keras-hub's BertBackbone computes the tanh GELU and epsilon "
                             f"1e-12, not the run's hidden_act={run.model.backbone.hidden_act}"
                             f", layer_norm_eps={run.model.backbone.layer_norm_eps}: outputs "
                             "differ slightly (exact_keras_hub=True: exact, needs kerasbert)")
        atomic_write_json(os.path.join(tmp, METADATA), {
            **export_identity(run_dir), "format": fmt, "task": run.task.name,
            "kind": run.task.kind, "head": run.config.head or run.task.default_head,
            "label_list": list(run.task.label_list) if run.task.label_list else None,
            "max_seq_length": run.config.max_seq_length,
            "do_lower_case": run.tokenizer.do_lower_case,
            "huggingface_class": (match.hf_class or "BertModel") if fmt == "huggingface"
            else None})
        if os.path.isdir(output):
            os.rmdir(output)  # empty (checked above); rename(2) cannot replace it otherwise
        os.rename(tmp, output)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return lines


# --- CLI ---------------------------------------------------------------------------------

def main(argv=None):
    """`python -m kerasbert.export.checkpoint --run_dir=RUN --format=F --output=DIR` (argv:
    the arguments after the program's name); the exit status."""
    from absl import flags

    from kerasbert import command

    fv = flags.FlagValues()
    flags.DEFINE_string("run_dir", None, "The --output_dir of a finished kerasbert run.",
                        flag_values=fv)
    flags.DEFINE_string("format", None, "keras_hub or huggingface.", flag_values=fv)
    flags.DEFINE_string("output", None, "The folder to write (new, or empty).", flag_values=fv)
    flags.DEFINE_boolean("exact_keras_hub", False, "keras_hub: save kerasbert's BertEncoder, "
                         "which computes the run's own GELU and epsilon but loads only after "
                         "`import kerasbert.model.backbone` (default: keras-hub's own "
                         "BertBackbone, loadable without kerasbert).", flag_values=fv)
    flags.mark_flags_as_required(["run_dir", "format", "output"], flag_values=fv)

    def export(args):
        if len(args) > 1:
            raise InputError(f"unexpected arguments: {' '.join(args[1:])}")
        lines = export_checkpoint(fv.run_dir, fv.output, fv.format,
                                  exact_keras_hub=fv.exact_keras_hub)
        print(f"kerasbert: exported {fv.run_dir} to {fv.output} as {lines[0]}", flush=True)
        for line in lines[1:]:
            print(f"kerasbert: {line}", flush=True)
        return 0

    usage = ("usage: python -m kerasbert.export.checkpoint --run_dir=RUN "
             "--format=keras_hub|huggingface --output=DIR\nExport a finished kerasbert run as "
             "a keras-hub preset or a HuggingFace folder.\n\n" + command.flags_usage(fv))
    return command.run(export, fv, usage=usage,
                       argv=["kerasbert.export.checkpoint", *(sys.argv[1:] if argv is None
                                                              else argv)])


if __name__ == "__main__":
    sys.exit(main())
