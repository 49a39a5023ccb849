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


@hookimpl
def kerasbert_heads():
    return [
        HeadSpec(
            name="cls_linear",
            kinds=(base.CLASSIFICATION, base.REGRESSION, base.MULTIPLE_CHOICE),
            build=_cls_linear,
            description="Linear layer on the [CLS] representation (BERT's classifier).",
        ),
    ]


@hookimpl
def kerasbert_define_flags(flag_values):
    from absl import flags

    flags.DEFINE_boolean(
        "cls_linear_use_pooler", True,
        "Whether the cls_linear head reads the pre-trained tanh pooler output (as BERT's "
        "run_classifier.py does) rather than the raw final hidden state of [CLS].",
        flag_values=flag_values)
