"""Faults against real processes on loopback (standard library only), issue 17's cases beyond the
HTTP layer (those are in http_hostile_test.py): a client that leaves, a deadline that passes during
compute and during tokenization, a bounded drain on SIGTERM, running out of file descriptors, a
hung worker behind the gateway (SIGSTOP), and the gateway's 413 for a request no worker queue could
admit. Every wait is bounded; the file runs in about two minutes on 2 cores.

    python3 tests/reliability/faults_test.py QUIVER MODEL_DIR CORPUS_DIR
"""

import json
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "gateway"))
import serving  # noqa: E402
from serving import free_port, wait_for  # noqa: E402

QUIVER, MODEL, CORPUS = sys.argv[1], sys.argv[2], sys.argv[3]
failures = []


def check(name, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + name + (f" ({detail})" if detail else ""), flush=True)
    if not ok:
        failures.append(name)


def post(port, path, body, timeout=120):
    data = body if isinstance(body, bytes) else json.dumps(body, ensure_ascii=False).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data,
                                 headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), dict(e.headers)


def metric(port, name):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    total = 0.0
    for m in re.finditer(r"^" + re.escape(name) + r"(\{[^}]*\})? ([0-9.e+-]+)$", text, re.M):
        total += float(m.group(2))
    return total


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def texts():
    with open(os.path.join(CORPUS, "docs_multi.jsonl"), encoding="utf-8") as f:
        return [json.loads(l)["text"] for l in f]


DOCS = texts()
# About 100,000 tokens: tens of seconds of compute on 2 cores, in many chunks.
BIG = {"input": [DOCS[i % len(DOCS)][:1500] for i in range(400)], "truncate_prompt_tokens": -1}


def raw_post(port, body):
    data = json.dumps(body).encode()
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
    return s


def stop(proc, timeout=60):
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return None


def deadline_server(seconds, prefix):
    """A server whose requests may take `seconds` (--request-timeout), bodies up to 64 MiB."""
    return serving.start(QUIVER, MODEL, ["--max-inputs", "4096", "--threads", "2",
                                         "--request-timeout", seconds,
                                         "--max-body-bytes", "67108864",
                                         "--max-body-bytes-in-flight", "67108864"], prefix=prefix)


def client_gone_and_deadline():
    proc, port, log = serving.start(QUIVER, MODEL, ["--max-inputs", "4096", "--threads", "2"],
                                    prefix="quiver-faults-")
    try:
        # The client leaves a second into a long request: what is still queued is dropped.
        s = raw_post(port, BIG)
        time.sleep(1.0)
        s.close()
        start = time.time()
        dropped = 0
        while time.time() - start < 20 and dropped == 0:
            dropped = metric(port, "quiver_scheduler_dropped_total")
            time.sleep(0.2)
        check("a request whose client left is dropped before compute", dropped > 0,
              f"quiver_scheduler_dropped_total={dropped}")
        t0 = time.time()
        status, _, _ = post(port, "/v1/embeddings", {"input": "still here?"})
        took = time.time() - t0
        check("the server is free again at once", status == 200 and took < 10,
              f"{status} after {took:.1f} s")
    finally:
        stop(proc)
    proc, port, log = deadline_server("2", "quiver-faults-deadline-")
    try:
        t0 = time.time()
        status, body, _ = post(port, "/v1/embeddings", BIG)
        took = time.time() - t0
        check("a deadline passing during compute is 504 at the deadline", status == 504 and took < 6,
              f"{status} after {took:.1f} s: {body[:200]}")
    finally:
        stop(proc)
    # Tokenization alone longer than the deadline: 4,096 inputs of 12,000 characters (49 MB of
    # text) against a 0.25 s deadline. 2,048 took 1.7 s on an Intel Xeon of 2026; all 4,096 took
    # under 2 s on an AMD EPYC Zen 5, so a 2 s deadline let it finish there (and answer 413 for
    # the queue instead). Escaping 0.25 s would take over 190 MB/s of tokenization on 2 threads.
    proc, port, log = deadline_server("0.25", "quiver-faults-tokenize-")
    try:
        long_texts = {"input": [(DOCS[i % len(DOCS)] * 20)[:12000] for i in range(4096)],
                      "truncate_prompt_tokens": -1}
        t0 = time.time()
        status, body, _ = post(port, "/v1/embeddings", long_texts)
        took = time.time() - t0
        check("a deadline passing during tokenization is 504, tokenization stopped",
              status == 504 and "tokenization" in body and took < 6,
              f"{status} after {took:.1f} s: {body[:200]}")
    finally:
        stop(proc)


