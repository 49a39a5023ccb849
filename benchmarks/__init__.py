"""kerasbert's benchmarks: speed, memory, parity with HuggingFace, lockstep, profiles and the
GPU check. Each is a module run from the repository root, `python -m benchmarks.<name>`,
against the installed kerasbert (benchmarks/README.md says what each measures and writes).

This file imports nothing: the PyTorch-side modules (parity_hf, lockstep_hf,
bench_training_torch) run in an interpreter that has torch but not kerasbert.
"""
