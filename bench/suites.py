"""The four benchmark suites against any OpenAI-compatible /v1/embeddings endpoint.

One client for every system, so that quiver and a peer server are measured the same way, with
tokenization, JSON and the network included (loopback):

  latency      batch 1 at 128, 512 and 4096 tokens, one request at a time;
  scoring      one query and 5, 25 or 50 documents of 512 tokens in one request, cosine
               similarity of each document with the query computed here (bi-encoder scoring);
  throughput   batches of 100 texts of 128 tokens from 4 concurrent clients;
  concurrency  1, 2, 4, 8 and 16 concurrent clients, each sending one 128-token text at a time.

Texts come from bench/make_inputs.py, cut to exact token lengths for the model's tokenizer.
Lengths above --max-tokens are reported as not applicable. Standard library only.

    python bench/suites.py --url http://127.0.0.1:8080 --model all-MiniLM-L6-v2 \
        --inputs .cache/bench/inputs.json --name "quiver serve" --out quiver-http.json
"""

import argparse
import json
import math
import socket
import sys
import threading
import time
import urllib.parse


def percentile(values, p):
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def latency_fields(ms):
    """The latency summary every benchmark here reports (ms: latencies in milliseconds)."""
    return {
        "n": len(ms),
        "p50_ms": percentile(ms, 50),
        "p90_ms": percentile(ms, 90),
        "p99_ms": percentile(ms, 99),
        "mean_ms": sum(ms) / len(ms),
    }


def summary(ms, elapsed, requests, tokens):
    return {**latency_fields(ms), "requests_per_s": requests / elapsed,
            "tokens_per_s": tokens / elapsed}


