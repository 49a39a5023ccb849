"""`bilstm_crf`: a BiLSTM over encoder layers, then a linear-chain CRF (the BiLSTM-CRF of
Lample et al. 2016 on BERT, the "BiLSTM / CRF-style" tagger Wang et al. 2019 stack).

The BiLSTM part is feature_bilstm's (heads/feature_bilstm.py: the layer choice, the scalar
mix, the BiLSTM stack and the feature cache), the CRF part `CRFTagging`'s (heads/crf.py:
what it chains over and learns from). Two ways to train it:

  fine-tuning (default)  the encoder trains with it, as bilstm_tagger's does
  --bilstm_crf_frozen    the feature-based approach (BERT section 5.3): the encoder stays
                         frozen, so `--feature_cache_dir` can compute its chosen layers once

Options (`--bilstm_crf_...`): `layers` (feature_bilstm's choices, default last),
`lstm_units` (per direction, 256), `lstm_layers` (1; the paper's feature-based head has 2),
`dropout` (default: the encoder's), `frozen`, `constraints` (iob2, none).
"""

from absl import flags

from kerasbert.heads.crf import CRFTagging, define_constraints_flag
from kerasbert.heads.feature_bilstm import LAYER_CHOICES, FeatureBiLSTM

DEFAULT_LAYERS = "last"
DEFAULT_LSTM_UNITS = 256
DEFAULT_LSTM_LAYERS = 1


class BiLSTMCRF(CRFTagging, FeatureBiLSTM):
    """Chosen encoder layers → BiLSTM(s) → Dense(K) per token → CRF."""

    layers_flag = "bilstm_crf_layers"

    def __init__(self, num_outputs, frozen=False, **kwargs):
        super().__init__(num_outputs, **kwargs)
        self.frozen = frozen
        self.trains_backbone = not frozen  # read by TaskModel and the feature cache

    def get_config(self):
        config = super().get_config()
        config.update(frozen=self.frozen)
        return config


def build_bilstm_crf(context):
    """HeadSpec factory "bilstm_crf" (kind tagging)."""
    options = context.options
    dropout = options.get("bilstm_crf_dropout")
    head = BiLSTMCRF(
        context.num_outputs, labels=context.labels,
        constraints=options.get("bilstm_crf_constraints") or "iob2",
        frozen=bool(options.get("bilstm_crf_frozen", False)),
        layers=options.get("bilstm_crf_layers") or DEFAULT_LAYERS,
        lstm_units=int(options.get("bilstm_crf_lstm_units") or DEFAULT_LSTM_UNITS),
        lstm_layers=int(options.get("bilstm_crf_lstm_layers") or DEFAULT_LSTM_LAYERS),
        dropout=context.dropout if dropout is None else float(dropout),
        seed=context.seed, name="bilstm_crf")
    head.check_depth(context.num_layers)
    return head


def define_flags(flag_values):
    """Defines the head's absl flags on `flag_values` (kerasbert_define_flags hook)."""
    flags.DEFINE_enum(
        "bilstm_crf_layers", DEFAULT_LAYERS, LAYER_CHOICES,
        "Which encoder layers feed the bilstm_crf head's BiLSTM (feature_bilstm's choices).",
        flag_values=flag_values)
    flags.DEFINE_integer(
        "bilstm_crf_lstm_units", DEFAULT_LSTM_UNITS,
        "Units per direction of each of the bilstm_crf head's BiLSTM layers.",
        lower_bound=1, flag_values=flag_values)
    flags.DEFINE_integer(
        "bilstm_crf_lstm_layers", DEFAULT_LSTM_LAYERS,
        "How many BiLSTM layers the bilstm_crf head stacks.",
        lower_bound=1, flag_values=flag_values)
    flags.DEFINE_float(
        "bilstm_crf_dropout", None,
        "Dropout rate on the bilstm_crf head's BiLSTM inputs and outputs; when unset, the "
        "encoder's own dropout rate.",
        lower_bound=0.0, upper_bound=1.0, flag_values=flag_values)
    flags.DEFINE_boolean(
        "bilstm_crf_frozen", False,
        "Keep the encoder frozen under the bilstm_crf head (the feature-based approach; "
        "--feature_cache_dir then computes the chosen layers once).",
        flag_values=flag_values)
    define_constraints_flag("bilstm_crf", flag_values)
