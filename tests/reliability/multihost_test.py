#!/usr/bin/env python3
"""Many hosts on one machine: a gateway and workers on separate network hosts, found through DNS.

Each host is a network namespace with its own address on a bridge (iproute2: ip netns, veth);
dnsmasq, on a host of its own, serves the workers' service name with one A record per worker
(as a Kubernetes headless Service does), and the gateway runs with --workers dns:NAME:PORT and
that server in its resolv.conf (/etc/netns/NS/resolv.conf, which `ip netns exec` mounts). The
whole test runs in network and mount namespaces of its own (unshare --net --mount, with tmpfs over
/run/netns and /etc/netns), and every process it starts dies with it (PR_SET_PDEATHSIG): the
machine's own network is never touched, and a test killed by its timeout leaves nothing behind.

Under a steady load from 8 clients, with every answer compared bit for bit with answers taken
before (quiver's outputs do not depend on batching):
  1. scale-up: a third worker's record is added; the gateway must send it chunks within its
     re-resolve interval (plus the health check that admits a new worker);
  2. scale-down: the first worker's record is removed; the gateway must stop sending it chunks
     within the interval; then it is stopped (SIGTERM), as a Deployment would; then the DNS
     server stops answering for 4 s (SIGSTOP): lookups time out and the gateway must keep the
     workers it has (and say so), and say when resolving works again;
  3. a host cut off: the second worker's link goes down (no reset, packets dropped) while DNS
     still lists it; the gateway must fail over (health checks, hedges, retries);
  then the link comes back and that worker must get chunks again within 5 s.
0 lost, 0 failed and 0 wrong answers throughout. Then, the load over:
  4. the DNS server stops answering (the resolver told to wait 30 s) and the gateway is stopped
     (SIGTERM): it must exit within seconds, not wait for its lookup in flight.

    multihost_test.py QUIVER_BINARY MODEL_DIR CORPUS_DIR

QUIVER_MULTIHOST_CUT_S sets how long the link stays down in step 3 (7 s by default; a longer cut,
outside `make test`, shows how soon a worker is back after a long partition).

Exits 77 (ctest's SKIP_RETURN_CODE) with the reason when network namespaces, unshare or dnsmasq
are not available (not root, a container without CAP_SYS_ADMIN, ...).
"""

import ctypes
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

CUT_S = float(os.environ.get("QUIVER_MULTIHOST_CUT_S", "7"))

SKIP = 77
SERVICE = "workers.quiver.test"
PORT = 50051
RESOLVE_MS = 500
HEALTH_MS = 300
NET = "10.77.0"
HOSTS = {"dns": 2, "gw": 10, "w1": 11, "w2": 12, "w3": 13}


