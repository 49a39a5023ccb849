"""Pre-training from raw text: BERT's data creation, the MLM+NSP / MLM / LTR objectives
and their training loop (BERT section 3.1 and the ablations of section 5.1)."""
