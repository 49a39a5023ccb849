import os

# As kerasbert's own tests/conftest.py: quiet TF's start-up chatter, stay on the CPU.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
