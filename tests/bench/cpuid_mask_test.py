"""bench/cpuid_mask.c: a process under the mask dispatches as on a smaller host.

    cpuid_mask_test.py QUIVER LIBCPUID_MASK GOLDEN_TEST

- `quiver version` under QUIVER_CPUID_MASK=avx2 sees the host's AVX2 and FMA only and chooses the
  avx2 path by CPUID (no QUIVER_CPU_ISA), refusing a forced avx512 as on a real AVX2 host; under
  avx2_vnni (where the host has AVX-VNNI) it chooses avx2_vnni; under avx512_vnni and
  avx512_bf16 the avx512_vnni path without AMX (bf16 weights only under avx512_bf16);
- the golden tests pass on the path chosen so (the bf16 one refused: no AVX512_BF16 left);
- a real fault still kills the process with SIGSEGV, and a wrong mode is refused.
Exit code 77 (a skip for ctest) where the host cannot fault on CPUID or has no AVX-512 to hide.
"""

import os
import signal
import subprocess
import sys

SKIP = 77


def host_flags():
    for line in open("/proc/cpuinfo"):
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def run(cmd, mode, lib, extra_env=None):
    env = dict(os.environ, LD_PRELOAD=lib, QUIVER_CPUID_MASK=mode)
    env.pop("QUIVER_CPU_ISA", None)
    env.update(extra_env or {})
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)


def cpu_line(out):
    return next(l for l in out.splitlines() if l.startswith("cpu:"))


def main():
    quiver, lib, golden = sys.argv[1:4]
    flags = host_flags()
    if "cpuid_fault" not in flags:
        print("SKIP: this host cannot fault on CPUID (no cpuid_fault in /proc/cpuinfo)")
        return SKIP
    if "avx512f" not in flags or "avx2" not in flags:
        print("SKIP: no AVX-512 on this host to hide")
        return SKIP

    native = subprocess.run([quiver, "version"], capture_output=True, text=True, check=True)
    print("native:", cpu_line(native.stdout))

    masked = run([quiver, "version"], "avx2", lib)
    if masked.returncode == 2 and "cannot fault on CPUID" in masked.stderr:
        # e.g. a container whose seccomp profile refuses arch_prctl(ARCH_SET_CPUID)
        print("SKIP:", masked.stderr.strip())
        return SKIP
    assert masked.returncode == 0, masked.stderr
    line = cpu_line(masked.stdout)
    print("avx2 mask:", line)
    assert "[avx2 fma f16c]" in line, line
    assert "kernels: avx2 (" in line, line
    assert "paths here: avx2; f32 weights prefetched from " in line, line

    forced = run([quiver, "version"], "avx2", lib, {"QUIVER_CPU_ISA": "avx512"})
    line = cpu_line(forced.stdout)
    print("avx2 mask, avx512 forced:", line)
    assert "QUIVER_CPU_ISA=avx512: not a kernel path this build runs on this host" in line, line

    if "avx_vnni" in flags:
        vnni = run([quiver, "version"], "avx2_vnni", lib)
        line = cpu_line(vnni.stdout)
        print("avx2_vnni mask:", line)
        assert "[avx2 fma f16c avx_vnni]" in line, line
        assert "kernels: avx2_vnni (" in line, line

    # Every golden test on the path CPUID chose; the bf16 one must be refused (no AVX512_BF16).
    if "avx512_vnni" in flags:
        for mode, seen, kernels in [
                ("avx512_vnni", "[avx2 fma f16c avx512f avx512bw avx512vl avx512dq avx512_vnni]",
                 "kernels: avx512_vnni (f32 FMA 16 lanes, int8 vpdpbusd); paths here: avx2, "
                 "avx512, avx512_vnni"),
                ("avx512_bf16", "avx512dq avx512_vnni avx512_bf16]",
                 "kernels: avx512_vnni (f32 FMA 16 lanes, int8 vpdpbusd), bf16 weights by "
                 "vdpbf16ps; paths here: avx2, avx512, avx512_vnni")]:
            if mode == "avx512_bf16" and "avx512_bf16" not in flags:
                continue
            line = cpu_line(run([quiver, "version"], mode, lib).stdout)
            print(f"{mode} mask:", line)
            assert seen in line and "amx" not in line and "avx_vnni" not in line, line
            assert kernels + "; f32 weights prefetched from " in line, line

    golden_run = run([golden], "avx2", lib)
    print(golden_run.stdout[-900:])
    assert golden_run.returncode == 0, golden_run.stdout + golden_run.stderr
    skipped = sorted({l.split()[-1] for l in golden_run.stdout.splitlines()
                      if l.startswith("[  SKIPPED ]") and "." in l and "(" not in l})
    assert skipped == ["GoldenTest.MiniLmBf16StaysWithinTheGateOfSentenceTransformers"], skipped

    crash = run([sys.executable, "-c", "import ctypes; ctypes.string_at(0)"], "avx2", lib)
    assert crash.returncode == -signal.SIGSEGV, (crash.returncode, crash.stderr)

    wrong = run([quiver, "version"], "avx1", lib)
    assert wrong.returncode == 2, wrong.returncode
    assert "QUIVER_CPUID_MASK=avx1: expected avx2, avx2_vnni, avx512_vnni or avx512_bf16" in \
        wrong.stderr, wrong.stderr
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
