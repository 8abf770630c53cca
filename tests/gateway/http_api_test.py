#!/usr/bin/env python3
"""End-to-end tests of `quiver serve` over real HTTP on loopback (Python standard library only).

    http_api_test.py QUIVER_BINARY SOURCE_DIR

Starts `quiver serve` with the default model on a free port and checks every endpoint, the
documented error cases, and that vectors over HTTP equal the reference embeddings
(tests/fixtures/minilm, sentence-transformers) with cosine >= 0.99999, base64 payloads decoding to
exactly the float values.
"""

import base64
import json
import math
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request

from serving import start as start_serve

QUIVER, SOURCE = sys.argv[1], sys.argv[2]
MODEL = os.path.join(SOURCE, "models", "all-MiniLM-L6-v2")
FAILURES = []


def start(extra=(), env=None):
    return start_serve(QUIVER, MODEL, extra, env=env)


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what)


def call(port, method, path, body=None, headers=None, raw=None):
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read().decode(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), dict(e.headers)


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def vllm_extensions(port, texts, out, fixtures):
    """vLLM's fields on /v1/embeddings: embed_dtype and endianness for base64, use_activation
    (normalize), add_special_tokens, truncation_side. The reference casts: struct's IEEE half
    ('e', rounded to nearest even, as numpy's), float32's upper half rounded to nearest even."""
    floats = [d["embedding"] for d in out["data"][:2]]

    def b64(body):
        answer = json.loads(call(port, "POST", "/v1/embeddings", {"input": texts[:2], "encoding_format": "base64", **body})[1])
        return [base64.b64decode(d["embedding"]) for d in answer["data"]]

    def bf16(x):
        bits = struct.unpack("<I", struct.pack("<f", x))[0]
        return (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16

    check(b64({"embed_dtype": "float16"}) == [struct.pack(f"<{len(v)}e", *v) for v in floats],
          "embed_dtype float16: IEEE half of the floats, little-endian")
    check(b64({"embed_dtype": "float16", "endianness": "big"}) == [struct.pack(f">{len(v)}e", *v) for v in floats],
          "embed_dtype float16, endianness big")
    check(b64({"embed_dtype": "bfloat16", "endianness": "little"}) == [struct.pack(f"<{len(v)}H", *map(bf16, v)) for v in floats],
          "embed_dtype bfloat16: float32 rounded to nearest even")
    check(b64({"embed_dtype": "float32", "endianness": "big"}) == [struct.pack(f">{len(v)}f", *v) for v in floats],
          "endianness big: float32 bytes reversed")
    check(b64({"embed_dtype": "float32", "endianness": "native"}) == [struct.pack(f"<{len(v)}f", *v) for v in floats],
          "endianness native: little-endian here")
    raw = json.loads(call(port, "POST", "/v1/embeddings", {"input": texts[0], "use_activation": False})[1])
    tei = json.loads(call(port, "POST", "/embed", {"inputs": texts[0], "normalize": False})[1])[0]
    norm = math.sqrt(sum(x * x for x in raw["data"][0]["embedding"]))
    check(abs(norm - 1) > 1e-3 and max(abs(a - b) for a, b in zip(raw["data"][0]["embedding"], tei)) < 1e-6,
          f"use_activation false: the embedding before normalization, as TEI's normalize false (norm {norm})")
    legacy = json.loads(call(port, "POST", "/v1/embeddings", {"input": texts[0], "normalize": False})[1])
    check(legacy["data"][0]["embedding"] == raw["data"][0]["embedding"], "normalize false: the same")
    s, b, _ = call(port, "POST", "/v1/embeddings", {"input": "x", "use_activation": True, "normalize": False})
    check(s == 422 and "'normalize' disagrees with 'use_activation'" in b, f"use_activation and normalize disagreeing: 422 ({s} {b[:160]})")
    plain = json.loads(call(port, "POST", "/v1/embeddings", {"input": texts[0], "add_special_tokens": False})[1])
    no_specials = fixtures[0]["ids"][1:-1]
    by_ids = json.loads(call(port, "POST", "/v1/embeddings", {"input": [no_specials]})[1])
    check(plain["usage"]["prompt_tokens"] == len(no_specials)
          and max(abs(a - b) for a, b in zip(plain["data"][0]["embedding"], by_ids["data"][0]["embedding"])) < 1e-6,
          "add_special_tokens false: the text's tokens alone, as its ids without [CLS] and [SEP]")
    ids, k = fixtures[0]["ids"], len(fixtures[0]["ids"]) - 2
    cut = json.loads(call(port, "POST", "/v1/embeddings", {"input": [ids, ids[-k:], ids[:k]], "truncate_prompt_tokens": k})[1])
    e = [d["embedding"] for d in cut["data"]]
    check(e[0] == e[1] and e[0] != e[2], "token ids over truncate_prompt_tokens: the last k, as vLLM keeps")
    cut = json.loads(call(port, "POST", "/v1/embeddings", {"input": [ids, ids[:k]], "truncate_prompt_tokens": k, "truncation_side": "right"})[1])
    check(cut["data"][0]["embedding"] == cut["data"][1]["embedding"], "truncation_side right: the first k ids")
    # vLLM's /tokenize (prompt) and /detokenize beside TEI's.
    ids = fixtures[0]["ids"]
    info = json.loads(call(port, "GET", "/info")[1])
    check(info["model_dtype"] == "float32", f"/info: model_dtype float32 for f32 weights ({info['model_dtype']})")
    tok = json.loads(call(port, "POST", "/tokenize", {"prompt": fixtures[0]["text"], "model": "all-MiniLM-L6-v2"})[1])
    check(tok == {"count": len(ids), "max_model_len": info["max_input_length"], "tokens": ids, "token_strs": None},
          f"vLLM's /tokenize: the reference ids, their count, the model's limit ({str(tok)[:200]})")
    strs = json.loads(call(port, "POST", "/tokenize", {"prompt": fixtures[0]["text"], "add_special_tokens": False, "return_token_strs": True})[1])
    check(strs["tokens"] == ids[1:-1] and len(strs["token_strs"]) == len(ids) - 2 and "[CLS]" not in strs["token_strs"]
          and all(isinstance(t, str) and t for t in strs["token_strs"]),
          f"vLLM's /tokenize without special tokens, with their strings ({str(strs)[:200]})")
    detok = json.loads(call(port, "POST", "/detokenize", {"tokens": ids})[1])
    tei = json.loads(call(port, "POST", "/decode", {"ids": ids, "skip_special_tokens": False})[1])
    check(detok == {"prompt": tei[0]} and detok["prompt"].startswith("[CLS]"),
          f"vLLM's /detokenize: the text with its special tokens, as TEI's /decode gives it ({detok} {tei})")
    for path, body, status, field in (("/tokenize", {"messages": [{"role": "user", "content": "x"}]}, 400, "messages"),
                                      ("/detokenize", {"tokens": [7, 2147483647]}, 422, "tokens[1]"),
                                      ("/detokenize", {"tokens": "7"}, 422, "tokens"),
                                      ("/tokenize", {"prompt": "x", "model": "other"}, 404, "other")):
        s, b, _ = call(port, "POST", path, body)
        check(s == status and field in b and '"error"' in b, f"{path} {body}: {status} naming {field} ({s} {b[:160]})")
    # Jina's fields: late_chunking (the inputs as the chunks of one text, as Perplexity's route
    # embeds one document), embedding_type, normalized.
    chunks = [texts[1][:200], texts[2][:200]]
    late = json.loads(call(port, "POST", "/v1/embeddings", {"input": chunks, "late_chunking": True})[1])
    ctx = json.loads(call(port, "POST", "/v1/contextualizedembeddings", {"input": [chunks], "encoding_format": "float"})[1])
    plain = json.loads(call(port, "POST", "/v1/embeddings", {"input": chunks})[1])
    check([d["embedding"] for d in late["data"]] == [d["embedding"] for d in ctx["data"][0]["data"]]
          and late["data"][0]["embedding"] != plain["data"][0]["embedding"]
          and late["usage"]["prompt_tokens"] == ctx["usage"]["prompt_tokens"],
          "Jina's late_chunking: the chunks embedded in one context, as /v1/contextualizedembeddings")
    jb = json.loads(call(port, "POST", "/v1/embeddings", {"input": texts[0], "embedding_type": "base64"})[1])
    ob = json.loads(call(port, "POST", "/v1/embeddings", {"input": texts[0], "encoding_format": "base64"})[1])
    check(jb["data"][0]["embedding"] == ob["data"][0]["embedding"], "Jina's embedding_type base64 = encoding_format base64")
    jn = json.loads(call(port, "POST", "/v1/embeddings", {"input": texts[0], "normalized": False})[1])
    check(jn["data"][0]["embedding"] == raw["data"][0]["embedding"], "Jina's normalized false = use_activation false")
    for body, status, field in (({"input": "x", "embedding_type": "binary"}, 422, "embedding_type"),
                                ({"input": ["a", "b"], "late_chunking": True, "prompt_name": "q"}, 422, "late_chunking"),
                                ({"input": [[101, 102]], "late_chunking": True}, 400, "late_chunking")):
        s, b, _ = call(port, "POST", "/v1/embeddings", body)
        check(s == status and field in b, f"{body}: {status} naming {field} ({s} {b[:160]})")
    s, b, _ = call(port, "POST", "/v1/embeddings", {"input": "x", "modality": "image"})
    check(s == 400 and "modality" in b, f"Infinity's modality image: 400 naming it ({s} {b[:160]})")
    s, b, _ = call(port, "POST", "/v1/embeddings", {"input": "x", "modality": "text", "task": "retrieval.query"})
    check(s == 400 and "retrieval.query" in b, f"Jina's task naming no prompt of the model: 400 naming it ({s} {b[:160]})")
    for body, field in (({"embed_dtype": "fp8_e4m3"}, "embed_dtype"), ({"endianness": "middle"}, "endianness"),
                        ({"truncation_side": "up"}, "truncation_side")):
        s, b, _ = call(port, "POST", "/v1/embeddings", {"input": "x", **body})
        check(s == 422 and field in b, f"{body}: 422 naming {field} ({s} {b[:160]})")


def main():
    all_fixtures = [json.loads(l) for l in open(os.path.join(SOURCE, "tests", "fixtures", "minilm",
                                                             "embeddings.jsonl"))]
    # Texts sentence-transformers did not have to cut (the others are checked with truncate).
    fixtures = [f for f in all_fixtures if len(f["ids"]) < 256][::6]
    long_fixtures = [f for f in all_fixtures if len(f["ids"]) == 256][:6]
    proc, port, log = start()
    try:
        # Health, readiness, info, metrics.
        check(call(port, "GET", "/health")[0] == 200, "/health 200")
        check(json.loads(call(port, "GET", "/ready")[1])["ready"] is True, "/ready true")
        info = json.loads(call(port, "GET", "/info")[1])
        check(info["max_input_length"] == 256 and info["hidden_size"] == 384, "/info sizes")

        # OpenAI embeddings: vectors equal the reference; base64 equals float exactly.
        texts = [f["text"] for f in fixtures]
        status, body, _ = call(port, "POST", "/v1/embeddings", {"model": "all-MiniLM-L6-v2", "input": texts})
        check(status == 200, f"/v1/embeddings 200 (got {status}: {body[:200]})")
        out = json.loads(body)
        check(len(out["data"]) == len(texts) and [d["index"] for d in out["data"]] == list(range(len(texts))), "data in input order")
        worst = min(cosine(d["embedding"], f["embedding"]) for d, f in zip(out["data"], fixtures))
        print(f"/v1/embeddings: {len(texts)} texts, worst cosine against sentence-transformers {worst:.9f}")
        check(worst >= 0.99999, f"cosine >= 0.99999 (worst {worst})")
        check(out["usage"]["prompt_tokens"] == sum(len(f["ids"]) for f in fixtures), "usage counts tokens")
        b64 = json.loads(call(port, "POST", "/v1/embeddings", {"input": texts, "encoding_format": "base64"})[1])
        for d, f in zip(b64["data"], out["data"]):
            raw = base64.b64decode(d["embedding"])
            check(raw == struct.pack(f"<{len(f['embedding'])}f", *f["embedding"]), "base64 byte-exact")
        i8 = json.loads(call(port, "POST", "/v1/embeddings", {"input": texts[0], "encoding_format": "base64_int8"})[1])
        vals = struct.unpack("<384b", base64.b64decode(i8["data"][0]["embedding"]))
        want = [max(-128, min(127, round(math.tanh(x) * 127))) for x in out["data"][0]["embedding"]]
        check(all(abs(a - b) <= 1 for a, b in zip(vals, want)), "base64_int8 = clamp(round(tanh(x)*127))")
        binary = json.loads(call(port, "POST", "/v1/embeddings", {"input": texts[0], "encoding_format": "base64_binary"})[1])
        bits = base64.b64decode(binary["data"][0]["embedding"])
        check(len(bits) == 48 and all(((bits[j // 8] >> (7 - j % 8)) & 1) == (out["data"][0]["embedding"][j] > 0) for j in range(384)), "base64_binary sign bits")
        vllm_extensions(port, texts, out, fixtures)
        dims = json.loads(call(port, "POST", "/v1/embeddings", {"input": texts[0], "dimensions": 64})[1])
        e = dims["data"][0]["embedding"]
        check(len(e) == 64 and abs(math.sqrt(sum(x * x for x in e)) - 1) < 1e-5, "dimensions: 64 values, unit length")
        cut = json.loads(call(port, "POST", "/v1/embeddings", {"input": [f["text"] for f in long_fixtures], "truncate": True})[1])
        check(min(cosine(d["embedding"], f["embedding"]) for d, f in zip(cut["data"], long_fixtures)) >= 0.99999, "truncate: true matches sentence-transformers' cut")
        ids = json.loads(call(port, "POST", "/v1/embeddings", {"input": [fixtures[0]["ids"], fixtures[1]["ids"]]})[1])
        check(cosine(ids["data"][0]["embedding"], fixtures[0]["embedding"]) >= 0.99999, "token-id input")
        one = json.loads(call(port, "POST", "/v1/embeddings", {"input": fixtures[2]["ids"]})[1])
        check(cosine(one["data"][0]["embedding"], fixtures[2]["embedding"]) >= 0.99999, "single token list input")

        # TEI /embed, /rerank, /v1/score, /tokenize, /decode.
        tei = json.loads(call(port, "POST", "/embed", {"inputs": texts[:3]})[1])
        check(all(cosine(a, f["embedding"]) >= 0.99999 for a, f in zip(tei, fixtures[:3])), "/embed vectors")
        rr = json.loads(call(port, "POST", "/rerank", {"query": "list directory contents", "texts": ["copy files", "list directory contents in long format", "make directories"], "return_text": True})[1])
        check(rr[0]["index"] == 1 and "text" in rr[0] and rr[0]["score"] >= rr[1]["score"] >= rr[2]["score"], "/rerank sorted")
        co = json.loads(call(port, "POST", "/rerank", {"query": "q", "documents": ["a", "b"], "top_n": 1, "return_documents": True})[1])
        check(len(co["results"]) == 1 and "relevance_score" in co["results"][0] and "document" in co["results"][0], "Cohere-style rerank")
        sc = json.loads(call(port, "POST", "/v1/score", {"text_1": "list files", "text_2": ["ls lists files", "mkdir"]})[1])
        check(len(sc["data"]) == 2 and sc["data"][0]["score"] > sc["data"][1]["score"], "/v1/score")
        for first, second in (("queries", "documents"), ("queries", "items"), ("data_1", "data_2")):
            other = json.loads(call(port, "POST", "/score", {first: "list files", second: ["ls lists files", "mkdir"]})[1])
            check(other.get("data") == sc["data"], f"/score with {first} / {second}: as text_1 / text_2 ({str(other)[:160]})")
        tok = json.loads(call(port, "POST", "/tokenize", {"inputs": texts[0]})[1])
        check([t["id"] for t in tok[0]] == fixtures[0]["ids"], "/tokenize ids")
        dec = json.loads(call(port, "POST", "/decode", {"ids": [101, 7592, 2088, 102]})[1])
        check(dec == ["hello world"], f"/decode: a list of strings for one list of ids ({dec!r})")
        dec2 = json.loads(call(port, "POST", "/decode", {"ids": [[101, 7592, 102], [2088]], "skip_special_tokens": False})[1])
        check(dec2 == ["[CLS] hello [SEP]", "world"], f"/decode of two lists ({dec2!r})")

        # Contextualized embeddings (late chunking): one embedding per chunk, documents in order.
        docs = [["ls lists directory contents.", "It sorts entries.", "See also dir."], ["mkdir makes directories."]]
        s, b, _ = call(port, "POST", "/v1/contextualizedembeddings", {"input": docs})
        packed = json.loads(b)["data"][0]["data"][0]["embedding"] if s == 200 else None
        check(isinstance(packed, str) and len(base64.b64decode(packed)) == 384, "contextualized: base64_int8 by default, as Perplexity's API")
        s, b, _ = call(port, "POST", "/v1/contextualizedembeddings", {"input": docs, "encoding_format": "float"})
        check(s == 200, f"/v1/contextualizedembeddings 200 ({s} {b[:160]})")
        if s == 200:
            ce = json.loads(b)
            shapes = [len(d["data"]) for d in ce["data"]]
            check(shapes == [3, 1] and all(len(e["embedding"]) == 384 for d in ce["data"] for e in d["data"]), f"contextualized shapes {shapes}")
            norms = [math.sqrt(sum(x * x for x in e["embedding"])) for d in ce["data"] for e in d["data"]]
            check(all(abs(n - 1) < 1e-5 for n in norms), "contextualized embeddings are normalized like the model's")
            alone = json.loads(call(port, "POST", "/v1/contextualizedembeddings", {"input": [["It sorts entries."]], "encoding_format": "float"})[1])["data"][0]["data"][0]["embedding"]
            check(cosine(alone, ce["data"][0]["data"][1]["embedding"]) < 0.9999, "a chunk's embedding depends on its document")

        # TEI's shapes: /info's Info schema, POST / by model kind, /similarity, /tokenize tokens,
        # normalize: false, error_type values from TEI's enum.
        check(info["model_type"] == {"embedding": {"pooling": "mean"}} and info["max_client_batch_size"] == 2048
              and info["auto_truncate"] is False and isinstance(info["max_batch_tokens"], int)
              and isinstance(info["sha"], str) and isinstance(info["max_batch_requests"], int), f"/info is TEI's Info ({info})")
        root = json.loads(call(port, "POST", "/", {"inputs": texts[0]})[1])
        check(len(root) == 1 and cosine(root[0], fixtures[0]["embedding"]) >= 0.99999, "POST / embeds for an embedding model")
        s, b, _ = call(port, "POST", "/", {"inputs": {"source_sentence": texts[0], "sentences": [texts[0], texts[1]]}})
        sim = json.loads(b) if s == 200 else []
        want = cosine(fixtures[0]["embedding"], fixtures[1]["embedding"])
        check(len(sim) == 2 and abs(sim[0] - 1) < 1e-5 and abs(sim[1] - want) < 1e-4, f"POST / with a similarity body ({s} {b[:120]})")
        sim2 = json.loads(call(port, "POST", "/similarity", {"inputs": {"source_sentence": texts[0], "sentences": [texts[1]]}})[1])
        check(len(sim2) == 1 and abs(sim2[0] - want) < 1e-4, "/similarity")
        raw = json.loads(call(port, "POST", "/embed", {"inputs": texts[0], "normalize": False})[1])[0]
        norm = math.sqrt(sum(x * x for x in raw))
        check(abs(norm - 1) > 1e-3 and cosine(raw, fixtures[0]["embedding"]) >= 0.99999, f"normalize: false gives the raw pooled vector (norm {norm:.3f})")
        tok2 = json.loads(call(port, "POST", "/tokenize", {"inputs": ["hello world", "x"]})[1])
        check(len(tok2) == 2 and tok2[0][0] == {"id": 101, "text": "[CLS]", "special": True, "start": None, "stop": None}
              and tok2[0][1] == {"id": 7592, "text": "hello", "special": False, "start": 0, "stop": 5}, f"/tokenize tokens ({tok2[0][:2]})")
        acc = json.loads(call(port, "POST", "/tokenize", {"inputs": "Café ÉTÉ"})[1])[0]
        check([(t["text"], t["start"], t["stop"]) for t in acc[1:-1]] == [("Café", 0, 5), ("ÉT", 6, 9), ("É", 9, 11)],
              f"/tokenize text is the input's bytes [start, stop), accents and case as sent ({acc})")
        nos = json.loads(call(port, "POST", "/tokenize", {"inputs": "hello", "add_special_tokens": False})[1])
        check([t["id"] for t in nos[0]] == [7592], "/tokenize add_special_tokens: false")
        for path, body in [("/embed", {"inputs": []}), ("/rerank", {"query": "q", "texts": []}),
                           ("/embed", {"inputs": ""}), ("/tokenize", {"inputs": [""]})]:
            s, b, _ = call(port, "POST", path, body)
            check(s == 400 and json.loads(b).get("error_type") == "Empty", f"{path} empty batch: 400 Empty ({s} {b})")
        s, b, _ = call(port, "POST", "/embed", {"inputs": "word " * 600})
        check(s == 413 and json.loads(b).get("error_type") == "Validation", f"/embed over-long: 413 Validation ({s} {b[:100]})")
        s, b, _ = call(port, "POST", "/embed", {"inputs": 5})
        check(s == 422 and json.loads(b).get("error_type") == "Validation" and "inputs" in json.loads(b)["error"], f"/embed bad type: 422 ({s} {b})")

        # OpenAI's models; vLLM's score and rerank carry model and usage; Cohere's embed and rerank.
        models = json.loads(call(port, "GET", "/v1/models")[1])
        check(models["object"] == "list" and models["data"][0]["id"] == "all-MiniLM-L6-v2", "/v1/models")
        one = json.loads(call(port, "GET", "/v1/models/all-MiniLM-L6-v2")[1])
        check({k: one[k] for k in ("id", "object", "created", "owned_by")} == {"id": "all-MiniLM-L6-v2", "object": "model", "created": 0, "owned_by": "quiver"}
              and one["capabilities"] == ["embed"] and one["max_model_len"] == json.loads(call(port, "GET", "/info")[1])["max_input_length"],
              f"/v1/models/{{id}} ({one})")
        check(json.loads(call(port, "GET", "/models")[1])["data"][0]["id"] == "all-MiniLM-L6-v2", "/models (Infinity's)")
        s, b, _ = call(port, "GET", "/v1/models/other")
        check(s == 404 and json.loads(b)["error"]["code"] == "model_not_found", f"/v1/models/other 404 ({s} {b})")
        check(sc["model"] == "all-MiniLM-L6-v2" and sc["usage"]["total_tokens"] > 0 and sc["object"] == "list", "/v1/score has model and usage")
        vr = json.loads(call(port, "POST", "/v1/rerank", {"query": "list directory contents", "documents": ["copy files", "list directory contents in long format"], "top_n": 1})[1])
        check(vr["model"] == "all-MiniLM-L6-v2" and vr["usage"]["total_tokens"] > 0 and len(vr["results"]) == 1
              and vr["results"][0]["index"] == 1 and vr["results"][0]["document"]["text"].startswith("list"), f"/v1/rerank ({vr})")
        every = json.loads(call(port, "POST", "/v1/rerank", {"query": "q", "documents": ["a", "b", "c"], "top_n": 0})[1])
        check(len(every["results"]) == 3, f"/v1/rerank top_n 0: every document, as vLLM reads it ({every})")
        for top_n in (-1, 1.5, "2"):
            s, b, _ = call(port, "POST", "/v1/rerank", {"query": "q", "documents": ["a", "b"], "top_n": top_n})
            check(s == 422 and "top_n" in b, f"/v1/rerank top_n={top_n!r}: 422 naming top_n ({s} {b[:120]})")
        c2 = json.loads(call(port, "POST", "/v2/rerank", {"model": "all-MiniLM-L6-v2", "query": "q", "documents": ["a", "b"], "top_n": 2})[1])
        check(len(c2["results"]) == 2 and all("relevance_score" in r for r in c2["results"]) and isinstance(c2["id"], str), "/v2/rerank")
        # Cohere's max_tokens_per_doc: each document scored on its first N tokens, returned whole.
        long_doc = texts[3]
        pieces = json.loads(call(port, "POST", "/tokenize", {"inputs": long_doc, "add_special_tokens": False})[1])[0]
        head = long_doc.encode()[:pieces[2]["stop"]].decode()
        cut = json.loads(call(port, "POST", "/v2/rerank", {"query": texts[0], "documents": [long_doc, head], "max_tokens_per_doc": 3, "return_documents": True})[1])
        whole = json.loads(call(port, "POST", "/v2/rerank", {"query": texts[0], "documents": [long_doc, head]})[1])
        by_index = lambda answer: {r["index"]: r for r in answer["results"]}
        check(len(pieces) > 3 and by_index(cut)[0]["relevance_score"] == by_index(cut)[1]["relevance_score"]
              == by_index(whole)[1]["relevance_score"] != by_index(whole)[0]["relevance_score"]
              and by_index(cut)[0]["document"]["text"] == long_doc,
              f"/v2/rerank max_tokens_per_doc 3 scores the first 3 tokens ({head!r}) and returns the document whole: {cut} {whole}")
        s, b, _ = call(port, "POST", "/v2/rerank", {"query": "q", "documents": ["a"], "max_tokens_per_doc": 0})
        check(s == 422 and "max_tokens_per_doc" in b, f"/v2/rerank max_tokens_per_doc 0: 422 naming it ({s} {b[:160]})")
        c1 = json.loads(call(port, "POST", "/v1/rerank", {"query": "q", "documents": [{"text": "a"}, {"text": "b"}], "return_documents": False})[1])
        check(len(c1["results"]) == 2 and "document" not in c1["results"][0], "/v1/rerank with Cohere v1 document objects")
        e1 = json.loads(call(port, "POST", "/v1/embed", {"texts": texts[:2], "model": "all-MiniLM-L6-v2", "input_type": "search_document"})[1])
        check(e1["response_type"] == "embeddings_floats" and len(e1["embeddings"]) == 2
              and cosine(e1["embeddings"][0], fixtures[0]["embedding"]) >= 0.99999 and e1["texts"] == texts[:2]
              and isinstance(e1["meta"]["billed_units"], dict), "/v1/embed floats")
        # Cohere v2's max_tokens: the first (START: the last) tokens, as truncate_prompt_tokens.
        for truncate, side in (("END", "right"), ("START", "left")):
            c = json.loads(call(port, "POST", "/v2/embed", {"texts": [texts[3]], "model": "all-MiniLM-L6-v2", "input_type": "search_document", "max_tokens": 4, "truncate": truncate})[1])
            o = json.loads(call(port, "POST", "/v1/embeddings", {"input": texts[3], "truncate_prompt_tokens": 4, "truncation_side": side})[1])
            full = json.loads(call(port, "POST", "/v1/embeddings", {"input": texts[3]})[1])
            check(c["embeddings"]["float"][0] == o["data"][0]["embedding"] != full["data"][0]["embedding"],
                  f"/v2/embed max_tokens 4, truncate {truncate}: as truncate_prompt_tokens 4 from the {side}")
        s, b, _ = call(port, "POST", "/v2/embed", {"texts": [texts[3]], "model": "all-MiniLM-L6-v2", "input_type": "search_document", "max_tokens": 4, "truncate": "NONE"})
        check(s == 400 and "at most 4" in b, f"/v2/embed max_tokens 4, truncate NONE: a longer text refused ({s} {b[:200]})")
        c = json.loads(call(port, "POST", "/v2/embed", {"texts": [texts[3]], "model": "all-MiniLM-L6-v2", "input_type": "search_document", "max_tokens": 100000})[1])
        check(c["embeddings"]["float"][0] == full["data"][0]["embedding"], "/v2/embed max_tokens above the model's limit: the model's limit")
        s, b, _ = call(port, "POST", "/v2/embed", {"images": ["data:image/png;base64,AAAA"], "model": "all-MiniLM-L6-v2", "input_type": "image"})
        check(s == 400 and "images" in b, f"/v2/embed of images: 400 naming the field ({s} {b[:200]})")
        e2 = json.loads(call(port, "POST", "/v2/embed", {"texts": texts[:1], "model": "all-MiniLM-L6-v2", "input_type": "search_query", "embedding_types": ["float", "int8", "uint8", "ubinary", "binary"]})[1])
        emb = e2["embeddings"]
        want_i8 = [max(-128, min(127, round(math.tanh(x) * 127))) for x in emb["float"][0]]
        check(e2["response_type"] == "embeddings_by_type" and set(emb) == {"float", "int8", "uint8", "binary", "ubinary"}
              and all(abs(a - b) <= 1 for a, b in zip(emb["int8"][0], want_i8))
              and [v - 128 for v in emb["uint8"][0]] == emb["int8"][0]
              and len(emb["ubinary"][0]) == 48 and [v - 128 for v in emb["ubinary"][0]] == emb["binary"][0]
              and all(((emb["ubinary"][0][j // 8] >> (7 - j % 8)) & 1) == (emb["float"][0][j] > 0) for j in range(384)),
              "/v2/embed by type")
        s, b, _ = call(port, "POST", "/v2/embed", {"texts": ["word " * 600], "truncate": "NONE"})
        check(s == 400 and "message" in json.loads(b), f"Cohere truncate NONE refuses an over-long text, Cohere's error shape ({s} {b[:100]})")
        s, b, _ = call(port, "POST", "/v2/embed", {"texts": ["word " * 600]})
        check(s == 200, "Cohere's default truncate END cuts it")

        # Routing: 405 with Allow; unknown paths share one metrics label, values escaped.
        def metric(text, line_start):
            found = [l for l in text.splitlines() if l.startswith(line_start + " ")]
            return float(found[0].split()[-1]) if found else 0.0
        count_400 = 'quiver_http_requests_total{endpoint="/embed",status="400"}'
        count_200 = 'quiver_http_requests_total{endpoint="/embed",status="200"}'
        seconds_count = 'quiver_http_request_seconds_count{endpoint="/embed"}'
        before = call(port, "GET", "/metrics")[1]
        for _ in range(3):
            call(port, "POST", "/embed", None, raw=b"{not json")
        call(port, "POST", "/embed", {"inputs": "counted"})
        after = call(port, "GET", "/metrics")[1]
        check(metric(after, count_400) - metric(before, count_400) == 3
              and metric(after, count_200) - metric(before, count_200) == 1
              and metric(after, seconds_count) - metric(before, seconds_count) == 4,
              "each request counted once by route and status, and timed once by route")
        count_405 = 'quiver_http_requests_total{endpoint="/embed",status="405"}'
        s, b, h = call(port, "GET", "/embed")
        check(s == 405 and h.get("Allow") == "POST", f"GET /embed: 405 Allow: POST ({s} {h.get('Allow')})")
        check(metric(call(port, "GET", "/metrics")[1], count_405) - metric(after, count_405) == 1,
              "a 405 is counted under its path's route")
        for i in range(5):
            call(port, "GET", f'/a"b{i}')
        metrics = call(port, "GET", "/metrics")[1]
        endpoints = set(re.findall(r'quiver_http_requests_total\{endpoint="((?:[^"\\]|\\.)*)"', metrics))
        check('a\\"b' not in metrics and "unmatched" in endpoints and all(not e.startswith("/a") for e in endpoints),
              f"metrics labels come from the route table ({sorted(endpoints)})")
        doc = json.loads(call(port, "GET", "/openapi.json")[1])
        check(doc["openapi"].startswith("3.1") and "/v1/embeddings" in doc["paths"] and "/v2/rerank" in doc["paths"], "/openapi.json")
        log_text = open(log).read()
        check("ready on http://" in log_text, "a log line when ready")

        # Errors: status and a message naming the field or limit.
        def err(path, body, status, needle, raw=None):
            s, b, h = call(port, "POST", path, body, raw=raw)
            check(s == status and needle in b, f"{path} {body!s:.60} -> {s} {b[:160]}")
            return h
        err("/v1/embeddings", None, 400, "malformed JSON", raw=b"{nope")
        err("/v1/contextualizedembeddings", {"input": ["not a list"]}, 422, "input[0]")
        err("/v1/contextualizedembeddings", {"input": [["word " * 200, "word " * 200]]}, 400, "document 0")

        err("/v1/embeddings", {"input": 3}, 422, "input")
        err("/v1/embeddings", {}, 422, "missing field 'input'")
        err("/v1/embeddings", {"input": [[101, 999999, 102]]}, 400, "outside the vocabulary")
        err("/v1/embeddings", {"input": [[101, -5]]}, 422, "not a valid id")
        err("/v1/embeddings", {"input": "x", "model": "other"}, 404, "not served here")
        err("/v1/embeddings", {"input": "x", "encoding_format": "hex"}, 422, "encoding_format")
        err("/v1/embeddings", {"input": "x", "dimensions": 999}, 400, "dimensions")
        # Over-long input and too many inputs: 400 invalid_request_error as OpenAI answers (its
        # SDK raises BadRequestError), the message naming the input, the limit and the way out.
        s, b, _ = call(port, "POST", "/v1/embeddings", {"input": ["x", "word " * 600]})
        e = json.loads(b).get("error", {}) if s == 400 else {}
        check(s == 400 and e.get("type") == "invalid_request_error" and "input 1" in e.get("message", "")
              and "at most 256" in e["message"] and "--auto-truncate" in e["message"] and e.get("param") == "input",
              f"over-long input: OpenAI 400 ({s} {b[:200]})")
        err("/v1/embeddings", {"input": ["x"] * 3000}, 400, "at most 2048")
        err("/embed", {"inputs": "word " * 600, "truncate": False}, 413, "input 0")
        s, b, _ = call(port, "POST", "/embed", {"inputs": "word " * 600, "truncate": True})
        check(s == 200 and len(json.loads(b)[0]) == 384, "truncate: true embeds a long input")
        err("/embed", {"inputs": "x", "truncation_direction": "Up"}, 422, "truncation_direction")
        err("/rerank", {"query": "q"}, 422, "texts")
        err("/nowhere", {}, 404, "no route")
        # An oversized body is refused from its Content-Length, before it is read.
        import socket
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            sock.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 9437184\r\n\r\n")
            reply = sock.recv(4096).decode(errors="replace")
        check(reply.startswith("HTTP/1.1 413") and "bytes" in reply, f"413 for a 9 MiB body: {reply[:120]}")
        # That refusal in each route's own error shape, as the API's other errors are (TEI's
        # clients read error_type, Cohere's read message).
        def refusal_body(path):
            with socket.create_connection(("127.0.0.1", port), timeout=30) as raw:
                raw.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                            f"Content-Length: 9437184\r\n\r\n".encode())
                data = b""
                while True:
                    chunk = raw.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            head, _, body = data.decode(errors="replace").partition("\r\n\r\n")
            return head.split(" ")[1] if " " in head else "", json.loads(body or "{}")
        code, body = refusal_body("/embed")
        check(code == "413" and body.get("error_type") == "Validation" and "bytes" in body.get("error", ""),
              f"a transport-level 413 on a TEI route: TEI's error shape ({code} {body})")
        code, body = refusal_body("/v2/embed")
        check(code == "413" and set(body) == {"message"} and "bytes" in body["message"],
              f"a transport-level 413 on a Cohere route: Cohere's error shape ({code} {body})")
        code, body = refusal_body("/v1/embeddings")
        check(code == "413" and "bytes" in body.get("error", {}).get("message", ""),
              f"a transport-level 413 on an OpenAI route: OpenAI's error shape ({code} {body})")
        # A large answer to a client that reads slowly arrives whole (the part the socket does
        # not take at once is written later), and the connection stays usable.
        def read_answer(sock):
            data = b""
            while b"\r\n\r\n" not in data:
                data += sock.recv(65536)
            head, body = data.split(b"\r\n\r\n", 1)
            length = int(re.search(rb"content-length: *(\d+)", head, re.I).group(1))
            while len(body) < length:
                body += sock.recv(65536)
            return head.split(b" ")[1], body
        many = json.dumps({"input": [f"text number {i}" for i in range(2000)]}).encode()
        with socket.socket() as sock:
            sock.settimeout(60)
            sock.connect(("127.0.0.1", port))
            for attempt in range(2):
                sock.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n\r\n" % len(many) + many)
                time.sleep(0.5)
                code, body = read_answer(sock)
                rows = json.loads(body)["data"] if code == b"200" else []
                check(len(body) > 8_000_000 and len(rows) == 2000 and all(len(r["embedding"]) == 384 for r in rows),
                      f"an 8 MB answer to a slow reader arrives whole (request {attempt + 1} on one connection)")
        err("/v1/embeddings", None, 400, "UTF-8", raw=b'{"input": "bad \xff byte"}')
        metrics = call(port, "GET", "/metrics")[1]
        s, b, h = call(port, "OPTIONS", "/v1/embeddings", headers={"Origin": "https://app.example",
                                                                    "Access-Control-Request-Method": "POST"})
        check(s == 405 and "Access-Control-Allow-Origin" not in h, f"no CORS unless asked for: OPTIONS is 405 ({s})")
        check("quiver_http_requests_total" in metrics and "quiver_http_tokenize_seconds_bucket" in metrics and "quiver_scheduler_batch_tokens" in metrics, "/metrics")
    finally:
        proc.send_signal(signal.SIGTERM)
        check(proc.wait(timeout=30) == 0, "exit 0 on SIGTERM")

    # --auto-truncate: over-long inputs are cut unless a request says "truncate": false.
    proc, port, log = start(["--auto-truncate", "--access-log"])
    try:
        cut = json.loads(call(port, "POST", "/v1/embeddings", {"input": [f["text"] for f in long_fixtures]})[1])
        check(min(cosine(d["embedding"], f["embedding"]) for d, f in zip(cut["data"], long_fixtures)) >= 0.99999, "--auto-truncate matches sentence-transformers' cut")
        check(json.loads(call(port, "GET", "/info")[1])["auto_truncate"] is True, "/info auto_truncate")
        # Threads named by role (top -H, perf, gdb), every one but the main thread.
        names = [open(f"/proc/{proc.pid}/task/{t}/comm").read().strip()
                 for t in os.listdir(f"/proc/{proc.pid}/task")]
        check(names.count("quiver") == 1 and {"quiver-compute", "quiver-http-io", "quiver-http-0"} <= set(names)
              and all(re.fullmatch(r"quiver(-compute|-http-io|-http-\d+|-pool-\d+)?", n) for n in names),
              f"threads named by role: {sorted(set(names))}")
        s, b, _ = call(port, "POST", "/embed", {"inputs": "word " * 600, "truncate": False})
        check(s == 413, "truncate: false still refuses under --auto-truncate")
        s, b, _ = call(port, "POST", "/rerank", {"query": "q", "texts": ["word " * 600]})
        check(s == 200, "rerank cuts under --auto-truncate")
        check(re.search(r" access method=POST route=/v1/embeddings status=200 bytes=\d+ duration_ms=[0-9.]+ request_id=[0-9a-f]{32}\n",
                        open(log).read()) is not None, "--access-log writes a line per request")
    finally:
        proc.send_signal(signal.SIGTERM)
        check(proc.wait(timeout=30) == 0, "exit 0 on SIGTERM (auto-truncate)")

    # --log-format json (here through its environment variable): every line of the log is one JSON
    # object, the access log's values in their own keys.
    # Every answer carries X-Request-Id: the client's when it is a plain token, else a new one.
    proc, port, log = start(["--access-log"], env={"QUIVER_LOG_FORMAT": "json"})
    try:
        s, _, h = call(port, "POST", "/v1/embeddings", {"input": "ok"}, headers={"X-Request-Id": "client-42"})
        check(s == 200 and h.get("X-Request-Id") == "client-42", f"X-Request-Id echoed: {h.get('X-Request-Id')}")
        s, _, h = call(port, "POST", "/embed", {"inputs": "word " * 600}, headers={"X-Request-Id": "x" * 200})
        made = h.get("X-Request-Id", "")
        check(s == 413 and re.fullmatch(r"[0-9a-f]{32}", made) is not None,
              f"an over-long X-Request-Id is replaced by a new one, errors included ({made!r})")
        other = call(port, "GET", "/health")[2].get("X-Request-Id", "")
        check(re.fullmatch(r"[0-9a-f]{32}", other) is not None and other != made, "a new id per request")
    finally:
        proc.send_signal(signal.SIGTERM)
        check(proc.wait(timeout=30) == 0, "exit 0 on SIGTERM (json logs)")
    records = []
    for line in open(log).read().splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            check(False, f"--log-format json: a line that is not JSON: {line!r}")
    check(records and all({"timestamp", "level", "logger", "thread", "message"} <= r.keys() and
                          r["timestamp"].endswith("Z") for r in records), "json log records have their keys")
    check(any("ready on http://127.0.0.1:" in r["message"] for r in records), "json log: the start-up lines")
    access = [r for r in records if r["message"] == "access" and r["route"] != "/ready"]
    access = [r for r in access if r["route"] != "/health"]
    check([(r["method"], r["route"], r["status"], r["request_id"]) for r in access] ==
          [("POST", "/v1/embeddings", 200, "client-42"), ("POST", "/embed", 413, made)] and
          all(isinstance(r["bytes"], int) and isinstance(r["duration_ms"], (int, float)) for r in access),
          "json access records: method, route, status, bytes, duration_ms, request_id")

    # --pooling cls on a mean-pooling folder: /info says so, and each embedding is the CLS row of
    # /embed_all (the encoder's last hidden state, checked against sentence-transformers by
    # embed_all_test.py) normalized as the folder's Normalize module does.
    proc, port, log = start(["--pooling", "cls"])
    try:
        info = json.loads(call(port, "GET", "/info")[1])
        check(info["model_type"] == {"embedding": {"pooling": "cls"}}, f"--pooling cls in /info: {info['model_type']}")
        texts = ["how to list open files", "set the system clock from the hardware clock"]
        emb = json.loads(call(port, "POST", "/embed", {"inputs": texts})[1])
        rows = json.loads(call(port, "POST", "/embed_all", {"inputs": texts})[1])
        for e, r in zip(emb, rows):
            norm = math.sqrt(sum(x * x for x in r[0]))
            check(max(abs(a - b / norm) for a, b in zip(e, r[0])) < 1e-6, "--pooling cls: the CLS row, normalized")
    finally:
        proc.send_signal(signal.SIGTERM)
        check(proc.wait(timeout=30) == 0, "exit 0 on SIGTERM (pooling)")
    bad = subprocess.run([QUIVER, "serve", "--model", MODEL, "--port", "0", "--pooling", "first"],
                         capture_output=True, text=True, timeout=60)
    check(bad.returncode != 0 and "--pooling" in bad.stderr, f"an unknown --pooling is refused ({bad.stderr[-200:]})")
    cross = os.path.join(SOURCE, "tests", "fixtures", "tiny", "bert_cross_encoder")
    bad = subprocess.run([QUIVER, "serve", "--model", cross, "--port", "0", "--pooling", "cls"],
                         capture_output=True, text=True, timeout=60)
    check(bad.returncode != 0 and "--pooling applies to embedding models" in bad.stderr,
          f"--pooling on a cross-encoder is refused ({bad.stderr[-200:]})")

    # TEI's and vLLM's names for the same flags: --model-id, --served-model-name,
    # --max-client-batch-size, --payload-limit, --max-model-len.
    proc, port, log = start_serve(QUIVER, MODEL, ["--served-model-name", "tei/alias", "--max-client-batch-size", "2",
                                                  "--payload-limit", "4096", "--max-model-len", "64"],
                                  model_flag="--model-id")
    try:
        info = json.loads(call(port, "GET", "/info")[1])
        check(info["model_id"] == "tei/alias" and info["max_client_batch_size"] == 2 and info["max_input_length"] == 64,
              f"TEI's and vLLM's flag names: {str(info)[:300]}")
        s, b, _ = call(port, "POST", "/embed", {"inputs": ["a", "b", "c"]})
        check(s == 413 and "--max-inputs" in b, f"--max-client-batch-size 2: three inputs refused ({s} {b[:160]})")
        s, b, _ = call(port, "POST", "/embed", {"inputs": "x" * 5000})
        check(s == 413, f"--payload-limit 4096: a larger body refused ({s} {b[:160]})")
    finally:
        proc.send_signal(signal.SIGTERM)
        check(proc.wait(timeout=30) == 0, "exit 0 on SIGTERM (flag aliases)")

    # --cors-allow-origin: browsers on the listed origins may call; their preflights need no key.
    proc, port, log = start(["--api-key", "k3y", "--cors-allow-origin", "https://app.example,http://localhost:3000"])
    try:
        ask = {"Origin": "https://app.example", "Access-Control-Request-Method": "POST",
               "Access-Control-Request-Headers": "authorization, content-type"}
        s, b, h = call(port, "OPTIONS", "/v1/embeddings", headers=ask)
        check(s == 204 and h.get("Access-Control-Allow-Origin") == "https://app.example" and
              h.get("Access-Control-Allow-Methods") == "POST" and
              "authorization" in h.get("Access-Control-Allow-Headers", "") and
              h.get("Access-Control-Max-Age") == "600", f"CORS preflight without the key: {s} {h}")
        s, b, h = call(port, "OPTIONS", "/v1/embeddings", headers={**ask, "Origin": "https://evil.example"})
        check(s == 403 and "--cors-allow-origin" in b and "Access-Control-Allow-Origin" not in h,
              f"CORS preflight from an origin not listed: 403 naming the flag ({s} {b})")
        s, b, h = call(port, "OPTIONS", "/nowhere", headers=ask)
        check(s == 404, f"CORS preflight for a path with no route: 404 ({s})")
        s, b, h = call(port, "POST", "/v1/embeddings", {"input": "x"},
                       headers={"Origin": "http://localhost:3000", "Authorization": "Bearer k3y"})
        check(s == 200 and h.get("Access-Control-Allow-Origin") == "http://localhost:3000" and
              h.get("Vary") == "Origin", f"CORS: an allowed origin's answer says so ({s} {h})")
        s, b, h = call(port, "POST", "/v1/embeddings", {"input": "x"}, headers={"Origin": "http://localhost:3000"})
        check(s == 401 and h.get("Access-Control-Allow-Origin") == "http://localhost:3000",
              f"CORS: a 401 (answered before the body) readable by the page ({s} {h})")
        s, b, h = call(port, "GET", "/health", headers={"Origin": "https://evil.example"})
        check(s == 200 and "Access-Control-Allow-Origin" not in h, "CORS: no allowance for other origins")
        # The server's own refusal before the body (a declared length over --max-body-bytes)
        # carries them too, so the page reads its 413.
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            raw.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nOrigin: https://app.example\r\n"
                        b"Content-Type: application/json\r\nContent-Length: 90000000\r\n\r\n")
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = raw.recv(4096)
                if not chunk:
                    break
                head += chunk
        head = head.decode(errors="replace")
        check(head.startswith("HTTP/1.1 413") and "Access-Control-Allow-Origin: https://app.example" in head
              and re.search(r"X-Request-Id: [0-9a-f]{32}", head) is not None,
              f"a transport-level 413 carries CORS and X-Request-Id: {head[:300]!r}")
    finally:
        proc.send_signal(signal.SIGTERM)
        check(proc.wait(timeout=30) == 0, "exit 0 on SIGTERM (cors)")
    bad = subprocess.run([QUIVER, "serve", "--model", MODEL, "--port", "0", "--cors-allow-origin",
                          "https://app.example/"], capture_output=True, text=True, timeout=60)
    check(bad.returncode == 2 and "--cors-allow-origin: 'https://app.example/'" in bad.stderr,
          f"a trailing slash in --cors-allow-origin is refused at start ({bad.returncode} {bad.stderr[-300:]})")

    # Authentication and overload.
    proc, port, log = start(["--api-key", "s3cret", "--max-queued-tokens", "8192", "--max-batch-tokens", "8192",
                             "--model-name", "org/mini-lm"])
    try:
        s, b, _ = call(port, "POST", "/v1/embeddings", {"input": "x"})
        check(s == 401 and "API key" in b, "401 without key")
        s, b, _ = call(port, "POST", "/v1/embeddings", {"input": "x"}, headers={"Authorization": "Bearer s3cret"})
        check(s == 200, "200 with key")
        s, b, _ = call(port, "POST", "/v1/embeddings", {"input": "x"}, headers={"Authorization": "bearer s3cret"})
        check(s == 200, "the scheme in any case")
        s, b, _ = call(port, "POST", "/v1/embeddings", {"input": "x"}, headers={"Authorization": "Bearer s3cre"})
        check(s == 401, "401 with a wrong key")
        s, b, _ = call(port, "GET", "/v1/models/org/mini-lm", headers={"Authorization": "Bearer s3cret"})
        check(s == 200 and json.loads(b)["id"] == "org/mini-lm", f"/v1/models/{{id}} with a slash in the id ({s} {b})")
        check(call(port, "GET", "/health")[0] == 200, "/health needs no key")
    finally:
        proc.send_signal(signal.SIGTERM)
        check(proc.wait(timeout=30) == 0, "exit 0 on SIGTERM (auth)")
    # Overload: a tiny queue refuses at once with 429 and Retry-After what would fit later, and
    # with 413 naming the limit what never can.
    proc, port, log = start(["--max-batch-tokens", "256", "--max-queued-tokens", "256"])
    try:
        import concurrent.futures
        text = " ".join(["directory"] * 100)
        never = call(port, "POST", "/v1/embeddings", {"input": [text] * 6})
        check(never[0] == 413 and "--max-queued-tokens" in never[1],
              f"a request larger than the queue is 413 ({never[0]} {never[1][:200]})")
        with concurrent.futures.ThreadPoolExecutor(12) as pool:
            replies = list(pool.map(lambda _: call(port, "POST", "/v1/embeddings", {"input": [text] * 2}), range(12)))
        codes = [r[0] for r in replies]
        over = [r for r in replies if r[0] == 429]
        check(set(codes) <= {200, 429} and over, f"overload gives 429 (codes {codes})")
        check(all(r[2].get("Retry-After") == "1" and "max_queued_tokens" in r[1] for r in over), "429 carries Retry-After and names the limit")
        check(call(port, "POST", "/v1/embeddings", {"input": text})[0] == 200, "a retry succeeds")
    finally:
        proc.send_signal(signal.SIGTERM)
        check(proc.wait(timeout=30) == 0, "exit 0 on SIGTERM (overload)")
    if FAILURES:
        print(f"http api test: {len(FAILURES)} check(s) failed")
        sys.exit(1)
    print("http api test: all checks passed")


if __name__ == "__main__":
    main()
