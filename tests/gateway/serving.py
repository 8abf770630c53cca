"""`quiver serve` for the HTTP tests (standard library only): started on a free loopback port,
returned once /ready answers 200.

    proc, port, log_path = start(QUIVER, model_dir, ["--api-key", "k"])
"""

import re
import subprocess
import sys
import tempfile
import time
import urllib.request


def start(quiver, model_dir, extra=(), prefix="quiver-serve-"):
    log = tempfile.NamedTemporaryFile(prefix=prefix, suffix=".log", delete=False)
    proc = subprocess.Popen([quiver, "serve", "--model", model_dir, "--host", "127.0.0.1", "--port", "0",
                             *extra], stderr=log, stdout=subprocess.DEVNULL)
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
