"""kerasbert.host: the CPU's model and ISA flags, read once for the bf16 hint and the
benchmarks' host records."""

from kerasbert import host

TWO_CPUS = ("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) "
            "Processor\nflags\t\t: fpu sse2 avx2 avx512f amx_bf16\n\n"
            "processor\t: 1\nmodel name\t: another\nflags\t\t: fpu\n")


def test_the_first_processor_s_model_and_flags():
    assert host.cpu(TWO_CPUS) == {"model": "Intel(R) Xeon(R) Processor",
                                  "flags": {"fpu", "sse2", "avx2", "avx512f", "amx_bf16"}}


def test_no_cpuinfo_gives_no_flags_and_a_model_name_all_the_same():
    found = host.cpu("")
    assert found["flags"] == set()
    assert isinstance(found["model"], str) and found["model"]


def test_this_machine_s_reading_is_the_file_s():
    assert host.cpu() == host.cpu(host.read_cpuinfo())


def test_usable_cores_is_the_affinity_not_the_machine_s_count(monkeypatch):
    import os

    from kerasbert import host

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    assert host.usable_cores() == 1  # a container limited to one core of 64
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    assert host.usable_cores() == 64  # no affinity call (macOS): the machine's count
