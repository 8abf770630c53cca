"""quiver_http_bench, the C++ client bench/paired.py times quiver serve with: against a running
`quiver serve` it answers `latency <tokens> <count>` and `queries <count>` (the inputs' short
queries) with one time per call, and it reports a failed call (an unknown model, a server that
went away) as an error line instead of a latency.

    http_bench_test.py <quiver> <source dir> <quiver_http_bench>
"""

import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "gateway"))
import http_api_test as server  # noqa: E402 - start() and check() of the HTTP API test

HTTP_BENCH = sys.argv[3]


def client(port, inputs, model="all-MiniLM-L6-v2"):
    proc = subprocess.Popen([HTTP_BENCH, "--url", f"http://127.0.0.1:{port}", "--model", model,
                             "--inputs", inputs, "--stdin"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    server.check(proc.stdout.readline().strip() == "ready", "the client says ready")
    return proc


def ask(proc, line):
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    return json.loads(proc.stdout.readline())


def main():
    texts = {"3": ["alpha beta gamma", "one two three"], "1": ["word"]}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"sets": texts, "queries": ["find files", "print lines"]}, f)
    inputs = f.name
    proc, port, log = server.start()
    try:
        c = client(port, inputs)
        answer = ask(c, "latency 3 5")
        server.check(len(answer.get("ms", [])) == 5 and all(ms > 0 for ms in answer["ms"]),
                     f"five positive latencies: {answer}")
        answer = ask(c, "latency 1 1")
        server.check(len(answer.get("ms", [])) == 1, f"one latency for the 1-token set: {answer}")
        answer = ask(c, "latency 7 1")
        server.check("cannot run 'latency 7 1'" in answer.get("error", ""),
                     f"a length with no texts is an error: {answer}")
        answer = ask(c, "queries 3")
        server.check(len(answer.get("ms", [])) == 3 and all(ms > 0 for ms in answer["ms"]),
                     f"three positive latencies for the queries: {answer}")
        answer = ask(c, "latency -1 2")
        server.check("cannot run" in answer.get("error", ""),
                     f"the queries' key is not a length: {answer}")
        wrong = client(port, inputs, model="no-such-model")
        answer = ask(wrong, "latency 3 1")
        server.check("HTTP 404" in answer.get("error", ""), f"a 404 is an error line: {answer}")
        wrong.stdin.close()
        wrong.wait()
        proc.terminate()
        proc.wait()
        answer = ask(c, "latency 3 1")
        server.check("error" in answer and "ms" not in answer,
                     f"a server that went away is an error line: {answer}")
        c.stdin.close()
        server.check(c.wait(timeout=30) == 0, "the client exits 0 at the end of its input")
    finally:
        proc.kill()
        os.unlink(inputs)
        os.unlink(log)
    if server.FAILURES:
        sys.exit(f"{len(server.FAILURES)} failed")
    print("http bench client: all passed")


if __name__ == "__main__":
    main()
