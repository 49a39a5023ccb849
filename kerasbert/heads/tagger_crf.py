"""`tagger_crf`: the paper's token classifier (heads/tagger.py) with a linear-chain CRF on
its logits, fine-tuning the encoder.

The linear layer's logits are the CRF's emissions; the CRF chains over every word piece of
a row and learns from each word's first piece (`CRFTagging` in kerasbert/heads/crf.py says
why, and what follows). Inference returns the Viterbi path as scores, 0 on it and
PADDING_LOGIT off it, so evaluation, prediction files and the exported tagging graph read
it as they read the plain tagger's logits. Option: `--tagger_crf_constraints` (iob2, none).
"""

from kerasbert.heads.crf import CRFTagging, define_constraints_flag
from kerasbert.heads.tagger import TokenTagger


class TaggerCRF(CRFTagging, TokenTagger):
    """Dropout → Dense(K) per token → CRF."""


def build_tagger_crf(context):
    """HeadSpec factory "tagger_crf" (kind tagging)."""
    return TaggerCRF(context.num_outputs, labels=context.labels,
                     constraints=context.options.get("tagger_crf_constraints") or "iob2",
                     dropout=context.dropout, seed=context.seed, name="tagger_crf")


def define_flags(flag_values):
    define_constraints_flag("tagger_crf", flag_values)
