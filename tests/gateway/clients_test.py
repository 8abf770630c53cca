#!/usr/bin/env python3
"""The client libraries people already use, unchanged but for base URL and key, against a live
`quiver serve --auto-truncate --api-key KEY`: each one's vectors and scores must equal a direct
HTTP call to the same server (and the direct call equals sentence-transformers, checked in
http_api_test.py).

    .venv/bin/python clients_test.py QUIVER_BINARY SOURCE_DIR

Clients (pinned in scripts/requirements-test.txt): openai, huggingface_hub's InferenceClient
(feature_extraction, sentence_similarity), cohere (Client and ClientV2: embed and rerank),
langchain-openai (OpenAIEmbeddings with check_embedding_ctx_length=False, chunks longer than the
model accepts, cut by the server's --auto-truncate) and tei-client.
"""

import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

# No client may reach out to a hub or telemetry endpoint: only the server on loopback.
os.environ.update({"HF_HUB_DISABLE_TELEMETRY": "1", "NO_PROXY": "127.0.0.1,localhost",
                   "no_proxy": "127.0.0.1,localhost"})

from serving import wait_for
from serving import start as start_serve

QUIVER, SOURCE = sys.argv[1], sys.argv[2]
MODEL_DIR = os.path.join(SOURCE, "models", "all-MiniLM-L6-v2")
MODEL = "all-MiniLM-L6-v2"
KEY = "client-test-key"
FAILURES = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILURES.append(what)


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def close(a, b, tol=1e-6):
    return len(a) == len(b) and all(abs(x - y) <= tol for x, y in zip(a, b))


def start():
    proc, port, _ = start_serve(QUIVER, MODEL_DIR, ["--api-key", KEY, "--auto-truncate"], "quiver-clients-")
    return proc, port


def start_gateway_and_worker(model_dir):
    """`quiver worker` on a free port and `quiver gateway --api-key KEY` in front of it, once the
    gateway answers /ready: (worker, gateway, the gateway's port)."""
    wlog = tempfile.NamedTemporaryFile(prefix="quiver-clients-worker-", delete=False).name
    worker = subprocess.Popen([QUIVER, "worker", "--model", model_dir, "--listen", "127.0.0.1:0",
                               "--metrics-port", "-1", "--threads", "1"],
                              stderr=open(wlog, "w"), stdout=subprocess.DEVNULL)
    wport = int(wait_for(r" port=(\d+) ", wlog, worker).group(1))
    glog = tempfile.NamedTemporaryFile(prefix="quiver-clients-gateway-", delete=False).name
    gateway = subprocess.Popen([QUIVER, "gateway", "--model", model_dir, "--host", "127.0.0.1", "--port", "0",
                                "--workers", f"127.0.0.1:{wport}", "--api-key", KEY],
                               stderr=open(glog, "w"), stdout=subprocess.DEVNULL)
    gport = int(wait_for(r" port=(\d+) ", glog, gateway).group(1))
    for _ in range(300):
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{gport}/ready", timeout=5).status == 200:
                return worker, gateway, gport
        except OSError:
            pass
        time.sleep(0.1)
    sys.exit("quiver gateway did not become ready in 30 s: " + open(glog).read())


