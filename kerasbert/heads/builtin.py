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
    ]


@hookimpl
def kerasbert_define_flags(flag_values):
    from absl import flags

    from kerasbert.heads import feature_bilstm

    feature_bilstm.define_flags(flag_values)
    flags.DEFINE_boolean(
        "cls_linear_use_pooler", True,
        "Whether the cls_linear head reads the pre-trained tanh pooler output (as BERT's "
        "run_classifier.py does) rather than the raw final hidden state of [CLS].",
        flag_values=flag_values)
