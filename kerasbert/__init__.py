"""kerasbert: fine-tune and study BERT-family encoders on TensorFlow / Keras 3.

Started as a command (`python -m kerasbert.<module>`, a `kerasbert*` console script),
this runs before the command's own imports, so TensorFlow's C++ start-up lines are kept
off stderr before TensorFlow first loads (kerasbert/startup.py); imported by a program,
it changes nothing.
"""

from kerasbert import startup as _startup

_startup.quiet_tensorflow()