def direct(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def main():
    fixtures = [json.loads(l) for l in open(os.path.join(SOURCE, "tests", "fixtures", "minilm", "embeddings.jsonl"))]
    texts = [f["text"] for f in fixtures if len(f["ids"]) < 256][:8]
    long_texts = [f["text"] for f in fixtures if len(f["ids"]) == 256][:3]
    check(len(texts) == 8 and len(long_texts) == 3, "fixture texts")
    proc, port = start()
    base = f"http://127.0.0.1:{port}"
    try:
        want = [d["embedding"] for d in direct(port, "/v1/embeddings", {"input": texts, "encoding_format": "float"})["data"]]

        # openai: embeddings (its default asks for base64 and decodes it), and an over-long input
        # raises BadRequestError even with the server's auto-truncate off for it (truncate false).
        import openai
        client = openai.OpenAI(base_url=f"{base}/v1", api_key=KEY)
        got = [d.embedding for d in client.embeddings.create(model=MODEL, input=texts).data]
        check(all(close(a, b) for a, b in zip(got, want)), "openai: embeddings.create equals the direct call")
        try:
            client.embeddings.create(model=MODEL, input=[long_texts[0] * 3], extra_body={"truncate": False})
            check(False, "openai: over-long input raises BadRequestError")
        except openai.BadRequestError as e:
            check("256" in str(e), f"openai: over-long input raises BadRequestError naming the limit ({str(e)[:120]})")
        check(client.models.retrieve(MODEL).id == MODEL, "openai: models.retrieve")

        # huggingface_hub's InferenceClient against the server's URL: feature_extraction posts to
        # POST / ({"inputs": ...}), sentence_similarity too ({"inputs": {source_sentence, ...}}).
        from huggingface_hub import InferenceClient
        hf = InferenceClient(model=base, token=KEY)
        fe = hf.feature_extraction(texts[0])
        check(close([float(x) for x in fe.reshape(-1)], want[0], 1e-6), f"huggingface_hub: feature_extraction equals the direct call (shape {fe.shape})")
        sims = hf.sentence_similarity(texts[0], other_sentences=texts[1:4])
        want_sims = direct(port, "/similarity", {"inputs": {"source_sentence": texts[0], "sentences": texts[1:4]}})
        check(close(list(sims), want_sims, 1e-6) and abs(sims[0] - cosine(want[0], want[1])) < 1e-5,
              "huggingface_hub: sentence_similarity equals /similarity and the cosine of the embeddings")

        # cohere: v1 Client and v2 ClientV2, embed and rerank.
        import cohere
        query, docs = "list directory contents", ["copy files and directories", "list directory contents in long format", "make directories"]
        want_rr = direct(port, "/v1/rerank", {"query": query, "documents": docs})["results"]
        co = cohere.Client(api_key=KEY, base_url=base)
        e1 = co.embed(texts=texts, model=MODEL, input_type="search_document")
        check(all(close(a, b) for a, b in zip(e1.embeddings, want)), "cohere Client: embed equals the direct call")
        r1 = co.rerank(query=query, documents=docs, model=MODEL, top_n=2)
        check([r.index for r in r1.results] == [r["index"] for r in want_rr[:2]]
              and all(abs(r.relevance_score - w["relevance_score"]) < 1e-6 for r, w in zip(r1.results, want_rr)),
              "cohere Client: rerank equals the direct call, top_n 2")
        r1d = co.rerank(query=query, documents=[{"text": d} for d in docs], model=MODEL, return_documents=True)
        check(len(r1d.results) == 3 and r1d.results[0].document.text == docs[r1d.results[0].index], "cohere Client: rerank of document objects")
        co2 = cohere.ClientV2(api_key=KEY, base_url=base)
        e2 = co2.embed(texts=texts[:3], model=MODEL, input_type="search_query", embedding_types=["float", "int8"])
        check(all(close(a, b) for a, b in zip(e2.embeddings.float_, want[:3])) and len(e2.embeddings.int8[0]) == 384,
              "cohere ClientV2: embed by type (float equals the direct call, int8 present)")
        r2 = co2.rerank(model=MODEL, query=query, documents=docs)
        check([r.index for r in r2.results] == [r["index"] for r in want_rr]
              and all(abs(r.relevance_score - w["relevance_score"]) < 1e-6 for r, w in zip(r2.results, want_rr)),
              "cohere ClientV2: rerank equals the direct call")

        # langchain-openai with its defaults but the context-length check (it would tokenize
        # with tiktoken, which needs a download): chunks longer than the model accepts, cut by
        # the server's --auto-truncate.
        from langchain_openai import OpenAIEmbeddings
        lc = OpenAIEmbeddings(model=MODEL, base_url=f"{base}/v1", api_key=KEY, check_embedding_ctx_length=False)
        long_docs = [t * 2 for t in long_texts]
        got_lc = lc.embed_documents(long_docs)
        want_lc = [d["embedding"] for d in direct(port, "/v1/embeddings", {"input": long_docs, "truncate": True, "encoding_format": "float"})["data"]]
        check(len(got_lc) == 3 and all(close(a, b) for a, b in zip(got_lc, want_lc)), "langchain-openai: long chunks embedded, cut as truncate: true cuts them")
        check(close(lc.embed_query(texts[0]), want[0]), "langchain-openai: embed_query equals the direct call")

        # tei-client: info (TEI's Info schema), embed, rerank, tokenize, decode.
        from tei_client import HttpClient
        tei = HttpClient(base, headers={"Authorization": f"Bearer {KEY}"})
        info = tei.info()
        check(info.server_model_id == MODEL and info.max_input_length == 256, "tei-client: info parses")
        got_tei = tei.embed(texts)
        want_tei = direct(port, "/embed", {"inputs": texts})
        check(all(close(a, b) for a, b in zip(got_tei, want_tei)) and all(close(a, b) for a, b in zip(got_tei, want)),
              "tei-client: embed equals /embed and /v1/embeddings")
        toks = tei.tokenize("hello world")
        check([t.id for t in toks[0].tokens] == [101, 7592, 2088, 102] and toks[0].tokens[0].special, "tei-client: tokenize")
        check(tei.decode([101, 7592, 2088, 102]) == ["hello world"], "tei-client: decode")
    finally:
        proc.send_signal(signal.SIGTERM)
        check(proc.wait(timeout=30) == 0, "exit 0 on SIGTERM")

    # A reranker (the tiny seeded cross-encoder): tei-client's rerank (it asks /info for a
    # reranker first), Cohere's, and the raw scores against transformers' logits.
    global MODEL_DIR
    MODEL_DIR = os.path.join(SOURCE, "tests", "fixtures", "tiny", "bert_cross_encoder")
    refs = [json.loads(l) for l in open(os.path.join(MODEL_DIR, "reference.jsonl"))][:6]
    proc, port = start()
    base = f"http://127.0.0.1:{port}"
    try:
        query = refs[0]["text"]
        docs = [r["text_pair"] for r in refs if r["text"] == query] or [refs[0]["text_pair"]]
        raw = direct(port, "/rerank", {"query": refs[0]["text"], "texts": [refs[0]["text_pair"]], "raw_scores": True})
        scale = max(1.0, abs(refs[0]["output"][0]))
        check(abs(raw[0]["score"] - refs[0]["output"][0]) <= 1e-4 * scale, f"raw_scores equal transformers' logit ({raw[0]['score']} vs {refs[0]['output'][0]})")
        pairs_docs = [r["text_pair"] for r in refs]
        from tei_client import HttpClient
        tei = HttpClient(base, headers={"Authorization": f"Bearer {KEY}"})
        check(tei.info().server_model_type.value == "reranker", "tei-client: /info says reranker")
        rr = tei.rerank(query, pairs_docs, return_text=True).ranks
        want_tei_rr = direct(port, "/rerank", {"query": query, "texts": pairs_docs})
        check([r.index for r in rr] == [r["index"] for r in want_tei_rr]
              and all(abs(r.score - w["score"]) < 1e-6 for r, w in zip(rr, want_tei_rr))
              and rr[0].text == pairs_docs[rr[0].index], "tei-client: rerank equals /rerank")
        root = direct(port, "/", {"query": query, "texts": pairs_docs})
        check(root == want_tei_rr, "POST / reranks for a reranker, as TEI routes it")
        import cohere
        co2 = cohere.ClientV2(api_key=KEY, base_url=base)
        r2 = co2.rerank(model="bert_cross_encoder", query=query, documents=pairs_docs, top_n=3)
        check([r.index for r in r2.results] == [r["index"] for r in want_tei_rr[:3]]
              and all(abs(r.relevance_score - w["score"]) < 1e-6 for r, w in zip(r2.results, want_tei_rr)),
              "cohere ClientV2: rerank on a cross-encoder equals TEI's /rerank")
    finally:
        proc.send_signal(signal.SIGTERM)
        check(proc.wait(timeout=30) == 0, "exit 0 on SIGTERM (reranker)")
    # The Qwen3 yes/no reranker: the gateway builds its prompt (prefix, middle with the query and
    # the document, suffix, each tokenized on its own) and its raw score equals transformers'
    # logit(yes) - logit(no) for the same pair; over-long pairs are cut or refused.
    MODEL_DIR = os.path.join(SOURCE, "tests", "fixtures", "tiny", "qwen3_reranker")
    refs = [json.loads(l) for l in open(os.path.join(MODEL_DIR, "reference.jsonl"))][:8]
    proc, port = start()
    try:
        scale = max(abs(r["output"][0]) for r in refs)
        worst = 0.0
        for r in refs:
            got = direct(port, "/rerank", {"query": r["text"], "texts": [r["text_pair"]], "raw_scores": True})[0]["score"]
            worst = max(worst, abs(got - r["output"][0]) / scale)
        check(worst <= 1e-3, f"qwen3 reranker over HTTP: raw scores equal transformers' (worst {worst:.2e} of the scores' scale)")
        max_len = json.loads(urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/info", headers={"Authorization": f"Bearer {KEY}"})).read())["max_input_length"]
        long_doc = " ".join(["password"] * (4 * max_len))
        cut = direct(port, "/rerank", {"query": refs[0]["text"], "texts": [long_doc, long_doc + " shadow"], "raw_scores": True, "truncate": True})
        short = direct(port, "/rerank", {"query": refs[0]["text"], "texts": [" ".join(["password"] * 8)], "raw_scores": True})
        check(len(cut) == 2 and abs(cut[0]["score"] - cut[1]["score"]) < 1e-6 and all(math.isfinite(c["score"]) for c in cut),
              "qwen3 reranker: documents that differ only past the cut score the same (that the cut keeps "
              "the prompt's end is checked in tests/gateway/service_test.cc)")
        try:
            direct(port, "/rerank", {"query": refs[0]["text"], "texts": [long_doc], "truncate": False})
            check(False, "qwen3 reranker: an over-long pair without truncation is refused")
        except urllib.error.HTTPError as e:
            check(e.code == 413, f"qwen3 reranker: an over-long pair without truncation is refused ({e.code})")
        check(math.isfinite(short[0]["score"]), "qwen3 reranker: a short pair scores")
    finally:
        proc.send_signal(signal.SIGTERM)
        check(proc.wait(timeout=30) == 0, "exit 0 on SIGTERM (qwen3 reranker)")
    # The same through `quiver gateway` in front of a `quiver worker`: the gateway learns from the
    # worker's ModelInfo that the model is a yes/no reranker and builds the same prompt.
    worker, gateway, gport = start_gateway_and_worker(MODEL_DIR)
    try:
        worst = 0.0
        for r in refs:
            got = direct(gport, "/rerank", {"query": r["text"], "texts": [r["text_pair"]], "raw_scores": True})[0]["score"]
            worst = max(worst, abs(got - r["output"][0]) / scale)
        check(worst <= 1e-3, f"qwen3 reranker through gateway and worker: raw scores equal transformers' (worst {worst:.2e})")
    finally:
        for p in (gateway, worker):
            p.send_signal(signal.SIGTERM)
            check(p.wait(timeout=30) == 0, "exit 0 on SIGTERM (qwen3 reranker, gateway and worker)")

    if FAILURES:
        print(f"clients test: {len(FAILURES)} check(s) failed")
        sys.exit(1)
    print("clients test: all checks passed")


if __name__ == "__main__":
    main()
