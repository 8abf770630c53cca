"""quiver's int8 engine against the int8 peers a careful user would pick, side by side.

Systems, all at the same thread count on the same model (all-MiniLM-L6-v2 by default):
  - quiver engine f32, --quantize int8 and, on a host with AVX512_BF16, --quantize bf16:
    quiver_engine_bench --stdin (one process each);
  - OpenVINO f32 (INFERENCE_PRECISION_HINT f32, so that a bf16-capable host is not measured in
    bf16) and OpenVINO int8 by NNCF post-training quantization (nncf.quantize, ModelType
    TRANSFORMER, calibrated on 300 corpus documents that are not among the measured texts); for
    throughput each also as a bulk job runs it (PERFORMANCE_HINT THROUGHPUT, asynchronous requests
    of --ov-throughput-texts texts), the best of which is the peer to beat there;
  - ONNX Runtime f32 (the model after onnxruntime.transformers.optimizer's BERT fusion) and its
    dynamic int8 (quantize_dynamic, per channel, QInt8 weights);
  - CTranslate2's encoder, f32 and int8 (its converter from the Hugging Face folder);
  - sentence-transformers on PyTorch (f32, the reference).
All ONNX-based peers start from tools/peers/export_onnx.py's export (tools/peers/setup_int8.sh).

Fidelity gate before any time counts: each peer embeds the 240 texts of
tests/fixtures/minilm/embeddings.jsonl, whose sentence-transformers f32 embeddings are in the
file; a f32 peer must reach cosine 0.9999 on every text, and for int8 peers the minimum is
reported (quiver's own is GoldenTest.MiniLmInt8*, on the same texts).

Timing, in interleaved rounds (these machines drift): throughput first, --rounds rounds in each
of which every system embeds --batches batches of the 100 x 128-token texts of
bench/make_inputs.py; then latency, --latency-rounds rounds in each of which, per length of
--lengths, every system makes --block batch-1 calls (the order of the systems rotated each
round), so that the blocks compared lie seconds apart, not a throughput round apart; the first
call of a turn is a warm-up and not counted. Latency is reported as the p50 over all calls and,
for quiver f32 against the best f32 peer, also as the median over rounds of the ratio of the two
block medians. quiver runs on the best kernel path the host has (engine/kernels/cpu/cpu_features.h),
and also forced to each path of --forced-paths (QUIVER_CPU_ISA), e.g. avx2 on an AVX-512 host.
With --cpuid-mask avx2 every system, quiver and each peer, runs as on a host without AVX-512 and
AMX (bench/cpuid_mask.c hides them from CPUID; the micro-architecture stays this host's); also
avx2_vnni, avx512_vnni and avx512_bf16.

Before every timed block and throughput turn (and once after the last), quiver_core_probe
(bench/core_probe.cc, beside --engine-bench) times the f32 GEMM kernel on each CPU at once: on a
virtual machine whose cores other tenants share, the rate a CPU gives swings by up to 2x within
seconds. A block's state is the lower of the probes before and after it, over the run's quiet
reference (the 90th percentile of its probes' slower-CPU rates); the goal ratios are also
reported over the rounds in which both blocks compared found at least --quiet of that ("quiet"),
and over the others.

    int8_peers.py --engine-bench build/quiver_engine_bench --out result.json
    int8_peers.py --reanalyze result.json   # the ratios again from a saved run, nothing timed
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from paired import Engine  # noqa: E402  quiver_engine_bench --stdin
from peer_ratios import analyze, report  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cpu_line(visible=True):
    """The CPU model and its flags of interest; with visible, less those a --cpuid-mask hides
    (/proc/cpuinfo shows the host's, the processes see these)."""
    model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                  if l.startswith("model name")), platform.processor())
    flags = next((l.split(":", 1)[1].split() for l in open("/proc/cpuinfo")
                  if l.startswith("flags")), [])
    wanted = ["avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni",
              "avx_vnni", "avx512_bf16", "amx_tile", "amx_int8", "amx_bf16"]
    mask = os.environ.get("QUIVER_CPUID_MASK") if visible else None
    if mask:
        wanted = [f for f in wanted if masked_flag_kept(f, mask)]
    return model, [f for f in wanted if f in flags]