# The drain case's --drain-timeout: long enough for the short request in flight to finish, far
# shorter than the long one. scripts/sanitize.sh gives more (its builds run 4-5 times slower: the
# short request alone took 2.3 s under ASan on a 2-core Xeon, 0.5 s without).
DRAIN_S = float(os.environ.get("QUIVER_FAULTS_DRAIN_TIMEOUT", "2"))


def drain():
    proc, port, log = serving.start(QUIVER, MODEL, ["--max-inputs", "4096", "--threads", "2",
                                                    "--drain-timeout", f"{DRAIN_S:g}"],
                                    prefix="quiver-faults-drain-")
    # A short request in flight when SIGTERM comes: answered, with Connection: close.
    result = {}

    def short():
        result["short"] = post(port, "/v1/embeddings", {"input": [d[:400] for d in DOCS[:64]]})

    def long():
        result["long"] = post(port, "/v1/embeddings", BIG)

    def until(predicate, seconds=30):
        end = time.time() + seconds
        while time.time() < end and not predicate():
            time.sleep(0.01)

    # In this order (the scheduler serves first come first), each admitted before SIGTERM: a
    # fixed pause could let a fast host answer the short request first, or a slow one start the
    # long one late.
    threads = [threading.Thread(target=short), threading.Thread(target=long)]
    threads[0].start()
    until(lambda: "short" in result or metric(port, "quiver_scheduler_admitted_tokens") > 0)
    threads[1].start()
    until(lambda: "long" in result or metric(port, "quiver_scheduler_admitted_tokens") > 20000)
    t0 = time.time()
    code = stop(proc, timeout=30)
    took = time.time() - t0
    for t in threads:
        t.join(timeout=30)
    status, _, headers = result.get("short", (None, "", {}))
    check("a request in flight at SIGTERM is answered, Connection: close",
          status == 200 and headers.get("Connection", "").lower() == "close",
          f"{status} {headers.get('Connection')}")
    status, body, _ = result.get("long", (None, "", {}))
    check("one still running at --drain-timeout gets 503 naming it",
          status == 503 and "drain-timeout" in body, f"{status}: {body[:200]}")
    check("the process exits 0 within the drain timeout and a batch",
          code == 0 and took < DRAIN_S + 8,
          f"exit {code} after {took:.1f} s")


def out_of_descriptors():
    def low_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (48, 48))

    log = tempfile.NamedTemporaryFile(prefix="quiver-faults-emfile-", suffix=".log", delete=False)
    proc = subprocess.Popen([QUIVER, "serve", "--model", MODEL, "--host", "127.0.0.1", "--port", "0",
                             "--threads", "1"], stderr=log, stdout=subprocess.DEVNULL,
                            preexec_fn=low_limit)
    try:
        port = None
        for _ in range(600):
            m = re.search(r" port=(\d+) ", open(log.name).read())
            if m and "ready on" in open(log.name).read():
                port = int(m.group(1))
                break
            time.sleep(0.1)
        if port is None:
            check("serve starts with 48 file descriptors", False, open(log.name).read()[-500:])
            return
        held = []
        for _ in range(80):
            try:
                held.append(socket.create_connection(("127.0.0.1", port), timeout=2))
            except OSError:
                break
        before = cpu_seconds(proc.pid)
        time.sleep(2.0)
        spent = cpu_seconds(proc.pid) - before
        text = open(log.name).read()
        check("out of descriptors: accept backs off (no spin) and says so",
              spent < 0.5 and "accept failed" in text, f"{spent:.2f} s of CPU in 2 s")
        for s in held:
            s.close()
        time.sleep(0.5)
        status, _, _ = post(port, "/v1/embeddings", {"input": "and now?"}, timeout=10)
        check("descriptors back: served again", status == 200, str(status))
    finally:
        stop(proc)


