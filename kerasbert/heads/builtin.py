"""Registers kerasbert's own heads through the same hook third-party plugins use."""

from kerasbert.hookspecs import HeadSpec, hookimpl
from kerasbert.tasks import base


def _cls_linear(context):
    from kerasbert.heads.classifier import ClsClassifier

    return ClsClassifier(
        context.num_outputs,
        dropout=context.dropout,
        use_pooler=context.options.get("cls_linear_use_pooler", True),
        seed=context.seed,
        name="cls_linear",
    )


def _tagger(context):
    from kerasbert.heads.tagger import build_tagger

    return build_tagger(context)


def _feature_bilstm(context):
    from kerasbert.heads.feature_bilstm import build_feature_bilstm

    return build_feature_bilstm(context)


def _span(context):
    from kerasbert.heads.span import build_span_head

    return build_span_head(context)


def _bimpm(context):
    from kerasbert.heads.bimpm import build_bimpm

    return build_bimpm(context)


def _bimpm_no_context(context):
    from kerasbert.heads.bimpm import build_bimpm_no_context

    return build_bimpm_no_context(context)


def _sim_transformer(context):
    from kerasbert.heads.sim_transformer import build_sim_transformer

    return build_sim_transformer(context)


def _bilstm_tagger(context):
    from kerasbert.heads.bilstm_tagger import build_bilstm_tagger

    return build_bilstm_tagger(context)


def _sequence_classifier(context):
    from kerasbert.heads.sequence_classifier import build_sequence_classifier

    return build_sequence_classifier(context)


@hookimpl
def kerasbert_heads():
    return [
        HeadSpec(
            name="cls_linear",
            kinds=(base.CLASSIFICATION, base.REGRESSION, base.MULTIPLE_CHOICE),
            build=_cls_linear,
            description="Linear layer on the [CLS] representation (BERT's classifier).",
        ),
        HeadSpec(
            name="span",
            kinds=(base.SPAN,),
            build=_span,
            description="Start and end vectors S, E over the final hidden states (SQuAD).",
        ),
        HeadSpec(
            name="tagger",
            kinds=(base.TAGGING,),
            build=_tagger,
            description="Token classifier on the final hidden states (fine-tuning NER).",
        ),
        HeadSpec(
            name="feature_bilstm",
            kinds=(base.TAGGING,),
            build=_feature_bilstm,
            description="Frozen encoder's layers -> 2-layer BiLSTM -> classifier (BERT 5.3).",
        ),
        HeadSpec(
            name="bimpm",
            kinds=(base.CLASSIFICATION, base.REGRESSION),
            build=_bimpm,
            description="BIMPM on the A/B token states: context BiLSTM, multi-perspective "
                        "matching, aggregation BiLSTM (Wang et al. 2019).",
        ),
        HeadSpec(
            name="bimpm_no_context",
            kinds=(base.CLASSIFICATION, base.REGRESSION),
            build=_bimpm_no_context,
            description="BIMPM without its context BiLSTM: matching on BERT's states.",
        ),
        HeadSpec(
            name="sim_transformer",
            kinds=(base.CLASSIFICATION, base.REGRESSION),
            build=_sim_transformer,
            description="BIMPM with transformer layers instead of BiLSTMs (Sim-Transformer).",
        ),
        HeadSpec(
            name="bilstm_tagger",
            kinds=(base.TAGGING,),
            build=_bilstm_tagger,
            description="BiLSTM over the final hidden states, then a token classifier.",
        ),
        HeadSpec(
            name="sequence_classifier",
            kinds=(base.CLASSIFICATION, base.REGRESSION),
            build=_sequence_classifier,
            description="BiLSTM or Kim-CNN over the token states, max-pooled, then a "
                        "classifier.",
        ),
    ]


@hookimpl
def kerasbert_define_flags(flag_values):
    from absl import flags

    from kerasbert.heads import (bilstm_tagger, bimpm, feature_bilstm, sequence_classifier,
                                 sim_transformer)

    for module in (feature_bilstm, bimpm, sim_transformer, bilstm_tagger, sequence_classifier):
        module.define_flags(flag_values)
    flags.DEFINE_boolean(
        "cls_linear_use_pooler", True,
        "Whether the cls_linear head reads the pre-trained tanh pooler output (as BERT's "
        "run_classifier.py does) rather than the raw final hidden state of [CLS].",
        flag_values=flag_values)