CPUID_MASKS = ["avx2", "avx2_vnni", "avx512_vnni", "avx512_bf16"]


def masked_flag_kept(flag, mask):
    """Whether bench/cpuid_mask.c's QUIVER_CPUID_MASK=mask leaves a /proc/cpuinfo flag seen."""
    if flag.startswith("amx"):
        return False
    if flag == "avx_vnni":
        return mask == "avx2_vnni"
    if flag == "avx512_bf16":
        return mask == "avx512_bf16"
    if flag.startswith("avx512"):
        return mask in ("avx512_vnni", "avx512_bf16")
    return True


def cpuid_mask_counter(mode):
    """A function giving the CPUIDs bench/cpuid_mask.c has served in this process so far."""
    if not mode:
        return lambda: None
    import ctypes
    served = ctypes.CDLL(None).quiver_cpuid_mask_served
    served.restype = ctypes.c_long
    return served


class Tokenized:
    """Texts tokenized once (padded batches for the ONNX graphs), outside the clock."""

    def __init__(self, tokenizer_path, max_len):
        from tokenizers import Tokenizer
        self.tok = Tokenizer.from_file(tokenizer_path)
        # all-MiniLM-L6-v2's tokenizer.json pads to 128 and cuts at 128; sentence-transformers
        # cuts at max_seq_length (256) and pads per batch, as done here.
        self.tok.no_padding()
        self.cache = {}
        self.set_max_len(max_len)

    def set_max_len(self, max_len):
        """The fidelity gate cuts at 256 as sentence-transformers does; latency runs longer."""
        self.max_len = max_len
        self.tok.enable_truncation(max_len)

    def __call__(self, texts):
        key = (self.max_len,) + tuple(texts)
        if key not in self.cache:
            enc = self.tok.encode_batch(list(texts))
            width = max(len(e.ids) for e in enc)
            ids = np.zeros((len(texts), width), dtype=np.int64)
            mask = np.zeros_like(ids)
            for i, e in enumerate(enc):
                ids[i, :len(e.ids)] = e.ids
                mask[i, :len(e.ids)] = 1
            self.cache[key] = (ids, mask, np.zeros_like(ids))
        return self.cache[key]


def mean_pool(hidden, mask):
    m = mask[:, :, None].astype(np.float32)
    pooled = (hidden * m).sum(axis=1) / m.sum(axis=1)
    return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)


def ort_session(path, threads):
    import onnxruntime
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    return onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def ort_peers(onnx_path, work, tokenize, threads):
    """ONNX Runtime f32 on the fused graph, and its dynamic per-channel int8."""
    import onnxruntime
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers import optimizer
    fused = os.path.join(work, "model-fused.onnx")
    int8 = os.path.join(work, "model-fused-int8.onnx")
    if not os.path.exists(fused):
        optimizer.optimize_model(onnx_path, model_type="bert", num_heads=0, hidden_size=0,
                                 opt_level=1).save_model_to_file(fused)
    if not os.path.exists(int8):
        quantize_dynamic(fused, int8, per_channel=True, weight_type=QuantType.QInt8)
    out = {}
    for name, path in ((f"ONNX Runtime {onnxruntime.__version__} fused f32", fused),
                       (f"ONNX Runtime {onnxruntime.__version__} dynamic int8", int8)):
        session = ort_session(path, threads)
        inputs = {i.name for i in session.get_inputs()}

        def embed(texts, session=session, inputs=inputs):
            ids, mask, types = tokenize(texts)
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
            hidden = session.run(None, {k: v for k, v in feed.items() if k in inputs})[0]
            return mean_pool(hidden, mask)
        out[name] = embed
    return out


