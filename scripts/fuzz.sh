#!/usr/bin/env bash
# Builds a libFuzzer target with clang, ASan and UBSan, seeds it, and runs it.
#
#   scripts/fuzz.sh [seconds] [target]    default 600 s, tokenizer_fuzz; targets:
#     tokenizer_fuzz      bytes through every fixture tokenizer (Encode, pairs, truncation, Decode)
#     request_json_fuzz   bytes as a request body through JsonDocument and every request parser
#     http_request_fuzz   bytes as a client's conversation with a real HttpServer on loopback
#   The log, new corpus units and any crash input go under out/fuzz/TARGET/.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SECONDS_TO_RUN="${1:-600}"
TARGET="${2:-tokenizer_fuzz}"
BUILD="$ROOT/build-fuzz"
OUT="$ROOT/out/fuzz/$TARGET"
mkdir -p "$OUT/corpus"
if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
  CC=clang CXX=clang++ cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DQUIVER_FUZZ=ON -DQUIVER_SANITIZE=address,undefined -DQUIVER_CUDA=OFF \
    -DQUIVER_BUILD_BENCH=OFF
fi
cmake --build "$BUILD" --target "$TARGET" -j "$(nproc)"
python3 - "$ROOT" "$OUT/corpus" "$TARGET" <<'PY'
import json, sys, pathlib
root, dst, target = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
texts = []
for name in ("queries.jsonl", "docs_multi.jsonl"):
    for i, line in enumerate(open(root / "corpus" / name, encoding="utf-8")):
        if i % 97 == 0:
            texts.append(json.loads(line)["text"][:2000])
if target == "tokenizer_fuzz":
    for i, text in enumerate(texts):
        for control in (0, 13, 142, 7):  # each tokenizer (control % 4), several options
            (dst / f"text-{i}-{control}").write_bytes(bytes([control]) + text.encode())
    sys.exit(0)
# Request bodies of every dialect (the shapes tests/gateway/requests_test.cc exercises).
bodies = [
    {"input": texts[0], "model": "m", "encoding_format": "base64", "dimensions": 8},
    {"input": [texts[1], [101, 7592, 102]], "truncate_prompt_tokens": 16, "user": "u"},
    {"inputs": [texts[2], texts[3]], "normalize": False, "truncate": True,
     "truncation_direction": "Left", "prompt_name": "query"},
    {"texts": [texts[4]], "input_type": "search_query", "embedding_types": ["float", "int8"],
     "truncate": "START", "output_dimension": 4},
    {"input": [[texts[5], texts[6]], [texts[7]]], "encoding_format": "base64_binary"},
    {"query": "q", "texts": ["a", "b"], "return_text": True, "raw_scores": True},
    {"query": "q", "documents": ["a", {"text": "b"}], "top_n": 1, "return_documents": False},
    {"text_1": "q", "text_2": ["a", "b"]},
    {"inputs": {"source_sentence": "s", "sentences": ["a", "b"]},
     "parameters": {"truncate": True, "prompt_name": "p"}},
    {"inputs": ["a", "b"], "add_special_tokens": False},
    {"ids": [[101, 7592, 102], [2, 3]], "skip_special_tokens": False},
    {"ids": [4294974888]},
    {"inputs": [["a", "b"], "c"], "raw_scores": True, "truncate": True},
    {"input": ["a", [101, 102]], "use_activation": False, "softmax": False,
     "truncate_prompt_tokens": 2, "truncation_side": "left", "priority": 0},
    {"prompt": "p", "return_token_strs": True, "add_special_tokens": False},
    {"tokens": [101, 7592, 102], "model": "m"},
    {"query": "q", "documents": ["a"], "max_tokens_per_doc": 3},
    {"input": "x", "embed_dtype": "bfloat16", "endianness": "big", "use_activation": False,
     "task": "query", "modality": "text"},
]
if target == "request_json_fuzz":
    for i, b in enumerate(bodies):
        (dst / f"body-{i}").write_text(json.dumps(b, ensure_ascii=False), encoding="utf-8")
    sys.exit(0)
def req(method, path, body=b"", extra=b""):
    return (method + b" " + path + b" HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n" +
            extra + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
seeds = [
    req(b"GET", b"/health"),
    req(b"POST", b"/embed", json.dumps(bodies[2]).encode()),
    req(b"POST", b"/private", b"{}") + req(b"POST", b"/private", b"{}", b"Authorization: Bearer k\r\n"),
    req(b"POST", b"/embed", b'{"inputs":"x"}', b"Expect: 100-continue\r\n"),
    b"POST /embed HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    b"POST /embed HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
    req(b"GET", b"/a") + req(b"GET", b"/b", b"", b"Connection: close\r\n"),
    b"GET / HTTP/1.0\r\n\r\n",
]
for i, s in enumerate(seeds):
    (dst / f"http-{i}").write_bytes(s)
PY
cd "$OUT"
"$BUILD/tests/$TARGET" -max_total_time="$SECONDS_TO_RUN" -max_len=8192 -timeout=10 \
  -rss_limit_mb=4096 -print_final_stats=1 "$OUT/corpus" 2>&1 | tee "$OUT/fuzz.log" | tail -20
