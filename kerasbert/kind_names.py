"""The built-in kinds' names and the padding logit: what tasks, kinds and heads all speak.

A bottom module (it imports nothing of kerasbert), so that a head can name the kinds it
serves and pad its outputs without importing a task, and a kind without importing a head.
"""

# Task kinds: a head declares the kinds it can serve, the training loop picks the loss.
# The model's outputs and the labels of Features, per kind:
CLASSIFICATION = "classification"  # outputs logits [batch, num_labels]; labels int32 [batch]
REGRESSION = "regression"  # outputs [batch, 1]; labels float32 [batch]
MULTIPLE_CHOICE = "multiple_choice"  # inputs [batch, choices, seq]; logits [batch, choices];
#                                      labels int32 [batch]
SPAN = "span"  # outputs [batch, seq, 2] start/end logits; labels int32 [batch, 2]
TAGGING = "tagging"  # outputs [batch, seq, num_labels]; labels int32 [batch, seq], -1 = ignored

# The logit of positions that are not there (padding, and per-token outputs of batches
# trimmed shorter, padded back): exp(-1e4) underflows to 0 in float32, so no softmax or
# decoder picks it, yet it stays finite in any loss.
PADDING_LOGIT = -10000.0
