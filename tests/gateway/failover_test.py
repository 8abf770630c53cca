#!/usr/bin/env python3
"""Failover: `quiver gateway` in front of 3 `quiver worker` processes on loopback. 16 clients send
requests for 10 seconds; one worker is killed with SIGKILL along the way. Every request must
return 200 with the right vectors (compared bit for bit with answers taken before the kill:
quiver's outputs do not depend on batching); the dead worker must be marked unhealthy, and get
traffic again once restarted on its port.

    failover_test.py QUIVER_BINARY SOURCE_DIR
"""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

QUIVER, SOURCE = sys.argv[1], sys.argv[2]
MODEL = os.path.join(SOURCE, "models", "all-MiniLM-L6-v2")


sys.path.insert(0, os.path.dirname(__file__))
from serving import free_port, wait_for, wait_healthy  # noqa: E402


def start_worker(port):
    log = tempfile.NamedTemporaryFile(prefix="quiver-fo-worker-", delete=False).name
    proc = subprocess.Popen([QUIVER, "worker", "--model", MODEL, "--listen", f"127.0.0.1:{port}",
                             "--metrics-port", "-1", "--threads", "1", "--max-batch-tokens", "1024"],
                            stderr=open(log, "w"), stdout=subprocess.DEVNULL)
    wait_for(r"port=\d+", log, proc)
    return proc


def post(port, path, body, timeout=60):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def metric(port, name, replica):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    m = re.search(re.escape(name) + r'\{replica="' + re.escape(replica) + r'"\} ([0-9.e+-]+)', text)
    return float(m.group(1)) if m else None


