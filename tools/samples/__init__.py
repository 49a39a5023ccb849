"""The generators of kerasbert's bundled samples and sample vocabulary
(kerasbert/data/samples/, kerasbert/data/sample_vocab.txt) and of the small pre-training
corpora: `python -m tools.samples.<name>` from the repository root."""

import os

# What the generators rewrite by default: this checkout's kerasbert/data (checked in).
DATA_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))), "kerasbert", "data")
