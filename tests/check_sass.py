#!/usr/bin/env python3
"""Checks the machine code (SASS) of the CUDA build, which CI compiles but cannot run.

  check_sass.py --build DIR [--cuobjdump PATH]

For each CUDA object of the engine it disassembles the sm_90a SASS with cuobjdump (from the
nvidia-cuda-cuobjdump wheel in the test venv) and checks what the kernel's design says it is:
  * FlashInfer's Hopper kernels (attention_flashinfer_fa3_*): wgmma (HGMMA) and TMA loads
    (UTMALDG), i.e. really the FA3 path, not a fallback;
  * FlashInfer's FA2 kernels and quiver's own varlen attention: tensor-core mma.sync (HMMA);
  * every object: code for sm_90a (not only PTX for a later JIT).
That quiver's own kernels spill no registers is enforced when they compile (ptxas
-warn-spills with warnings as errors, engine/CMakeLists.txt); this reports their local-memory
instructions (LDL/STL) for the log. Exit 1 listing every failed check.
"""

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys


def find_cuobjdump(explicit):
    if explicit:
        return explicit
    here = os.path.dirname(os.path.abspath(__file__))
    venv = os.path.join(here, "..", ".venv")
    hits = glob.glob(os.path.join(venv, "lib", "python3*", "site-packages", "nvidia", "*", "bin",
                                  "cuobjdump"))
    if hits:
        return hits[0]
    return shutil.which("cuobjdump")


def sass(cuobjdump, obj):
    env = dict(os.environ)
    # cuobjdump runs nvdisasm from its own folder or PATH; the wheels put both in one bin/.
    env["PATH"] = os.path.dirname(cuobjdump) + os.pathsep + env.get("PATH", "")
    out = subprocess.run([cuobjdump, "--dump-sass", obj], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"{cuobjdump} --dump-sass {obj}: {out.stderr.strip()}")
    return out.stdout


def count(pattern, text):
    return len(re.findall(pattern, text))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--cuobjdump")
    args = ap.parse_args()
    tool = find_cuobjdump(args.cuobjdump)
    if not tool:
        print("check_sass: no cuobjdump (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)")
        return 1
    objects = sorted(glob.glob(os.path.join(args.build, "**", "kernels", "cuda", "*.cu.o"),
                               recursive=True))
    if not objects:
        print(f"check_sass: no CUDA objects under {args.build}")
        return 1
    failures = []
    for obj in objects:
        name = os.path.basename(obj)[: -len(".cu.o")]
        text = sass(tool, obj)
        hgmma, utma, hmma = count(r"\bHGMMA\.", text), count(r"\bUTMALDG", text), count(r"\bHMMA\.", text)
        local = count(r"\b(LDL|STL)\b", text)
        arch_ok = "sm_90a" in text
        print(f"{name:40s} HGMMA {hgmma:6d}  UTMALDG {utma:5d}  HMMA {hmma:6d}  LDL/STL {local:5d}"
              f"  sm_90a {'yes' if arch_ok else 'NO'}")
        if not arch_ok:
            failures.append(f"{name}: no sm_90a SASS")
        if name.startswith("attention_flashinfer_fa3_"):
            if hgmma == 0:
                failures.append(f"{name}: no HGMMA (wgmma): not the Hopper FA3 kernel")
            if utma == 0:
                failures.append(f"{name}: no UTMALDG (TMA loads)")
        if name.startswith("attention_flashinfer_fa2_") or name == "attention_varlen":
            if hmma == 0:
                failures.append(f"{name}: no HMMA (tensor-core mma.sync)")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