def main():
    ports = [free_port() for _ in range(3)]
    workers = [start_worker(p) for p in ports]
    glog = tempfile.NamedTemporaryFile(prefix="quiver-fo-gateway-", delete=False).name
    gateway = subprocess.Popen([QUIVER, "gateway", "--model", MODEL, "--host", "127.0.0.1", "--port", "0",
                                "--workers", ",".join(f"127.0.0.1:{p}" for p in ports),
                                "--health-interval-ms", "300", "--max-chunk-tokens", "128"],
                               stderr=open(glog, "w"), stdout=subprocess.DEVNULL)
    gport = int(wait_for(r" port=(\d+) ", glog, gateway).group(1))
    wait_healthy(gport, gateway, len(ports))
    failures = []
    try:
        with open(os.path.join(SOURCE, "corpus", "queries.jsonl"), encoding="utf-8") as f:
            queries = [json.loads(l)["text"] for l in f][:64]
        expected = {}
        for i in range(0, len(queries), 16):
            status, body = post(gport, "/v1/embeddings", {"input": queries[i:i + 16]})
            assert status == 200, body
            for q, d in zip(queries[i:i + 16], json.loads(body)["data"]):
                expected[q] = d["embedding"]

        results = {"ok": 0, "bad": 0, "errors": []}
        lock = threading.Lock()
        stop = time.time() + 10

        def client(k):
            n = 0
            while time.time() < stop:
                batch = [queries[(k * 7 + n * 3 + j) % len(queries)] for j in range(2 + n % 3)]
                n += 1
                status, body = post(gport, "/v1/embeddings", {"input": batch})
                with lock:
                    if status != 200:
                        results["errors"].append(f"{status}: {body[:200]}")
                        continue
                    data = json.loads(body)["data"]
                    if all(d["embedding"] == expected[q] for d, q in zip(data, batch)):
                        results["ok"] += 1
                    else:
                        results["bad"] += 1

        threads = [threading.Thread(target=client, args=(k,)) for k in range(16)]
        for t in threads:
            t.start()
        time.sleep(3)
        workers[1].send_signal(signal.SIGKILL)
        workers[1].wait()
        killed_at = time.time()
        for t in threads:
            t.join()
        print(f"failover: {results['ok']} requests OK, {results['bad']} wrong, {len(results['errors'])} errors "
              f"(worker on port {ports[1]} killed {killed_at - (stop - 10):.1f} s in)")
        if results["errors"] or results["bad"] or results["ok"] < 50:
            failures.append(f"requests: {results['bad']} wrong, errors {results['errors'][:3]}")
        dead = f"127.0.0.1:{ports[1]}"
        if metric(gport, "quiver_gateway_replica_healthy", dead) != 0:
            failures.append("the killed worker is not marked unhealthy")
        if f"worker {dead}: unhealthy (" not in open(glog).read():
            failures.append("the gateway did not log the killed worker unhealthy, with why")
        # Restart it on the same port: it must be healthy again and receive chunks.
        workers[1] = start_worker(ports[1])
        end = time.time() + 30
        while time.time() < end and metric(gport, "quiver_gateway_replica_healthy", dead) != 1:
            time.sleep(0.2)
        before = metric(gport, "quiver_gateway_replica_chunks_total", dead) or 0
        # New chunks avoid a replica for HedgeOptions::silent_for (10 s) after one of its chunks
        # was hedged, which the load above may have done just before the kill: up to 20 s.
        end = time.time() + 20
        after = before
        i = 0
        while i < 12 or (after <= before and time.time() < end):
            status, _ = post(gport, "/v1/embeddings", {"input": queries[i % 16 * 4:(i % 16 + 1) * 4]})
            if status != 200:
                failures.append(f"after restart: {status}")
            after = metric(gport, "quiver_gateway_replica_chunks_total", dead) or 0
            i += 1
        print(f"restarted worker: healthy={metric(gport, 'quiver_gateway_replica_healthy', dead)}, chunks {before} -> {after}")
        if open(glog).read().count(f"worker {dead}: healthy") != 2:
            failures.append("the gateway did not log the worker healthy at start and after its restart")
        if after <= before:
            failures.append("the restarted worker got no traffic")
        # Workers found by DNS (dns:NAME:PORT, re-resolved), as a Kubernetes headless Service gives.
        dlog = tempfile.NamedTemporaryFile(prefix="quiver-fo-dns-", delete=False).name
        dns_gw = subprocess.Popen([QUIVER, "gateway", "--model", MODEL, "--host", "127.0.0.1", "--port", "0",
                                   "--workers", f"dns:localhost:{ports[0]}", "--resolve-interval-ms", "500"],
                                  stderr=open(dlog, "w"), stdout=subprocess.DEVNULL)
        dport = int(wait_for(r" port=(\d+) ", dlog, dns_gw).group(1))
        wait_healthy(dport, dns_gw, 1)
        status, body = post(dport, "/v1/embeddings", {"input": queries[:3]})
        if status != 200 or [d["embedding"] for d in json.loads(body)["data"]] != [expected[q] for q in queries[:3]]:
            failures.append(f"dns: workers: {status} {body[:200]}")
        dns_gw.send_signal(signal.SIGTERM)
        dns_gw.wait(timeout=30)
        # With every worker gone: 503 naming the reason, and /health says so.
        for w in workers:
            w.send_signal(signal.SIGKILL)
            w.wait()
        end = time.time() + 10
        while time.time() < end and any(metric(gport, "quiver_gateway_replica_healthy", f"127.0.0.1:{p}") != 0 for p in ports):
            time.sleep(0.2)
        status, body = post(gport, "/v1/embeddings", {"input": "anyone there?"})
        print(f"no workers: {status} {body[:120]}")
        if status != 503 or "no healthy replica" not in body:
            failures.append(f"no workers: {status} {body[:200]}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{gport}/health", timeout=10)
            failures.append("/health 200 with no workers")
        except urllib.error.HTTPError as e:
            if e.code != 503:
                failures.append(f"/health {e.code}")
    finally:
        gateway.send_signal(signal.SIGTERM)
        if gateway.wait(timeout=30) != 0:
            failures.append("gateway exit status")
        for w in workers:
            w.send_signal(signal.SIGTERM)
            w.wait(timeout=30)
    if failures:
        print("failover test failed:", failures)
        sys.exit(1)
    print("failover test: all checks passed")


if __name__ == "__main__":
    main()
