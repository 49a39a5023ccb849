"""A kerasbert plugin that adds a task of a kind kerasbert does not know: multi-label.

Registered through the `kerasbert.plugins` entry point in setup.cfg; kerasbert itself is
not edited. Three things, each through its own hook (kerasbert/hookspecs.py):

    kind  multi_label         logits [B, K], labels float32 multi-hot [B, K], mean sigmoid
                              cross-entropy over the K labels (kerasbert_multilabel/kind.py)
    head  multi_label_linear  mean pooling (or [CLS]) + dropout + dense K (head.py)
    task  topic_tags          a TSV of `id, text, labels` with a bundled sample (task.py)

The modules are imported only when a hook is called, so `--help` stays fast.
"""

from kerasbert.hookspecs import HeadSpec, hookimpl

KIND = "multi_label"
HEAD = "multi_label_linear"
POOLINGS = ("mean", "cls", "pooler")


@hookimpl
def kerasbert_kinds():
    from kerasbert_multilabel.kind import MultiLabelKind

    return [MultiLabelKind()]


def _build_head(context):
    from kerasbert_multilabel.head import MultiLabelLinear

    dropout = context.options.get(f"{HEAD}_dropout")
    return MultiLabelLinear(context.num_outputs,
                            dropout=context.dropout if dropout is None else dropout,
                            pooling=context.options.get(f"{HEAD}_pooling") or "mean",
                            seed=context.seed, name=HEAD)


@hookimpl
def kerasbert_heads():
    return [HeadSpec(name=HEAD, kinds=(KIND,), build=_build_head,
                     description="Masked mean of the final hidden states (or [CLS]) + "
                                 "dropout + one logit per label (multi-label tasks).")]


@hookimpl
def kerasbert_tasks():
    from kerasbert_multilabel.task import TASK

    return [TASK]


@hookimpl
def kerasbert_define_flags(flag_values):
    from absl import flags

    flags.DEFINE_enum(f"{HEAD}_pooling", "mean", list(POOLINGS),
                      "What the multi_label_linear head reads: the mean of the final hidden "
                      "states over the real tokens, the raw [CLS] state, or BERT's tanh pooler.",
                      flag_values=flag_values)
    flags.DEFINE_float(f"{HEAD}_dropout", None,
                       "Dropout before the multi_label_linear head's dense layer. Default: "
                       "the encoder's dropout.", flag_values=flag_values)
