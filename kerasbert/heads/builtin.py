"""Registers kerasbert's own heads through the same hook third-party plugins use."""

from absl import flags

from kerasbert.heads import (
    bilstm_crf,
    bilstm_tagger,
    bimpm,
    feature_bilstm,
    ltr,
    sequence_classifier,
    sim_transformer,
    span,
    tagger,
    tagger_crf,
)
from kerasbert.heads.classifier import ClsClassifier
from kerasbert.hookspecs import HeadSpec, hookimpl
from kerasbert.kind_names import (CLASSIFICATION, MULTIPLE_CHOICE, REGRESSION, SPAN,
                                   TAGGING)


def _cls_linear(context):
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
            kinds=(CLASSIFICATION, REGRESSION, MULTIPLE_CHOICE),
            build=_cls_linear,
            description="Linear layer on the [CLS] representation (BERT's classifier).",
        ),
        HeadSpec(
            name="span",
            kinds=(SPAN,),
            build=span.build_span_head,
            description="Start and end vectors S, E over the final hidden states (SQuAD).",
        ),
        HeadSpec(
            name="tagger",
            kinds=(TAGGING,),
            build=tagger.build_tagger,
            description="Token classifier on the final hidden states (fine-tuning NER).",
        ),
        HeadSpec(
            name="feature_bilstm",
            kinds=(TAGGING,),
            build=feature_bilstm.build_feature_bilstm,
            description="Frozen encoder's layers -> 2-layer BiLSTM -> classifier (BERT 5.3).",
        ),
        HeadSpec(
            name="bimpm",
            kinds=(CLASSIFICATION, REGRESSION),
            build=bimpm.build_bimpm,
            description="BIMPM on the A/B token states: context BiLSTM, multi-perspective "
                        "matching, aggregation BiLSTM (Wang et al. 2019).",
        ),
        HeadSpec(
            name="bimpm_no_context",
            kinds=(CLASSIFICATION, REGRESSION),
            build=bimpm.build_bimpm_no_context,
            description="BIMPM without its context BiLSTM: matching on BERT's states.",
        ),
        HeadSpec(
            name="sim_transformer",
            kinds=(CLASSIFICATION, REGRESSION),
            build=sim_transformer.build_sim_transformer,
            description="BIMPM with transformer layers instead of BiLSTMs (Sim-Transformer).",
        ),
        HeadSpec(
            name="bilstm_tagger",
            kinds=(TAGGING,),
            build=bilstm_tagger.build_bilstm_tagger,
            description="BiLSTM over the final hidden states, then a token classifier.",
        ),
        HeadSpec(
            name="tagger_crf",
            kinds=(TAGGING,),
            build=tagger_crf.build_tagger_crf,
            description="Token classifier, then a linear-chain CRF (Viterbi decoding).",
        ),
        HeadSpec(
            name="bilstm_crf",
            kinds=(TAGGING,),
            build=bilstm_crf.build_bilstm_crf,
            description="BiLSTM over the encoder's layers (fine-tuned or frozen), then a "
                        "linear-chain CRF.",
        ),
        HeadSpec(
            name="sequence_classifier",
            kinds=(CLASSIFICATION, REGRESSION),
            build=sequence_classifier.build_sequence_classifier,
            description="BiLSTM or Kim-CNN over the token states, max-pooled, then a "
                        "classifier.",
        ),
        HeadSpec(
            name="last_token",
            kinds=(CLASSIFICATION, REGRESSION, MULTIPLE_CHOICE),
            build=ltr.build_last_token,
            description="Linear layer on the last real token's state (for left-to-right "
                        "encoders, whose [CLS] sees nothing else).",
        ),
        HeadSpec(
            name="top_bilstm",
            kinds=(CLASSIFICATION, REGRESSION, MULTIPLE_CHOICE, SPAN),
            build=ltr.build_top_bilstm,
            description="A random BiLSTM over the final states, then a classifier or "
                        "start/end logits (BERT 5.1's LTR + BiLSTM).",
        ),
    ]


@hookimpl
def kerasbert_define_flags(flag_values):
    for module in (feature_bilstm, bimpm, sim_transformer, bilstm_tagger, sequence_classifier,
                   ltr, tagger_crf, bilstm_crf):
        module.define_flags(flag_values)
    flags.DEFINE_boolean(
        "cls_linear_use_pooler", True,
        "Whether the cls_linear head reads the pre-trained tanh pooler output (as BERT's "
        "run_classifier.py does) rather than the raw final hidden state of [CLS].",
        flag_values=flag_values)
