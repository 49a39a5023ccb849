"""The hint a float32 CPU run prints where mixed_bfloat16 would be faster."""

from kerasbert.training import precision

AMX = "processor\t: 0\nflags\t\t: fpu sse2 avx512f avx512_bf16 amx_bf16 amx_tile\n"
NO_AMX = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512_bf16\n"


def test_hint_only_for_float32_on_a_cpu_with_amx_bf16():
    line = precision.bf16_hint("none", False, AMX)
    assert "--mixed_precision=mixed_bfloat16" in line
    assert "speed-and-memory.md" in line
    assert precision.bf16_hint("none", False, NO_AMX) is None  # AVX512_BF16 alone: no AMX
    assert precision.bf16_hint("mixed_bfloat16", False, AMX) is None
    assert precision.bf16_hint("none", True, AMX) is None  # a GPU run
    assert precision.bf16_hint("none", False, "no flags line") is None
