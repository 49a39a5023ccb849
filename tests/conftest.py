import os

# Quiet TF's C++ start-up chatter in test logs; keep the tests on the CPU.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
