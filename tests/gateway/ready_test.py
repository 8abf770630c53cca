"""The gateway's "ready on" line means what /ready means: it is logged once a worker has passed its
health check, not when the gateway starts listening (a worker answers ModelInfo, which the
gateway waits for at start-up, before its warm-up and fidelity gate).

  1. A worker that never passes (its int8 fidelity gate refuses at --min-int8-cosine 0.999999):
     the gateway says it listens and what it waits for, /ready answers 503, no "ready on" line;
     SIGTERM stops it with exit 0.
  2. A worker that passes: "ready on" is logged, and /ready answers 200 when it is.

    ready_test.py QUIVER SOURCE_DIR
"""

import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serving import check, finish, get_json, start_worker, wait_for  # noqa: E402

QUIVER, SOURCE = sys.argv[1], sys.argv[2]
MODEL = os.path.join(SOURCE, "models", "all-MiniLM-L6-v2")


def ready_status(port):
    return get_json(port, "/ready", timeout=5)[0]


def start_gateway(worker_port, log_dir):
    log = tempfile.NamedTemporaryFile(prefix="gateway-", suffix=".log", dir=log_dir,
                                      delete=False).name
    proc = subprocess.Popen([QUIVER, "gateway", "--model", MODEL, "--host", "127.0.0.1",
                             "--port", "0", "--workers", f"127.0.0.1:{worker_port}",
                             "--health-interval-ms", "100"],
                            stdout=subprocess.DEVNULL, stderr=open(log, "w"))
    return proc, log, int(wait_for(r" port=(\d+) ", log, proc).group(1))


def main():
    log_dir = tempfile.mkdtemp(prefix="quiver-ready-")
    procs = []
    try:
        never, never_port = start_worker(QUIVER, MODEL, log_dir,
                                         ["--quantize", "int8", "--min-int8-cosine", "0.999999"])
        procs.append(never)
        gateway, log, port = start_gateway(never_port, log_dir)
        procs.append(gateway)
        wait_for(r"listening on http://127\.0\.0\.1:\d+; ready \(GET /ready 200\) once a worker "
                 r"passes its health check", log, gateway, seconds=10)
        time.sleep(1.0)  # ten health checks
        check("no healthy worker: /ready answers 503", ready_status(port) == 503)
        check("no healthy worker: no 'ready on' line", "ready on" not in open(log).read(),
              open(log).read()[-500:])
        gateway.send_signal(signal.SIGTERM)
        code = gateway.wait(timeout=30)
        check("no healthy worker: SIGTERM stops the gateway (exit 0)", code == 0, f"exit {code}")
        check("no healthy worker: still no 'ready on' line", "ready on" not in open(log).read())

        worker, worker_port = start_worker(QUIVER, MODEL, log_dir)
        procs.append(worker)
        gateway, log, port = start_gateway(worker_port, log_dir)
        procs.append(gateway)
        wait_for(r"ready on http://127\.0\.0\.1:\d+ \(model ", log, gateway)
        check("'ready on' logged: /ready answers 200", ready_status(port) == 200)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    finish("gateway ready", log_dir)


if __name__ == "__main__":
    main()