class Client:
    """One keep-alive connection; embed() posts and checks the answer.

    Like the usual HTTP clients (urllib3, aiohttp, httpx) it turns Nagle's algorithm off. It writes
    each request in one send (http.client sends the headers and the body separately) and reads
    the status line, the headers and a Content-Length or chunked body itself (http.client parses
    headers with the email package): the client's own time is inside every latency measured here.
    """

    def __init__(self, url, model):
        parsed = urllib.parse.urlsplit(url)
        self.host, self.port = parsed.hostname, parsed.port or 80
        self.path = parsed.path.rstrip("/") + "/v1/embeddings"
        self.model = model
        self.sock = None
        self.reader = None

    def close(self):
        if self.sock is not None:
            self.reader.close()
            self.sock.close()
            self.sock = self.reader = None

    def read_response(self):
        status_line = self.reader.readline(65537)
        if not status_line:
            raise ConnectionResetError("the server closed the connection")
        status = int(status_line.split(None, 2)[1])
        length, chunked, close = None, False, False
        while True:
            line = self.reader.readline(65537)
            if line in (b"\r\n", b"\n", b""):
                break
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif name == b"connection":
                close = value.strip().lower() == b"close"
        if chunked:
            parts = []
            while (size := int(self.reader.readline(65537).split(b";")[0], 16)) > 0:
                parts.append(self.reader.read(size))
                self.reader.readline(65537)
            while self.reader.readline(65537) not in (b"\r\n", b"\n", b""):
                pass  # trailers
            payload = b"".join(parts)
        elif length is not None:
            payload = self.reader.read(length)
        else:
            payload, close = self.reader.read(), True
        if close:
            self.close()
        return status, payload

    def post(self, body):
        head = (f"POST {self.path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                "Content-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode("ascii")
        for attempt in range(2):  # one reconnect if the server closed an idle connection
            try:
                if self.sock is None:
                    self.sock = socket.create_connection((self.host, self.port), timeout=600)
                    self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    self.reader = self.sock.makefile("rb")
                self.sock.sendall(head + body)
                return self.read_response()
            except ConnectionError:
                self.close()
                if attempt == 1:
                    raise
        raise AssertionError("unreachable")

    def embed(self, texts):
        body = json.dumps({"model": self.model, "input": texts, "encoding_format": "float"})
        status, payload = self.post(body.encode("utf-8"))
        if status != 200:
            raise RuntimeError(f"HTTP {status}: {payload[:300]!r}")
        data = json.loads(payload)["data"]
        if len(data) != len(texts):
            raise RuntimeError(f"{len(data)} embeddings for {len(texts)} inputs")
        return [row["embedding"] for row in sorted(data, key=lambda row: row["index"])]


def timed(fn):
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1e3


def sequential(client, make_request, tokens_per_request, seconds, min_runs):
    """Requests one after another (after two warm-ups) for `seconds` and at least min_runs."""
    make_request(client, 0)
    make_request(client, 1)
    ms = []
    start = time.perf_counter()
    while len(ms) < min_runs or time.perf_counter() - start < seconds:
        i = len(ms)
        ms.append(timed(lambda: make_request(client, i)))
    elapsed = time.perf_counter() - start
    return summary(ms, elapsed, len(ms), len(ms) * tokens_per_request)


def concurrent(url, model, clients, make_request, tokens_per_request, seconds):
    """`clients` threads, each with its own connection, sending back to back for `seconds`."""
    lock = threading.Lock()
    ms, errors = [], []
    start_barrier = threading.Barrier(clients + 1)
    stop_at = [0.0]

    def loop(c):
        client = Client(url, model)
        make_request(client, c)  # warm the connection
        start_barrier.wait()
        i = c
        while time.perf_counter() < stop_at[0]:
            try:
                took = timed(lambda: make_request(client, i))
            except Exception as e:  # noqa: BLE001 - counted and reported, the run goes on
                with lock:
                    errors.append(str(e))
                continue
            with lock:
                ms.append(took)
            i += clients

    threads = [threading.Thread(target=loop, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    stop_at[0] = time.perf_counter() + 3600
    start_barrier.wait()
    start = time.perf_counter()
    stop_at[0] = start + seconds
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    result = summary(ms, elapsed, len(ms), len(ms) * tokens_per_request)
    result["clients"] = clients
    result["errors"] = len(errors)
    if errors:
        result["first_error"] = errors[0]
    return result


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--model", required=True, help="the model name the server expects")
    parser.add_argument("--name", required=True, help="the system, as the report names it")
    parser.add_argument("--inputs", required=True)
    parser.add_argument("--max-tokens", type=int, default=512,
                        help="the longest input the served model accepts")
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--suites", default="latency,scoring,throughput,concurrency")
    parser.add_argument("--lengths", type=lambda s: [int(c) for c in s.split(",")],
                        default=[128, 512, 4096], help="input lengths for the latency suite")
    parser.add_argument("--clients", type=lambda s: [int(c) for c in s.split(",")],
                        default=[1, 2, 4, 8, 16], help="client counts for the concurrency suite")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    with open(args.inputs, encoding="utf-8") as f:
        inputs = json.load(f)
    sets = {int(k): v for k, v in inputs["sets"].items()}
    queries = inputs["queries"]
    result = {"system": args.name, "url": args.url}
    client = Client(args.url, args.model)

    if "latency" in args.suites:
        result["latency"] = []
        for tokens in args.lengths:
            if tokens > args.max_tokens or tokens not in sets:
                result["latency"].append({"tokens": tokens, "not_applicable":
                                          f"longer than the model's {args.max_tokens} positions"})
                continue
            texts = sets[tokens]
            r = sequential(client, lambda c, i: c.embed([texts[i % len(texts)]]), tokens,
                           args.seconds, 20)
            result["latency"].append({"tokens": tokens, **r})
            print(f"{args.name}: latency {tokens}: p50 {r['p50_ms']:.2f} ms", file=sys.stderr)

    if "scoring" in args.suites and args.max_tokens >= 512:
        docs = sets[512]
        result["scoring"] = []
        for n in (5, 25, 50):
            def score(c, i, n=n):
                batch = [queries[i % len(queries)]] + [docs[(i + d) % len(docs)] for d in range(n)]
                rows = c.embed(batch)
                return [cosine(rows[0], row) for row in rows[1:]]

            r = sequential(client, score, n * 512, args.seconds, 3)
            result["scoring"].append({"documents": n, "document_tokens": 512, **r})
            print(f"{args.name}: scoring {n}: p50 {r['p50_ms']:.1f} ms", file=sys.stderr)

    if "throughput" in args.suites:
        texts = sets[128]
        r = concurrent(args.url, args.model, 4, lambda c, i: c.embed(texts), len(texts) * 128,
                       2 * args.seconds)
        result["throughput"] = {"batch": len(texts), "tokens": 128, **r}
        print(f"{args.name}: throughput: {r['tokens_per_s']:.0f} tokens/s", file=sys.stderr)

    if "concurrency" in args.suites:
        texts = sets[128]
        result["concurrency"] = []
        for clients in args.clients:
            r = concurrent(args.url, args.model, clients,
                           lambda c, i: c.embed([texts[i % len(texts)]]), 128, args.seconds)
            result["concurrency"].append({"tokens": 128, **r})
            print(f"{args.name}: {clients} clients: {r['tokens_per_s']:.0f} tokens/s, "
                  f"p50 {r['p50_ms']:.1f} ms", file=sys.stderr)

    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
