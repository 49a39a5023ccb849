"""Data tools, run from the repository root: `python -m tools.split_squad`, and the bundled
samples' generators in tools/samples/ (`python -m tools.samples.make_glue_samples`). They
import only the installed kerasbert."""
