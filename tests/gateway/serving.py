"""`quiver serve` for the HTTP tests (standard library only): started on a free loopback port,
returned once /ready answers 200.

    proc, port, log_path = start(QUIVER, model_dir, ["--api-key", "k"])
    worker, port = start_worker(QUIVER, model_dir, log_dir)

and check(name, ok, detail) for each case, the failed ones' names in `failures`.
"""

import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import json
import urllib.error
import urllib.request


def free_port():
    """A loopback port free now (for processes that take --listen host:port)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(pattern, log_path, proc, seconds=60):
    """The first match of `pattern` in the log file, waiting up to `seconds`; exits the test if
    the process dies or the time passes (killing it first: a process left running would outlive
    the test, holding its port and a core)."""
    end = time.time() + seconds
    while time.time() < end:
        m = re.search(pattern, open(log_path).read())
        if m:
            return m
        if proc.poll() is not None:
            sys.exit(f"process exited: {open(log_path).read()}")
        time.sleep(0.1)
    proc.kill()
    proc.wait()
    sys.exit(f"timed out waiting for {pattern} in {log_path}")


def wait_healthy(port, proc, workers, seconds=60, host="127.0.0.1"):
    """Waits until the gateway on `port` counts `workers` replicas healthy (its /metrics), as a
    client waits for /ready: a gateway announces its port once a worker answered ModelInfo, which
    a worker does before its warm-up and the gateway's first health check, and its "ready on" once
    one worker passed that check (of several, the others may not yet). Exits the test (killing
    the gateway) if that does not happen within `seconds`."""
    end = time.time() + seconds
    healthy = 0
    while time.time() < end:
        try:
            text = urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=5).read().decode()
            healthy = len(re.findall(r'^quiver_gateway_replica_healthy\{[^}]*\} 1$', text, re.M))
            if healthy >= workers:
                return
        except OSError:
            pass
        if proc.poll() is not None:
            sys.exit(f"the gateway exited (exit code {proc.returncode})")
        time.sleep(0.1)
    proc.kill()
    proc.wait()
    sys.exit(f"the gateway counted {healthy} of {workers} workers healthy after {seconds} s")


def start(quiver, model_dir, extra=(), prefix="quiver-serve-", env=None, model_flag="--model"):
    log = tempfile.NamedTemporaryFile(prefix=prefix, suffix=".log", delete=False)
    proc = subprocess.Popen([quiver, "serve", model_flag, model_dir, "--host", "127.0.0.1", "--port", "0",
                             *extra], stderr=log, stdout=subprocess.DEVNULL,
                            env={**os.environ, **(env or {})})
    for _ in range(600):
        text = open(log.name).read()
        m = re.search(r" port=(\d+) ", text)
        if m:
            port = int(m.group(1))
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=5).status == 200:
                    return proc, port, log.name
            except OSError:
                pass
        if proc.poll() is not None:
            sys.exit("quiver serve exited: " + text)
        time.sleep(0.1)
    proc.kill()
    sys.exit("quiver serve did not become ready in 60 s: " + open(log.name).read())


def start_worker(quiver, model_dir, log_dir, extra=()):
    """`quiver worker` on a loopback port the system picks, one thread, no metrics port; (proc,
    port) once it listens, its log in log_dir."""
    log = tempfile.NamedTemporaryFile(prefix="worker-", suffix=".log", dir=log_dir, delete=False).name
    proc = subprocess.Popen([quiver, "worker", "--model", model_dir, "--listen", "127.0.0.1:0",
                             "--metrics-port", "-1", "--threads", "1", *extra],
                            stdout=subprocess.DEVNULL, stderr=open(log, "w"))
    return proc, int(wait_for(r" port=(\d+) ", log, proc).group(1))


def post_json(port, path, body, timeout=60):
    """POST `body` as JSON to the server on `port`: (status, the answer parsed; {} if empty)."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def get_json(port, path, timeout=60):
    """GET `path` from the server on `port`: (status, the answer parsed; {} if empty)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


# The cases a test script has checked and failed: check() prints each outcome, a failed one's
# name goes into `failures` (one list per process: each test script is its own).
failures = []


def check(name, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else f": {detail}"), flush=True)
    if not ok:
        failures.append(name)


def finish(label, work=None):
    """Exits 1 naming how many checks failed (keeping `work`, a scratch folder, to look at), or
    removes `work` and prints "LABEL: OK"."""
    if failures:
        print(f"{len(failures)} FAILED" + (f"; files in {work}" if work else ""))
        sys.exit(1)
    if work:
        subprocess.run(["rm", "-rf", work])
    print(f"{label}: OK")