def openvino_peers(onnx_path, tokenize, calibration, threads, bf16=False, throughput_parts=()):
    """OpenVINO f32, and NNCF's post-training int8 of the same model; with bf16 (a host with
    AVX512_BF16 or AMX-BF16), OpenVINO with INFERENCE_PRECISION_HINT bf16 too (its default on
    such hosts). Each also as openvino_throughput runs it, once per size in throughput_parts."""
    import nncf
    import openvino as ov
    core = ov.Core()
    model = core.read_model(onnx_path)
    config = {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY",
              "INFERENCE_PRECISION_HINT": "f32"}
    names = [p.get_any_name() for p in model.inputs]

    def feed(texts):
        ids, mask, types = tokenize(texts)
        values = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        return {n: values[n] for n in names}, mask

    dataset = nncf.Dataset([[t] for t in calibration], lambda texts: feed(texts)[0])
    quantized = nncf.quantize(model, dataset, model_type=nncf.ModelType.TRANSFORMER,
                              subset_size=len(calibration))
    out = {}
    systems = [(f"OpenVINO {ov.__version__} f32", model, "f32"),
               (f"OpenVINO {ov.__version__} + NNCF {nncf.__version__} int8", quantized, "f32")]
    if bf16:
        systems.append((f"OpenVINO {ov.__version__} bf16", model, "bf16"))
    for name, m, hint in systems:
        compiled = core.compile_model(m, "CPU", dict(config, INFERENCE_PRECISION_HINT=hint))

        def embed(texts, compiled=compiled):
            inputs, mask = feed(texts)
            return mean_pool(compiled(inputs)[0], mask)
        embed.kernels = lambda compiled=compiled: openvino_kernels(compiled)
        out[name] = embed
        for part in throughput_parts:
            out[f"{name}, throughput hint, {part} texts a request"] = openvino_throughput(
                core, m, dict(config, PERFORMANCE_HINT="THROUGHPUT", INFERENCE_PRECISION_HINT=hint),
                feed, part)
    return out


