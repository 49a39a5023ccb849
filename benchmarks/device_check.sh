#!/usr/bin/env bash
# The GPU check (benchmarks/device_check.py): on one GPU machine, in about 8 minutes,
#   benchmarks/device_check.sh [--output_dir=runs/device_check] [--peak_tflops=989]
# and on the CPU with a tiny model, as CI runs it:
#   benchmarks/device_check.sh --smoke
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-python3}" -m benchmarks.device_check "$@"