def die_with_parent():
    """preexec_fn: SIGKILL this child when its parent dies (prctl PR_SET_PDEATHSIG)."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)


def skip(reason):
    print(f"SKIP: multihost test: {reason}")
    sys.exit(SKIP)


def sh(*args, check=True):
    return subprocess.run(list(args), check=check, capture_output=True, text=True)


class Hosts:
    """Named network namespaces on one bridge, cleaned up on exit."""

    def __init__(self):
        self.prefix = f"qmh{os.getpid()}-"
        self.names = []
        self.procs = []
        sh("ip", "link", "set", "lo", "up")
        sh("ip", "link", "add", "br0", "type", "bridge")
        sh("ip", "addr", "add", f"{NET}.1/24", "dev", "br0")
        sh("ip", "link", "set", "br0", "up")

    def add(self, name, last_octet):
        ns = self.prefix + name
        sh("ip", "netns", "add", ns)
        self.names.append(ns)
        sh("ip", "link", "add", f"v{name}", "type", "veth", "peer", "name", "eth0", "netns", ns)
        sh("ip", "link", "set", f"v{name}", "master", "br0", "up")
        sh("ip", "-n", ns, "addr", "add", f"{NET}.{last_octet}/24", "dev", "eth0")
        sh("ip", "-n", ns, "link", "set", "eth0", "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        return ns

    def link(self, name, up):
        sh("ip", "link", "set", f"v{name}", "up" if up else "down")

    def run(self, name, argv, log):
        proc = subprocess.Popen(["ip", "netns", "exec", self.prefix + name, *argv],
                                stdout=subprocess.DEVNULL, stderr=open(log, "w"),
                                preexec_fn=die_with_parent)
        self.procs.append(proc)
        return proc

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for ns in self.names:
            sh("ip", "netns", "del", ns, check=False)
            shutil.rmtree(f"/etc/netns/{ns}", ignore_errors=True)


def wait_for(pattern, log, proc, seconds=60):
    end = time.time() + seconds
    while time.time() < end:
        text = open(log).read()
        m = re.search(pattern, text)
        if m:
            return m
        if proc.poll() is not None:
            sys.exit(f"process exited ({proc.returncode}):\n{text[-2000:]}")
        time.sleep(0.1)
    sys.exit(f"timed out waiting for {pattern!r} in {log}:\n{open(log).read()[-2000:]}")


def post(url, body, timeout=30):
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError as e:
        return 0, str(e)


def chunks_by_replica(base):
    text = urllib.request.urlopen(base + "/metrics", timeout=10).read().decode()
    out = {}
    for m in re.finditer(r'quiver_gateway_replica_chunks_total\{replica="([^"]+)"\} ([0-9.e+]+)',
                         text):
        out[m.group(1)] = float(m.group(2))
    return out


def gauge(base, name, replica):
    text = urllib.request.urlopen(base + "/metrics", timeout=10).read().decode()
    m = re.search(re.escape(name) + r'\{replica="' + re.escape(replica) + r'"\} ([0-9.e+-]+)', text)
    return float(m.group(1)) if m else None


def inner(quiver, model, corpus):
    # This mount namespace's own /run/netns and /etc/netns: named namespaces and their
    # resolv.conf files vanish with it.
    for d in ("/run/netns", "/etc/netns"):
        os.makedirs(d, exist_ok=True)
        sh("mount", "-t", "tmpfs", "tmpfs", d)
    work = tempfile.mkdtemp(prefix="quiver-multihost-")
    hosts = Hosts()
    failures = []
    try:
        for name, octet in HOSTS.items():
            hosts.add(name, octet)
        addr = {name: f"{NET}.{octet}" for name, octet in HOSTS.items()}
        worker_addr = {w: f"{addr[w]}:{PORT}" for w in ("w1", "w2", "w3")}

        # dnsmasq: the service name's A records from a hosts file, re-read on SIGHUP.
        records = os.path.join(work, "records")

        def publish(workers):
            with open(records + ".tmp", "w") as f:
                for w in workers:
                    f.write(f"{addr[w]} {SERVICE}\n")
            os.replace(records + ".tmp", records)
            dns.send_signal(signal.SIGHUP)

        open(records, "w").close()
        dns_log = os.path.join(work, "dnsmasq.log")
        dns = hosts.run("dns", ["dnsmasq", "--no-daemon", "--no-resolv", "--no-hosts",
                                f"--addn-hosts={records}", f"--listen-address={addr['dns']}",
                                "--bind-interfaces", "--local-ttl=0", "--log-queries",
                                "--log-facility=-", "--user=root", f"--pid-file={work}/dnsmasq.pid"], dns_log)
        wait_for(r"started", dns_log, dns, 20)
        publish(["w1", "w2"])
        ns_dir = f"/etc/netns/{hosts.prefix}gw"
        os.makedirs(ns_dir, exist_ok=True)
        resolv_conf = os.path.join(ns_dir, "resolv.conf")
        with open(resolv_conf, "w") as f:
            f.write(f"nameserver {addr['dns']}\noptions timeout:1 attempts:2\n")

        workers = {}
        for w in ("w1", "w2", "w3"):
            log = os.path.join(work, f"{w}.log")
            workers[w] = (hosts.run(w, [quiver, "worker", "--model", model, "--listen",
                                        f"0.0.0.0:{PORT}", "--metrics-port", "-1",
                                        "--threads", "1", "--max-batch-tokens", "1024",
                                        "--drain-grace-ms", "600"], log), log)
        for w, (proc, log) in workers.items():
            wait_for(r"port=\d+", log, proc)

        gw_log = os.path.join(work, "gateway.log")
        gateway = hosts.run("gw", [quiver, "gateway", "--model", model, "--host", "0.0.0.0",
                                   "--port", "8080", "--workers", f"dns:{SERVICE}:{PORT}",
                                   "--resolve-interval-ms", str(RESOLVE_MS),
                                   "--health-interval-ms", str(HEALTH_MS),
                                   "--max-chunk-tokens", "128", "--request-timeout", "60"],
                            gw_log)
        wait_for(r"ready on", gw_log, gateway)
        base = f"http://{addr['gw']}:8080"
        # "ready on" follows the first worker's passed health check; the phases below count on
        # both published workers taking chunks.
        end = time.time() + 60
        while not all(gauge(base, "quiver_gateway_replica_healthy", worker_addr[w]) == 1
                      for w in ("w1", "w2")):
            if time.time() > end:
                sys.exit("the gateway did not count w1 and w2 healthy in 60 s")
            time.sleep(0.1)

        with open(os.path.join(corpus, "queries.jsonl"), encoding="utf-8") as f:
            queries = [json.loads(line)["text"] for line in f][:48]
        expected = {}
        for i in range(0, len(queries), 16):
            status, body = post(base + "/v1/embeddings", {"input": queries[i:i + 16]})
            if status != 200:
                sys.exit(f"warm-up request failed: {status} {body[:300]}")
            for q, d in zip(queries[i:i + 16], json.loads(body)["data"]):
                expected[q] = d["embedding"]
        seen = chunks_by_replica(base)
        if set(seen) != {worker_addr["w1"], worker_addr["w2"]}:
            failures.append(f"the gateway found {sorted(seen)}, not the two published workers")

        # The load: 8 clients until told to stop; every answer checked.
        results = {"ok": 0, "wrong": 0, "errors": []}
        lock = threading.Lock()
        stop = threading.Event()

        def client(k):
            n = 0
            while not stop.is_set():
                batch = [queries[(k * 5 + n * 3 + j) % len(queries)] for j in range(1 + n % 4)]
                n += 1
                status, body = post(base + "/v1/embeddings", {"input": batch}, timeout=90)
                with lock:
                    if status != 200:
                        results["errors"].append(f"{status}: {body[:200]}")
                    elif all(d["embedding"] == expected[q]
                             for d, q in zip(json.loads(body)["data"], batch)):
                        results["ok"] += 1
                    else:
                        results["wrong"] += 1

        threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        time.sleep(2)

        def wait_until(predicate, seconds):
            start = time.time()
            while time.time() - start < seconds:
                if predicate():
                    return time.time() - start
                time.sleep(0.05)
            return None

        # 1. Scale-up.
        publish(["w1", "w2", "w3"])
        took = wait_until(lambda: chunks_by_replica(base).get(worker_addr["w3"], 0) > 0,
                          10 * RESOLVE_MS / 1000)
        print(f"scale-up: w3 got its first chunk {took if took is None else round(took, 2)} s "
              f"after its record was published (re-resolve {RESOLVE_MS} ms, health {HEALTH_MS} ms)")
        if took is None or took > (RESOLVE_MS + 2 * HEALTH_MS) / 1000 + 3.0:
            failures.append(f"scale-up: w3 not used within the re-resolve interval ({took})")
        time.sleep(1.5)

        # 2. Scale-down: w1's record removed, then w1 stopped as a Deployment would.
        publish(["w2", "w3"])
        removed_at = time.time()
        time.sleep(RESOLVE_MS / 1000 + 1.5)
        before = chunks_by_replica(base).get(worker_addr["w1"], 0)
        time.sleep(1.5)
        after = chunks_by_replica(base).get(worker_addr["w1"], 0)
        print(f"scale-down: w1 got {after - before:.0f} chunks between {RESOLVE_MS + 1500} ms and "
              f"{RESOLVE_MS + 3000} ms after its record was removed")
        if after != before:
            failures.append(f"scale-down: w1 still got chunks {time.time() - removed_at:.1f} s "
                            f"after its record was removed")
        workers["w1"][0].send_signal(signal.SIGTERM)
        workers["w1"][0].wait(timeout=30)
        time.sleep(1)

        # 2b. DNS down (dnsmasq stopped): lookups time out, the gateway keeps w2 and w3.
        dns.send_signal(signal.SIGSTOP)
        before = chunks_by_replica(base)
        time.sleep(4)
        after = chunks_by_replica(base)
        dns.send_signal(signal.SIGCONT)
        kept = all(after.get(worker_addr[w], 0) > before.get(worker_addr[w], 0) for w in ("w2", "w3"))
        print(f"dns down 4 s: chunks to w2 +{after.get(worker_addr['w2'], 0) - before.get(worker_addr['w2'], 0):.0f},"
              f" w3 +{after.get(worker_addr['w3'], 0) - before.get(worker_addr['w3'], 0):.0f}")
        if not kept or "keeping the 2 workers found before" not in open(gw_log).read():
            failures.append("dns down: the gateway did not keep its workers while lookups failed")
        took = wait_until(lambda: "works again" in open(gw_log).read(), 10)
        if took is None:
            failures.append("dns back: the gateway did not say resolving works again")

        # 3. A host cut off: w2's link down while DNS still lists it.
        hosts.link("w2", False)
        cut_at = time.time()
        took = wait_until(lambda: gauge(base, "quiver_gateway_replica_healthy",
                                        worker_addr["w2"]) == 0, 10)
        print(f"cut-off: w2 marked unhealthy {took if took is None else round(took, 2)} s after "
              f"its link went down")
        if took is None:
            failures.append("cut-off: w2 was not marked unhealthy within 10 s")
        time.sleep(max(0.0, 4 - (time.time() - cut_at)))
        before = chunks_by_replica(base)
        time.sleep(3)
        after = chunks_by_replica(base)
        time.sleep(max(0.0, CUT_S - (time.time() - cut_at)))
        sent = {w: after.get(worker_addr[w], 0) - before.get(worker_addr[w], 0)
                for w in ("w2", "w3")}
        print(f"cut-off: in 3 s of the cut, w2 was sent {sent['w2']:.0f} chunks and w3 "
              f"{sent['w3']:.0f}")
        if sent["w3"] <= 0 or sent["w2"] > 0:
            failures.append(f"cut-off: the load did not move to w3 ({sent})")
        hosts.link("w2", True)
        print(f"cut-off: w2's link was down {time.time() - cut_at:.1f} s")
        w2_before = chunks_by_replica(base).get(worker_addr["w2"], 0)
        took = wait_until(lambda: chunks_by_replica(base).get(worker_addr["w2"], 0) > w2_before,
                          30)
        print(f"cut-off: w2 got chunks again {took if took is None else round(took, 2)} s after "
              f"its link came back")
        # Within a few seconds: the gateway dropped the connection it had through the cut
        # (keepalive) and dials afresh; one kept would resume only at TCP's next retransmission
        # (6 s after a 7 s cut, 14 s after a 40 s one, before keepalive).
        if took is None or took > 5:
            failures.append(f"cut-off: w2 got no chunks within 5 s after its link came back "
                            f"({took} s)")
        time.sleep(1)
        stop.set()
        for t in threads:
            t.join()
        print(f"load: {results['ok']} requests answered correctly, {results['wrong']} wrong, "
              f"{len(results['errors'])} failed")
        if results["wrong"] or results["errors"]:
            failures.append(f"{results['wrong']} wrong answers, {len(results['errors'])} failed "
                            f"requests: {results['errors'][:3]}")
        if results["ok"] < 100:
            failures.append(f"only {results['ok']} requests answered")
        queries_seen = open(dns_log).read().count(f"query[A] {SERVICE}")
        print(f"dnsmasq answered {queries_seen} A queries for {SERVICE}")
        if gateway.poll() is not None:
            failures.append(f"the gateway exited ({gateway.returncode})")

        # 4. Stopped while the DNS server does not answer: the resolver told to wait 30 s for it
        # (glibc re-reads a changed resolv.conf), a lookup in flight, then SIGTERM. The gateway
        # must exit at once (nothing in flight to drain), not when getaddrinfo gives up.
        with open(resolv_conf, "w") as f:
            f.write(f"nameserver {addr['dns']}\noptions timeout:30 attempts:1\n")
        dns.send_signal(signal.SIGSTOP)
        time.sleep(3 * RESOLVE_MS / 1000)
        stopped_at = time.time()
        gateway.send_signal(signal.SIGTERM)
        try:
            gateway.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
        took = time.time() - stopped_at
        dns.send_signal(signal.SIGCONT)
        print(f"stop with DNS not answering: the gateway exited {took:.2f} s after SIGTERM "
              f"(exit {gateway.returncode})")
        if gateway.returncode is None or took > 10:
            failures.append(f"stop with DNS not answering: the gateway took {took:.1f} s to exit "
                            f"(a lookup held it)")
        elif gateway.returncode != 0:
            failures.append(f"stop with DNS not answering: the gateway exited {gateway.returncode}")
    finally:
        hosts.close()
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        print(f"logs in {work}")
        sys.exit(1)
    shutil.rmtree(work, ignore_errors=True)
    print("multihost: OK")


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--inner":
        inner(*sys.argv[2:])
        return
    quiver, model, corpus = sys.argv[1:4]
    if os.geteuid() != 0:
        skip("needs root for network namespaces (ip netns, unshare --net); not root here")
    for tool in ("ip", "unshare", "dnsmasq"):
        if shutil.which(tool) is None and not os.path.exists(f"/usr/sbin/{tool}"):
            skip(f"{tool} is not installed (scripts/setup.sh installs iproute2 and dnsmasq-base)")
    unshare = ["unshare", "--net", "--mount", "--propagation", "private"]
    etc_netns_existed = os.path.isdir("/etc/netns")
    probe = subprocess.run(unshare + ["sh", "-c",
                                      "mkdir -p /run/netns /etc/netns && "
                                      "mount -t tmpfs tmpfs /run/netns && "
                                      "mount -t tmpfs tmpfs /etc/netns && "
                                      "ip link add qbr0 type bridge && ip netns add qmhprobe && "
                                      "ip netns del qmhprobe"], capture_output=True, text=True)
    try:
        if probe.returncode != 0:
            skip(f"network namespaces are not available here: {probe.stderr.strip()[:300]}")
        env = dict(os.environ, PATH=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
        code = subprocess.run(unshare + [sys.executable, os.path.abspath(__file__), "--inner",
                                         quiver, model, corpus], env=env,
                              preexec_fn=die_with_parent).returncode
    finally:
        if not etc_netns_existed:  # the mount point made for the tmpfs, empty out here
            try:
                os.rmdir("/etc/netns")
            except OSError:
                pass
    sys.exit(code)


if __name__ == "__main__":
    main()