def hung_worker():
    ports = [free_port() for _ in range(2)]
    workers = []
    for p in ports:
        wlog = tempfile.NamedTemporaryFile(prefix="quiver-faults-worker-", delete=False).name
        w = subprocess.Popen([QUIVER, "worker", "--model", MODEL, "--listen", f"127.0.0.1:{p}",
                              "--metrics-port", "-1", "--threads", "1", "--max-batch-tokens", "1024",
                              "--max-queued-tokens", "8192"],
                             stderr=open(wlog, "w"), stdout=subprocess.DEVNULL)
        wait_for(r"port=\d+", wlog, w)
        workers.append(w)
    glog = tempfile.NamedTemporaryFile(prefix="quiver-faults-gateway-", delete=False).name
    gw = subprocess.Popen([QUIVER, "gateway", "--model", MODEL, "--host", "127.0.0.1", "--port", "0",
                           "--workers", ",".join(f"127.0.0.1:{p}" for p in ports),
                           "--health-interval-ms", "500", "--max-chunk-tokens", "256",
                           "--request-timeout", "60"],
                          stderr=open(glog, "w"), stdout=subprocess.DEVNULL)
    gport = int(wait_for(r" port=(\d+) ", glog, gw).group(1))
    serving.wait_healthy(gport, gw, len(ports))
    try:
        queries = DOCS[:48]
        expected = {}
        for i in range(0, 48, 8):
            status, body, _ = post(gport, "/v1/embeddings", {"input": [q[:300] for q in queries[i:i + 8]]})
            assert status == 200, body
            for q, d in zip(queries[i:i + 8], json.loads(body)["data"]):
                expected[q] = d["embedding"]
        # Requests in flight when a worker stops answering (SIGSTOP: no reset, no close).
        results = []
        lock = threading.Lock()

        def client(k):
            for n in range(6):
                batch = [queries[(k * 5 + n * 7 + j) % 48] for j in range(4)]
                t0 = time.time()
                status, body, _ = post(gport, "/v1/embeddings", {"input": [q[:300] for q in batch]})
                took = time.time() - t0
                ok = status == 200 and all(d["embedding"] == expected[q] for d, q in
                                           zip(json.loads(body)["data"], batch))
                with lock:
                    results.append((ok, took, status))

        threads = [threading.Thread(target=client, args=(k,)) for k in range(6)]
        for t in threads:
            t.start()
        time.sleep(0.5)
        workers[0].send_signal(signal.SIGSTOP)
        for t in threads:
            t.join(timeout=120)
        slowest = max(t for _, t, _ in results) if results else None
        bad = [(s, round(t, 1)) for ok, t, s in results if not ok]
        check("a hung worker costs a request seconds, not the 60 s deadline",
              len(results) == 36 and not bad and slowest < 15,
              f"{len(results)} answers, wrong/failed {bad[:5]}, slowest {slowest}")
        hedges = metric(gport, "quiver_gateway_hedges_total")
        check("the gateway counted its hedges", hedges >= 1, f"hedges {hedges}")
        # Resumed, the worker passes its health check again and is trusted again at once: not
        # after the 10 s a hedged replica is otherwise left without new chunks.
        def worker0_chunks():
            return metric(gport, f'quiver_gateway_replica_chunks_total{{replica="127.0.0.1:{ports[0]}"}}')

        healthy0 = f'quiver_gateway_replica_healthy{{replica="127.0.0.1:{ports[0]}"}}'
        stopped = time.time()
        while metric(gport, healthy0) != 0 and time.time() - stopped < 10:
            time.sleep(0.1)
        check("the gateway marks a stopped worker unhealthy", metric(gport, healthy0) == 0)
        before = worker0_chunks()
        workers[0].send_signal(signal.SIGCONT)
        resumed = time.time()
        back = None
        while back is None and time.time() - resumed < 12:
            status, body, _ = post(gport, "/v1/embeddings", {"input": [q[:300] for q in queries[:4]]})
            assert status == 200, body
            if worker0_chunks() > before:
                back = time.time() - resumed
        check("a worker resumed gets chunks again once its health check passes (not 10 s later)",
              back is not None and back < 5, f"first chunk {back} s after SIGCONT")
        # 413 at once for a request no worker queue could ever admit (2 x 8192 tokens).
        over = {"input": [DOCS[i % len(DOCS)][:1500] for i in range(120)], "truncate_prompt_tokens": -1}
        t0 = time.time()
        status, body, _ = post(gport, "/v1/embeddings", over)
        check("the gateway answers 413 for a request over its workers' queues",
              status == 413 and "max-queued-tokens" in body and time.time() - t0 < 10,
              f"{status}: {body[:200]}")
    finally:
        stop(gw)
        for w in workers:
            w.send_signal(signal.SIGCONT)
            stop(w)


CASES = {"client_gone_and_deadline": client_gone_and_deadline, "drain": drain,
         "out_of_descriptors": out_of_descriptors, "hung_worker": hung_worker}


def main():
    # QUIVER_FAULTS_CASES=a,b runs only those (scripts/sanitize.sh leaves out out_of_descriptors:
    # the sanitizers' own checks need descriptors the case has used up).
    chosen = os.environ.get("QUIVER_FAULTS_CASES", ",".join(CASES)).split(",")
    unknown = [c for c in chosen if c not in CASES]
    if unknown:
        raise SystemExit(f"QUIVER_FAULTS_CASES: unknown cases {unknown}; known: {list(CASES)}")
    for name in chosen:
        CASES[name]()
    if failures:
        print(f"faults: {len(failures)} failed: {failures}")
        sys.exit(1)
    print("faults: all cases passed")


if __name__ == "__main__":
    main()