def openvino_throughput(core, model, config, feed, part):
    """OpenVINO as its documentation has a bulk job run it: PERFORMANCE_HINT THROUGHPUT (one
    stream per core here, each request on its own thread) and an AsyncInferQueue of the compiled
    model's optimal number of requests, every batch cut into requests of `part` texts. For
    throughput only (batch-1 latency is what the LATENCY hint is for). At 2 threads on Zen 5 it ran
    NNCF int8 at 100 x 128 tokens 5-10% faster than one synchronous call per batch (requests of 25,
    13 and 7 texts: 48,072, 48,447 and 49,963 tokens/s against 45,579; docs/benchmarks.md)."""
    import openvino as ov
    compiled = core.compile_model(model, "CPU", config)
    queue = ov.AsyncInferQueue(compiled, compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
    done = {}

    def finished(request, i):
        done[i] = request.get_output_tensor(0).data.copy()
    queue.set_callback(finished)

    def embed(texts):
        done.clear()
        masks = []
        for i, start in enumerate(range(0, len(texts), part)):
            inputs, mask = feed(texts[start:start + part])
            masks.append(mask)
            queue.start_async(inputs, i)
        queue.wait_all()
        return np.concatenate([mean_pool(done[i], mask) for i, mask in enumerate(masks)])
    embed.throughput_only = True
    embed.streams = compiled.get_property("NUM_STREAMS")
    return embed


def openvino_kernels(compiled):
    """The kernels OpenVINO's CPU plugin chose, '<layer type> <primitive>': count (from the
    runtime model, after the calls, which fix the primitives of a dynamic-shape model)."""
    counts = {}
    for op in compiled.get_runtime_model().get_ops():
        info = op.get_rt_info()
        key = f"{info['layerType'].astype(str)} {info['primitiveType'].astype(str)}"
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


def ctranslate2_peers(model_dir, work, tokenize, threads):
    """CTranslate2's encoder, f32 and int8 (its own conversion of the Hugging Face folder)."""
    import ctranslate2
    from ctranslate2.converters import TransformersConverter
    out = {}
    for compute in ("float32", "int8"):
        path = os.path.join(work, f"ct2-{compute}")
        if not os.path.exists(os.path.join(path, "model.bin")):
            TransformersConverter(model_dir).convert(
                path, quantization=None if compute == "float32" else "int8", force=True)
        encoder = ctranslate2.Encoder(path, device="cpu", compute_type=compute,
                                      intra_threads=threads, inter_threads=1)

        def embed(texts, encoder=encoder):
            ids, mask, _ = tokenize(texts)
            tokens = [list(map(int, row[:int(m.sum())])) for row, m in zip(ids, mask)]
            hidden = np.asarray(encoder.forward_batch(tokens).last_hidden_state)
            return mean_pool(hidden[:, :ids.shape[1]], mask)
        label = "f32" if compute == "float32" else "int8"
        out[f"CTranslate2 {ctranslate2.__version__} {label}"] = embed
    return out


def st_peer(model_dir, threads):
    import torch
    from sentence_transformers import SentenceTransformer
    torch.set_num_threads(threads)
    model = SentenceTransformer(model_dir, device="cpu")

    def embed(texts):
        with torch.inference_mode():
            return model.encode(texts, batch_size=len(texts), convert_to_numpy=True)
    embed.model = model
    return {f"sentence-transformers (torch {torch.__version__}) f32": embed}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--engine-bench")
    p.add_argument("--reanalyze", metavar="RESULT_JSON",
                   help="compute a saved run's goal ratios and host states again (with this "
                        "version's rules), rewrite its JSON and print them; runs nothing")
    p.add_argument("--model", default=os.path.join(ROOT, "models", "all-MiniLM-L6-v2"))
    p.add_argument("--inputs", default=os.path.join(ROOT, ".cache", "bench", "inputs.json"))
    p.add_argument("--onnx", default=os.path.join(ROOT, ".cache", "peers", "all-MiniLM-L6-v2",
                                                  "model.onnx"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--batches", type=int, default=2)
    p.add_argument("--block", type=int, default=8)
    p.add_argument("--latency-rounds", type=int, default=12)
    p.add_argument("--lengths", default="128,512", help="batch-1 latency lengths (tokens)")
    p.add_argument("--forced-paths", default="",
                   help="kernel paths to run quiver on besides the best one, e.g. avx2")
    p.add_argument("--cpuid-mask", choices=CPUID_MASKS,
                   help="run everything (quiver and every peer) as on a host with only these "
                        "instruction sets (bench/cpuid_mask.c): avx2 (Zen 3), avx2_vnni "
                        "(Alder Lake), avx512_vnni (Ice Lake), avx512_bf16 (Zen 4)")
    p.add_argument("--cpuid-mask-lib", help="libquiver_cpuid_mask.so (default: beside "
                                            "--engine-bench)")
    p.add_argument("--no-ctranslate2", action="store_true")
    p.add_argument("--ov-throughput-texts", default="4,8,16",
                   help="OpenVINO also with its THROUGHPUT hint for the throughput figure, each "
                        "batch cut into asynchronous requests of this many texts, one system per "
                        "value of this list (empty: not run)")
    p.add_argument("--core-probe", help="quiver_core_probe (default: beside --engine-bench; "
                   "none: no probes)")
    p.add_argument("--quiet", type=float, default=0.85,
                   help="a block is quiet when its probes found this much of the run's quiet "
                        "reference (the 90th percentile of its probes)")
    p.add_argument("--out")
    args = p.parse_args()
    if args.reanalyze:
        result = json.load(open(args.reanalyze))
        analyze(result)
        json.dump(result, open(args.reanalyze, "w"), indent=2)
        report(result)
        return
    if not args.engine_bench or not args.out:
        p.error("--engine-bench and --out are needed (or --reanalyze)")
    if args.cpuid_mask and os.environ.get("QUIVER_CPUID_MASK") != args.cpuid_mask:
        # The mask must be in place before any library reads CPUID: start again under it.
        lib = os.path.abspath(args.cpuid_mask_lib or os.path.join(
            os.path.dirname(args.engine_bench), "libquiver_cpuid_mask.so"))
        if not os.path.exists(lib):
            sys.exit(f"--cpuid-mask: {lib} not found (ninja quiver_cpuid_mask)")
        os.environ.update(QUIVER_CPUID_MASK=args.cpuid_mask, LD_PRELOAD=lib)
        os.execv(sys.executable, [sys.executable] + sys.argv)
    cpuid_served = cpuid_mask_counter(args.cpuid_mask)

    inputs = json.load(open(args.inputs))
    lengths = [int(n) for n in args.lengths.split(",") if n]
    for n in lengths:
        if str(n) not in inputs["sets"]:
            sys.exit(f"--lengths {n}: {args.inputs} has no {n}-token texts (bench/make_inputs.py)")
    batch = inputs["sets"]["128"]
    fixture = [json.loads(l) for l in open(os.path.join(ROOT, "tests", "fixtures", "minilm",
                                                        "embeddings.jsonl"))]
    measured = {r["text"] for r in fixture} | set(batch)
    calibration = [json.loads(l)["text"] for l in open(os.path.join(ROOT, "corpus",
                                                                    "docs_multi.jsonl"))]
    calibration = [t for t in calibration if t not in measured][:300]
    tokenize = Tokenized(os.path.join(args.model, "tokenizer.json"), 256)
    work = os.path.dirname(args.onnx)

    peers = {}
    peers.update(st_peer(args.model, args.threads))
    peers.update(ort_peers(args.onnx, work, tokenize, args.threads))
    host_bf16 = "avx512_bf16" in cpu_line()[1] or "amx_bf16" in cpu_line()[1]
    peers.update(openvino_peers(args.onnx, tokenize, calibration, args.threads, bf16=host_bf16,
                                throughput_parts=[int(t) for t in
                                                  args.ov_throughput_texts.split(",") if t]))
    if not args.no_ctranslate2:
        peers.update(ctranslate2_peers(args.model, work, tokenize, args.threads))

    # The gate: the fixture's 240 texts against sentence-transformers' f32 embeddings.
    texts = [r["text"] for r in fixture]
    want = np.asarray([r["embedding"] for r in fixture], dtype=np.float32)
    want /= np.linalg.norm(want, axis=1, keepdims=True)
    fidelity = {}
    for name, embed in peers.items():
        got = np.concatenate([np.asarray(embed(texts[i:i + 40]), dtype=np.float32)
                              for i in range(0, len(texts), 40)])
        got /= np.linalg.norm(got, axis=1, keepdims=True)
        cos = (got * want).sum(axis=1)
        fidelity[name] = {"min_cosine": float(cos.min()), "mean_cosine": float(cos.mean())}
        print(f"{name}: min cosine {cos.min():.6f}", file=sys.stderr)
    gated = {n: e for n, e in peers.items()
             if "int8" in n or "bf16" in n or fidelity[n]["min_cosine"] >= 0.9999}
    # Past the gate, every system takes the longest latency input whole (all-MiniLM-L6-v2 has
    # 512 positions), as quiver's engine does.
    tokenize.set_max_len(max(256, *lengths))
    for embed in peers.values():
        if hasattr(embed, "model"):
            embed.model.max_seq_length = max(256, *lengths)

    # quiver_engine_bench through a wrapper per (path, precision): QUIVER_CPU_ISA and --quantize.
    engines = {}
    for path in [""] + [p for p in args.forced_paths.split(",") if p]:
        # bf16 weights where the host has them and the path is avx512 or above.
        bf16 = host_bf16 and path not in ("avx2", "avx2_vnni", "generic")
        for precision in ("f32", "int8") + (("bf16",) if bf16 else ()):
            wrapper = os.path.join(work, f"engine-bench-{path or 'best'}-{precision}.sh")
            env = f"QUIVER_CPU_ISA={path} " if path else ""
            quantize = f" --quantize {precision}" if precision != "f32" else ""
            with open(wrapper, "w") as f:
                f.write(f'#!/bin/sh\n{env}exec "{os.path.abspath(args.engine_bench)}"'
                        f'{quantize} "$@"\n')
            os.chmod(wrapper, 0o755)
            name = f"quiver engine {precision}" + (f" ({path} forced)" if path else "")
            engines[name] = Engine(wrapper, args.model, args.inputs, args.threads)

    rates = {n: [] for n in list(engines) + list(gated)}
    latency = {n: {length: [] for length in lengths} for n in rates}
    block_medians = {n: {length: [] for length in lengths} for n in rates}
    # The probe run before each counted turn or block: its index in `probes`.
    rate_probes = {n: [] for n in rates}
    block_probes = {n: {length: [] for length in lengths} for n in rates}
    probes = []
    probe_path = args.core_probe or os.path.join(os.path.dirname(args.engine_bench),
                                                 "quiver_core_probe")
    if args.core_probe != "none" and not os.path.exists(probe_path):
        sys.exit(f"{probe_path} not found (ninja quiver_core_probe, or --core-probe none)")

    def probe():
        """quiver_core_probe once; its index in `probes` (None with --core-probe none)."""
        if args.core_probe == "none":
            return None
        out = subprocess.run([probe_path, "--threads", str(args.threads)], capture_output=True,
                             text=True, check=True)
        probes.append(json.loads(out.stdout))
        return len(probes) - 1

    def latency_block(name, length, r):
        """--block timed batch-1 calls of `length` tokens (after one untimed call), in ms."""
        if name in engines:
            return engines[name].latency(length, args.block + 1)[1:]
        texts_n = inputs["sets"][str(length)]
        ms = []
        for i in range(args.block + 1):
            t = time.perf_counter()
            gated[name]([texts_n[(r * args.block + i) % len(texts_n)]])
            ms.append((time.perf_counter() - t) * 1e3)
        return ms[1:]

    cpuid_before_timing = cpuid_served()
    # Throughput: every system in turn, --rounds rounds (round 0 warms every system up and is
    # dropped).
    for r in range(args.rounds + 1):
        for name, tool in engines.items():
            before = probe()
            rate = tool.throughput(args.batches)
            if r:
                rates[name].append(rate)
                rate_probes[name].append(before)
        for name, embed in gated.items():
            before = probe()
            t = time.perf_counter()
            for _ in range(args.batches):
                embed(batch)
            rate = args.batches * len(batch) * 128 / (time.perf_counter() - t)
            if r:
                rates[name].append(rate)
                rate_probes[name].append(before)
        print(f"throughput round {r} done", file=sys.stderr)
    # Latency apart from throughput, so that the systems' blocks of one round follow each other
    # within seconds (a throughput turn takes seconds; this host's speed shifts by 20% between
    # states that last seconds): --latency-rounds rounds, each length in turn, every system one
    # block, the order rotated every round so that no system always follows the same one.
    names = [n for n in rates if not getattr(gated.get(n), "throughput_only", False)]
    for r in range(args.latency_rounds + 1):  # round 0 warms up and is dropped
        for length in lengths:
            for name in names[r % len(names):] + names[:r % len(names)]:
                before = probe()
                ms = latency_block(name, length, r)
                if r:
                    latency[name][length] += ms
                    block_medians[name][length].append(statistics.median(ms))
                    block_probes[name][length].append(before)
        print(f"latency round {r} done", file=sys.stderr)
    probe()  # the last block's probe after it
    cpuid_after_timing = cpuid_served()
    # What the peers that can say so ran (e.g. brgemm_avx2_f32 against brgconv_avx512_1x1_f32).
    peer_kernels = {n: e.kernels() for n, e in gated.items() if hasattr(e, "kernels")}
    for tool in engines.values():
        tool.close()

    model, flags = cpu_line()
    result = {"cpu": model, "flags": flags, "threads": args.threads, "rounds": args.rounds,
              "host_flags": cpu_line(visible=False)[1], "cpuid_mask": args.cpuid_mask,
              "cpuid_served_in_this_process": None if not args.cpuid_mask else {
                  "before_timing": cpuid_before_timing, "after_timing": cpuid_after_timing},
              "peer_kernels": peer_kernels,
              "latency_rounds": args.latency_rounds, "block": args.block,
              "fidelity_240_texts": fidelity,
              "quiver_int8_fidelity": "GoldenTest.MiniLmInt8StaysWithinTheGateOfSentenceTransformers",
              "excluded_by_gate": sorted(set(peers) - set(gated)),
              "throughput_tokens_per_s": {n: statistics.median(v) for n, v in rates.items()},
              "throughput_per_round": rates,
              "latency_p50_ms": {n: {str(length): statistics.median(v) for length, v in by.items()}
                                 for n, by in latency.items() if n in names},
              "latency_block_medians_ms": {n: {str(length): v for length, v in by.items()}
                                           for n, by in block_medians.items() if n in names},
              "openvino_throughput_hint": {
                  "texts_per_request": args.ov_throughput_texts,
                  "streams": {n: int(e.streams) for n, e in gated.items()
                              if getattr(e, "throughput_only", False)}},
              "kernel_paths": "best" + "".join(f", {p} forced" for p in
                                               args.forced_paths.split(",") if p),
              "core_probes": probes, "quiet_fraction": args.quiet,
              "throughput_round_probes": rate_probes,
              "latency_block_probes": {n: {str(length): v for length, v in by.items()}
                                       for n, by in block_probes.items() if n in names}}
    analyze(result)
    json.dump(result, open(args.out, "w"), indent=2)
    report(result)


if __name__ == "__main__":
    main()
