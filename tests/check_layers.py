#!/usr/bin/env python3
"""Checks the dependency direction of docs/architecture.md on a configured build and on the sources.

  check_layers.py --source DIR --build DIR   check this tree; exit 1 listing every violation
  check_layers.py --self-test                run the checks on a made-up tree that breaks each
                                             rule, and fail unless each break is reported

Link rules come from CMake's own target graph (cmake --graphviz), so they are what the linker
sees, transitively. Include rules come from the #include lines of each library's folder, and
inside the engine from the level each file's folder is at (ENGINE_LEVELS): a model file may
include ops, never a kernel.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

# Project libraries each library may use (transitively). Everything else is a violation.
ALLOWED = {
    "common": set(),
    "proto": set(),
    "tokenizer": {"common"},
    "engine": {"common"},
    "scheduler": {"engine", "common"},
    "telemetry": {"common"},
    "worker": {"scheduler", "engine", "proto", "telemetry", "common"},
    "gateway": {"tokenizer", "proto", "telemetry", "common"},
}

# Third-party headers a library must never include: the transports stay out of the lower layers.
TRANSPORT_HEADERS = re.compile(
    r"^(grpc|grpcpp|grpc\+\+|google/protobuf|boost|simdjson|nlohmann|httplib|beast|"
    r"quiver/v1/)")
FORBIDDEN_HEADERS = {
    "common": TRANSPORT_HEADERS,
    "tokenizer": TRANSPORT_HEADERS,
    "engine": TRANSPORT_HEADERS,
    "scheduler": TRANSPORT_HEADERS,
}
# common/json.cc is the one place that wraps simdjson.
HEADER_EXCEPTIONS = {("common/json.cc", "simdjson.h")}

# Packages a library's link closure must not contain.
FORBIDDEN_PACKAGES = {
    "engine": re.compile(r"^(gRPC::|protobuf::|Boost::|quiver_proto$)"),
    "scheduler": re.compile(r"^(gRPC::|protobuf::|Boost::|quiver_proto$)"),
    "tokenizer": re.compile(r"^(gRPC::|protobuf::|Boost::|quiver_proto$|quiver_engine$)"),
    "common": re.compile(r"^(gRPC::|protobuf::|Boost::|quiver_)"),
}

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]')

# The levels inside engine/ (docs/architecture.md), each with the engine levels its files may
# include. "api" is the engine's own top: engine.h, batch.h, model_folder.h, graph_bucket.h and
# the rest at engine/'s root, which may include anything of the engine.
ENGINE_LEVELS = {
    "base": {"base"},                                   # tensors, allocator, thread pool
    "kernels": {"kernels", "base"},                     # raw pointers per device, no tensors
    "attention": {"attention", "kernels", "base"},      # backends by (device, name), the table
    "ops": {"ops", "attention", "kernels", "base"},     # contracts, checks, device dispatch
    "loader": {"loader", "ops", "base"},                # checkpoints, weights prepared per device
    "models": {"models", "ops", "attention", "loader", "base"},  # one file per architecture
    # The GPU runtime owns the device's execution state: streams, events, pinned buffers and
    # CUDA graphs (kernels/cuda/memory.h, context.h) besides what the models run.
    "runtime": {"runtime", "models", "ops", "attention", "loader", "kernels", "base", "api"},
    "api": set(),  # filled below: everything
}
ENGINE_LEVELS["api"] = set(ENGINE_LEVELS)


def engine_level(path: str):
    """The level of an engine path ("engine/ops/linear.h" -> "ops"), or None outside engine/."""
    parts = path.split("/")
    if parts[0] != "engine" or len(parts) < 2:
        return None
    return parts[1] if len(parts) > 2 and parts[1] in ENGINE_LEVELS else "api"


def check_engine_levels(source: Path):
    errors = []
    root = source / "engine"
    if not root.is_dir():
        return errors
    for file in sorted(root.rglob("*")):
        if file.suffix not in (".h", ".cc", ".cu", ".cuh"):
            continue
        rel = file.relative_to(source).as_posix()
        level = engine_level(rel)
        parts = rel.split("/")
        if len(parts) > 2 and parts[1] not in ENGINE_LEVELS:
            errors.append(f"{rel}: engine/{parts[1]}/ is not a level of ENGINE_LEVELS (add it "
                          f"there, with what it may include)")
            continue
        for lineno, line in enumerate(file.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = engine_level(m.group(1))
            if target is not None and target not in ENGINE_LEVELS[level]:
                errors.append(f"{rel}:{lineno}: engine/{level} includes {m.group(1)} "
                              f"({target} is not below {level})")
    return errors


def layer_of_include(path: str):
    if path.startswith("quiver/v1/"):
        return "proto"
    head = path.split("/", 1)[0]
    return head if head in ALLOWED and "/" in path else None


def check_includes(source: Path):
    errors = []
    for lib in ALLOWED:
        root = source / lib
        if not root.is_dir():
            continue
        for file in sorted(root.rglob("*")):
            if file.suffix not in (".h", ".cc", ".cu", ".cuh"):
                continue
            rel = file.relative_to(source).as_posix()
            for lineno, line in enumerate(file.read_text(errors="replace").splitlines(), 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                target = m.group(1)
                layer = layer_of_include(target)
                if layer and layer != lib and layer not in ALLOWED[lib]:
                    errors.append(f"{rel}:{lineno}: {lib} includes {target} ({layer} is not "
                                  f"below {lib})")
                bad = FORBIDDEN_HEADERS.get(lib)
                if bad and bad.match(target) and (rel, target) not in HEADER_EXCEPTIONS:
                    errors.append(f"{rel}:{lineno}: {lib} includes transport header {target}")
    return errors


def parse_dot(text: str):
    labels, edges = {}, {}
    for m in re.finditer(r'"(node\d+)"\s*\[\s*label\s*=\s*"([^"]+)"', text):
        labels[m.group(1)] = m.group(2)
    for m in re.finditer(r'"(node\d+)"\s*->\s*"(node\d+)"', text):
        edges.setdefault(labels[m.group(1)], set()).add(labels[m.group(2)])
    return edges


def closure(edges, start):
    seen, stack = set(), [start]
    while stack:
        for nxt in edges.get(stack.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


def check_links(edges):
    errors = []
    for lib, allowed in ALLOWED.items():
        target = f"quiver_{lib}"
        if target not in edges and not any(target in v for v in edges.values()):
            errors.append(f"target {target} is missing from the build graph")
            continue
        reach = closure(edges, target)
        for dep in sorted(reach):
            if dep.startswith("quiver_") and dep != "quiver_build_flags":
                layer = dep[len("quiver_"):]
                if layer in ALLOWED and layer not in allowed:
                    errors.append(f"{target} links {dep}")
            bad = FORBIDDEN_PACKAGES.get(lib)
            if bad and bad.match(dep) and dep != "quiver_build_flags" and dep != target:
                if not (lib == "common" and dep == "quiver_build_flags"):
                    errors.append(f"{target} links {dep}")
    return sorted(set(errors))


def build_graph(build: Path):
    with tempfile.TemporaryDirectory() as tmp:
        dot = Path(tmp) / "deps.dot"
        subprocess.run(["cmake", f"--graphviz={dot}", "."], cwd=build, check=True,
                       stdout=subprocess.DEVNULL)
        return parse_dot(dot.read_text())


def self_test():
    """Every rule must fire on a tree built to break it, and stay quiet on a clean one."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp)
        for lib in ALLOWED:
            (src / lib).mkdir()
        (src / "engine" / "ok.cc").write_text('#include "common/status.h"\n#include <vector>\n')
        (src / "gateway" / "ok.cc").write_text('#include "tokenizer/utf8.h"\n'
                                               '#include "boost/beast.hpp"\n')
        assert check_includes(src) == [], check_includes(src)
        (src / "engine" / "bad.cc").write_text('#include "gateway/http_status.h"\n'
                                               '#include <grpcpp/grpcpp.h>\n'
                                               '#include "simdjson.h"\n')
        (src / "gateway" / "bad.h").write_text('#include "engine/model_folder.h"\n')
        errors = check_includes(src)
        expected = ["engine/bad.cc:1", "engine/bad.cc:2", "engine/bad.cc:3", "gateway/bad.h:1"]
        for e in expected:
            assert any(x.startswith(e) for x in errors), (e, errors)

        # Inside the engine: a model including a kernel header, an op including a model, a kernel
        # including an op (and tensors), a loader including the runtime; and the same levels
        # used the right way round, which must pass.
        for level in ENGINE_LEVELS:
            if level != "api":
                (src / "engine" / level).mkdir(exist_ok=True)
        (src / "engine" / "models" / "ok.cc").write_text(
            '#include "engine/ops/linear.h"\n#include "engine/loader/weight_loader.h"\n'
            '#include "engine/base/tensor.h"\n#include "common/json.h"\n')
        (src / "engine" / "engine.cc").write_text('#include "engine/kernels/cpu/kernels.h"\n'
                                                  '#include "engine/runtime/plan.h"\n')
        assert check_engine_levels(src) == [], check_engine_levels(src)
        (src / "engine" / "models" / "bad.cc").write_text('#include "engine/ops/linear.h"\n'
                                                          '#include "engine/kernels/cpu/kernels.h"\n')
        (src / "engine" / "ops" / "bad.cc").write_text('#include "engine/models/model.h"\n')
        (src / "engine" / "kernels" / "bad.cc").write_text('#include "engine/ops/linear.h"\n'
                                                           '#include "engine/engine.h"\n')
        (src / "engine" / "loader" / "bad.cc").write_text('#include "engine/runtime/plan.h"\n')
        (src / "engine" / "gpu").mkdir()  # a folder no level names escapes nothing
        (src / "engine" / "gpu" / "x.cc").write_text('#include "engine/engine.h"\n')
        errors = check_engine_levels(src)
        for e in ["engine/models/bad.cc:2", "engine/ops/bad.cc:1", "engine/kernels/bad.cc:1",
                  "engine/kernels/bad.cc:2", "engine/loader/bad.cc:1", "engine/gpu/x.cc:"]:
            assert any(x.startswith(e) for x in errors), (e, errors)
        assert not any(x.startswith("engine/models/bad.cc:1") for x in errors), errors
        assert len(errors) == 6, errors

    clean = {f"quiver_{lib}": {f"quiver_{d}" for d in deps} for lib, deps in ALLOWED.items()}
    clean["quiver_proto"] = {"gRPC::grpc++", "protobuf::libprotobuf"}
    clean["quiver_common"] = {"simdjson::simdjson"}
    assert check_links(clean) == [], check_links(clean)
    broken = {k: set(v) for k, v in clean.items()}
    broken["quiver_tokenizer"].add("quiver_scheduler")  # gateway -> tokenizer -> scheduler -> engine
    broken["quiver_engine"].add("quiver_proto")         # engine -> gRPC
    errors = check_links(broken)
    for e in ["quiver_gateway links quiver_engine", "quiver_engine links quiver_proto",
              "quiver_engine links gRPC::grpc++", "quiver_tokenizer links quiver_engine"]:
        assert e in errors, (e, errors)
    print("self-test: every injected violation was reported")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--source", type=Path)
    parser.add_argument("--build", type=Path)
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    if args.self_test:
        self_test()
        return 0
    errors = (check_includes(args.source) + check_engine_levels(args.source) +
              check_links(build_graph(args.build)))
    for e in errors:
        print(e)
    if errors:
        print(f"{len(errors)} layering violation(s)")
        return 1
    print("layering ok: link graph, includes and engine levels follow docs/architecture.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
