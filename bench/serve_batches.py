"""Throughput of `quiver serve` for a client that sends its texts in batches, against the engine.

A bulk job (building or re-indexing a vector store) sends many texts per request, several
requests in flight. This starts `quiver serve` once and, in interleaved rounds, times the
engine's own throughput suite (`quiver_engine_bench`, 100 x 128-token batches, in a fresh
process) and then, for each request size, `--clients` keep-alive clients posting OpenAI
`/v1/embeddings` requests of that many 128-token texts (base64 vectors, every answer checked
for its count) for `--seconds`; the order alternates by round. Prints tokens/s per round and the
median of serve / engine per request size. The clients share the host's cores with the server,
so their own work counts against serve.

  python3 bench/serve_batches.py --quiver build/quiver --engine-bench build/quiver_engine_bench \
      --model models/all-MiniLM-L6-v2 --inputs .cache/bench/inputs.json --quantize int8
"""
import argparse
import base64
import http.client
import json
import socket
import statistics
import subprocess
import threading
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def engine_tokens_per_s(args):
    cmd = [args.engine_bench, "--model", args.model, "--inputs", args.inputs, "--threads",
           str(args.threads), "--seconds", str(args.seconds), "--suites", "throughput",
           "--lengths", "128"]
    if args.quantize != "none":
        cmd += ["--quantize", args.quantize]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["throughput"]["tokens_per_s"]


def serve_tokens_per_s(port, model, texts, per_request, clients, seconds, dims):
    done = [0]
    errors = []
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def client(i):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        j = i * per_request
        while time.monotonic() < stop:
            batch = [texts[(j + k) % len(texts)] for k in range(per_request)]
            j += per_request
            body = json.dumps({"model": model, "input": batch, "encoding_format": "base64"})
            conn.request("POST", "/v1/embeddings", body, {"Content-Type": "application/json"})
            response = conn.getresponse()
            answer = response.read()
            data = json.loads(answer).get("data", []) if response.status == 200 else []
            if len(data) != per_request or any(
                    len(base64.b64decode(d["embedding"])) != 4 * dims for d in data):
                errors.append(f"{response.status}: {answer[:200]!r}")
                return
            with lock:
                done[0] += per_request

    start = time.monotonic()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise SystemExit(f"serve answered wrongly: {errors[0]}")
    return done[0] * 128 / (time.monotonic() - start)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quiver", required=True)
    p.add_argument("--engine-bench", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--inputs", required=True)
    p.add_argument("--quantize", default="none", choices=["none", "int8", "bf16"])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--seconds", type=float, default=4)
    p.add_argument("--texts-per-request", default="16,32,100")
    p.add_argument("--clients", type=int, default=4)
    args = p.parse_args()
    texts = json.load(open(args.inputs))["sets"]["128"]
    sizes = [int(v) for v in args.texts_per_request.split(",")]
    port = free_port()
    cmd = [args.quiver, "serve", "--model", args.model, "--port", str(port), "--threads",
           str(args.threads), "--quantize", args.quantize]
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                conn.request("GET", "/ready")
                if conn.getresponse().status == 200:
                    break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("quiver serve did not become ready")
            time.sleep(0.5)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/v1/models")
        model = json.loads(conn.getresponse().read())["data"][0]["id"]
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request("POST", "/v1/embeddings", json.dumps({"model": model, "input": texts[:1]}),
                     {"Content-Type": "application/json"})
        dims = len(json.loads(conn.getresponse().read())["data"][0]["embedding"])
        # a warm-up round, not counted
        serve_tokens_per_s(port, model, texts, sizes[0], args.clients, 1, dims)
        ratios = {n: [] for n in sizes}
        for r in range(args.rounds):
            serve = {}
            if r % 2 == 0:
                engine = engine_tokens_per_s(args)
            for n in sizes:
                serve[n] = serve_tokens_per_s(port, model, texts, n, args.clients, args.seconds,
                                              dims)
            if r % 2 == 1:
                engine = engine_tokens_per_s(args)
            line = f"round {r}: engine {engine:.0f}"
            for n in sizes:
                ratios[n].append(serve[n] / engine)
                line += f", serve {n} texts x {args.clients} clients {serve[n]:.0f}"
            print(line, flush=True)
        for n in sizes:
            print(f"serve / engine, {n} texts a request: median "
                  f"{statistics.median(ratios[n]):.3f} (rounds "
                  + ", ".join(f"{v:.3f}" for v in ratios[n]) + ")")
    finally:
        server.terminate()
        server.wait(timeout=60)


if __name__ == "__main__":
    main()
