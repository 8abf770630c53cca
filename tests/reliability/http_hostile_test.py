"""Hostile HTTP input against a real `quiver serve` on loopback (standard library only), one case
per defect issue 17 found at the HTTP layer plus the neighbours that already held. Each case
speaks raw bytes on its own connection and bounds its wait; the whole file runs in seconds.

    python3 tests/reliability/http_hostile_test.py QUIVER MODEL_DIR
"""

import os
import re
import resource
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "gateway"))
import serving  # noqa: E402

KEY = "secret-key"
BODY = b'{"inputs":"hello world"}'


def ResponseComplete(out):
    """True once `out` holds a whole response: its head and, where it declares one, its body.

    The body may come in several segments (the metrics page does); stopping at the head alone
    would cut it at a segment boundary.
    """
    head, sep, body = out.partition(b"\r\n\r\n")
    if not sep:
        return False
    length = re.search(rb"(?im)^content-length:\s*(\d+)\s*$", head)
    return length is None or len(body) >= int(length.group(1))


def exchange(port, data, wait=2.0, until_close=True, then=None):
    """Sends `data`, reads until the server closes (or `wait` passes); returns (bytes, closed)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=wait)
    s.sendall(data)
    out, closed, deadline = b"", False, time.time() + wait
    try:
        while time.time() < deadline:
            s.settimeout(max(0.01, deadline - time.time()))
            chunk = s.recv(65536)
            if not chunk:
                closed = True
                break
            out += chunk
            if then is not None and b"100 Continue" in out:
                s.sendall(then)
                then = None
            if not until_close and ResponseComplete(out):
                break
    except socket.timeout:
        pass
    except ConnectionResetError:
        closed = True
    s.close()
    return out, closed


def status_of(response):
    m = re.match(rb"HTTP/1\.1 (\d{3})", response)
    return int(m.group(1)) if m else None


def post(path, body, extra=b"", key=True):
    auth = b"Authorization: Bearer " + KEY.encode() + b"\r\n" if key else b""
    return (b"POST " + path + b" HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n" + auth +
            extra + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


failures = []


def check(name, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else f": {detail}"))
    if not ok:
        failures.append(name)


def main():
    quiver, model = sys.argv[1], sys.argv[2]
    # Room for 2,000 connections on both ends (the servers inherit the limit).
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 8192 if hard == resource.RLIM_INFINITY else min(hard, 8192)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    proc, port, log = serving.start(quiver, model, ["--api-key", KEY, "--idle-timeout", "1",
                                                    "--header-timeout", "1"],
                                    prefix="quiver-hostile-")
    try:
        run(port)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    proc, port, log2 = serving.start(quiver, model, ["--max-connections", "4",
                                                     "--max-queued-tokens", "8192",
                                                     "--cors-allow-origin", "*"],
                                     prefix="quiver-hostile-limits-")
    try:
        run_limits(port)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log = log if not failures else log2
    proc, port, log3 = serving.start(quiver, model, ["--max-body-bytes-in-flight", "1000000",
                                                     "--max-inputs", "10000000"],
                                     prefix="quiver-hostile-bodies-")
    try:
        held_before(port)
        run_bodies(proc, port)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log = log if not failures else log3
    if failures:
        print(open(log).read()[-3000:])
        sys.exit(f"{len(failures)} case(s) failed: {failures}")


def held_before(port):
    """The neighbours that held when issue 17 was filed, kept so that they keep holding."""
    # Pipelining: three requests in one write, three answers in order.
    three = b"".join(b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n" for _ in range(2)) + \
        b"GET /ready HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    out, closed = exchange(port, three, wait=5.0)
    check("three pipelined requests get three answers in order",
          out.count(b"HTTP/1.1 200") == 3 and out.rfind(b'"ready"') > out.rfind(b'"status"') and closed,
          out[:300])
    # Path traversal: nothing is served from the file system.
    for path in (b"/../../etc/passwd", b"/%2e%2e/%2e%2e/etc/passwd", b"/static/..%2f..%2fetc/passwd"):
        out, _ = exchange(port, b"GET " + path + b" HTTP/1.1\r\nHost: t\r\n\r\n", until_close=False)
        check(f"path traversal {path.decode()} is 404 or 400, no file", status_of(out) in (400, 404)
              and b"root:" not in out, out[:200])
    # Deep JSON nesting: refused at once (simdjson's depth limit), the server fine after.
    deep = b"[" * 200000 + b"]" * 200000
    start = time.time()
    out, _ = exchange(port, post(b"/embed", b'{"inputs":' + deep + b"}"), wait=10.0, until_close=False)
    check("200,000 levels of JSON nesting are 400 at once", status_of(out) == 400
          and time.time() - start < 5, out[:200])
    # 2,000 idle keep-alive connections (fewer where the descriptor limit is lower): held open,
    # and a new client is still served at once.
    idle = []
    count = max(100, min(2000, (resource.getrlimit(resource.RLIMIT_NOFILE)[0] - 200) // 2))
    name = f"with {count} idle keep-alive connections open, a new client is served"
    try:
        for _ in range(count):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n")
            idle.append(s)
        for s in idle:
            s.recv(4096)
        start = time.time()
        out, _ = exchange(port, post(b"/embed", BODY), until_close=False, wait=10.0)
        check(name, status_of(out) == 200 and time.time() - start < 5, out[:200])
    except OSError as e:
        check(name, False, f"after {len(idle)} connections: {e!r}")
    finally:
        for s in idle:
            s.close()


def run(port):
    # Transfer codings other than chunked: 400 and close, the body never answered as a request.
    for coding in [b"gzip", b"chunked, identity", b"identity", b"gzip, chunked"]:
        smuggled = post(b"/embed", b"", extra=b"Transfer-Encoding: " + coding + b"\r\n")
        smuggled = smuggled.replace(b"Content-Length: 0\r\n", b"")
        out, closed = exchange(port, smuggled + b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n")
        check(f"transfer-encoding {coding.decode()!r} is 400 and closes",
              status_of(out) == 400 and closed and out.count(b"HTTP/1.1 ") == 1, out[:200])
    chunked = (b"POST /embed HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
               b"Authorization: Bearer " + KEY.encode() + b"\r\nTransfer-Encoding: chunked\r\n\r\n" +
               b"%x\r\n" % len(BODY) + BODY + b"\r\n0\r\n\r\n")
    out, _ = exchange(port, chunked, until_close=False)
    check("chunked bodies still work", status_of(out) == 200, out[:200])
    # Content-Length with Transfer-Encoding (held before): refused, never two readings.
    both = post(b"/embed", BODY, extra=b"Transfer-Encoding: chunked\r\n")
    out, closed = exchange(port, both)
    check("Content-Length and Transfer-Encoding together are refused", status_of(out) == 400
          and closed, out[:200])

    # Oversized header blocks: 431; malformed requests: 400 (not a silent close).
    out, closed = exchange(port, b"GET /health HTTP/1.1\r\nHost: t\r\nX-Big: " + b"a" * 9000 + b"\r\n\r\n")
    check("a header block over 8 KB is 431", status_of(out) == 431 and closed, out[:200])
    for garbage in [b"GARBAGE\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n", b"GET /health HTTP/1.1\r\nNo colon\r\n\r\n"]:
        out, closed = exchange(port, garbage)
        check(f"malformed {garbage[:16]!r} is 400", status_of(out) == 400 and closed, out[:200])

    # Expect: 100-continue is answered before the body is sent.
    request = post(b"/embed", BODY, extra=b"Expect: 100-continue\r\n")
    head = request[:request.index(b"\r\n\r\n") + 4]
    out, _ = exchange(port, head, wait=3.0, then=BODY)  # the idle timeout closes it after
    out2, _ = exchange(port, head, wait=3.0, until_close=False)  # returns on the 100
    check("Expect: 100-continue gets 100 at once", out2.startswith(b"HTTP/1.1 100 Continue"),
          out2[:100])
    check("then the request's answer", b"HTTP/1.1 200" in out, out[:200])

    # Auth and limits before the body: answered with the body unsent.
    head = (b"POST /embed HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
            b"Content-Length: 4000000\r\n\r\n")
    start = time.time()
    out, closed = exchange(port, head, wait=3.0)
    check("401 from the headers alone, with WWW-Authenticate, the body never read",
          status_of(out) == 401 and b"WWW-Authenticate: Bearer" in out and closed
          and time.time() - start < 2.0, out[:300])
    for scheme in [b"bearer", b"BEARER"]:
        out, _ = exchange(port, post(b"/embed", BODY).replace(b"Bearer", scheme), until_close=False)
        check(f"the scheme is case-insensitive ({scheme.decode()})", status_of(out) == 200, out[:200])
    out, _ = exchange(port, post(b"/embed", BODY).replace(KEY.encode(), b"wrong-key!"))
    check("a wrong key is 401", status_of(out) == 401, out[:200])
    head = (b"POST /embed HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer " + KEY.encode() +
            b"\r\nContent-Length: 99999999\r\n\r\n")
    start = time.time()
    out, closed = exchange(port, head, wait=3.0)
    check("a declared body over --max-body-bytes is 413 at once", status_of(out) == 413 and closed
          and time.time() - start < 2.0, out[:200])
    out, _ = exchange(port, b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n", until_close=False)
    check("/health needs no key", status_of(out) == 200, out[:200])

    # Ids past 32 bits are not wrapped into the vocabulary.
    out, _ = exchange(port, post(b"/decode", b'{"ids":[4294974888]}'), until_close=False)
    check("/decode refuses 2^32 + 7592", status_of(out) == 422, out[:300])
    # Ids are checked against the vocabulary on every route: embedding routes in the engine (400),
    # /decode against the tokenizer (422, where it decoded to "" before).
    out, _ = exchange(port, post(b"/decode", b'{"ids":[101, 999999]}'), until_close=False)
    check("/decode refuses an id outside the vocabulary", status_of(out) == 422
          and b"999999" in out, out[:300])
    for path, body in ((b"/embed", b'{"inputs":[[101, 30522, 102]]}'),
                       (b"/v1/embeddings", b'{"input":[101, 999999]}')):
        out, _ = exchange(port, post(path, body), until_close=False, wait=10.0)
        check(f"{path.decode()} refuses an id outside the vocabulary",
              status_of(out) == 400 and b"outside the vocabulary" in out, out[:300])

    # A path with a quote never breaks the metrics page, and unknown paths add no label.
    exchange(port, b'GET /a"b HTTP/1.1\r\nHost: t\r\n\r\n', until_close=False)
    exchange(port, b"GET /nope-1234 HTTP/1.1\r\nHost: t\r\n\r\n", until_close=False)
    out, _ = exchange(port, b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n", until_close=False, wait=2.0)
    page = out.split(b"\r\n\r\n", 1)[-1]
    good = re.compile(rb'^(#.*|[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_]+="([^"\\]|\\.)*",?)*\})? \S+)$')
    bad_lines = [l for l in page.split(b"\n") if l and not good.match(l)]
    check("the metrics page parses after hostile paths", not bad_lines and b"nope-1234" not in page,
          bad_lines[:3])

    # Timeouts are configurable: an idle keep-alive connection and a slow header are closed.
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n")
    s.recv(65536)
    start = time.time()
    try:
        closed = s.recv(65536) == b""
    except (socket.timeout, ConnectionResetError):
        closed = False
    check("--idle-timeout 1 closes an idle keep-alive connection", closed and time.time() - start < 3,
          time.time() - start)
    s.close()
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    start = time.time()
    closed = False
    try:
        for _ in range(8):  # slowloris: a byte every 0.4 s
            s.sendall(b"G")
            time.sleep(0.4)
    except (BrokenPipeError, ConnectionResetError):
        closed = True
    if not closed:
        try:
            closed = s.recv(65536) == b""
        except (socket.timeout, ConnectionResetError):
            closed = True
    check("--header-timeout 1 closes a slow header", closed and time.time() - start < 5,
          time.time() - start)
    s.close()


def run_limits(port):
    # A request larger than the queue can ever admit: 413 at once, naming the limit, not 429.
    texts = ",".join(['"%s"' % ("word " * 12)] * 1500)
    start = time.time()
    out, _ = exchange(port, post(b"/embed", b'{"inputs":[' + texts.encode() + b"]}", key=False),
                      wait=10.0, until_close=False)
    check("a request over --max-queued-tokens is 413 at once, naming the limit",
          status_of(out) == 413 and b"--max-queued-tokens" in out and time.time() - start < 5,
          out[:300])
    out, _ = exchange(port, post(b"/embed", BODY, key=False), until_close=False)
    check("a request that fits is still answered", status_of(out) == 200, out[:200])

    # --max-connections 4: connections opened one by one and kept open (each served once) are
    # refused from the fifth on at the latest (fewer, when an earlier test's connection is still
    # closing on the server's side), with 503, Retry-After and a close (and, with any origin
    # allowed, CORS: a page's script may read it although the request was never read); once one
    # closes, a new one is served again.
    held, refused = [], None
    for _ in range(8):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n")
        reply = b""
        try:
            while b"\r\n\r\n" not in reply or not reply.endswith(b"}"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                reply += chunk
        except socket.timeout:
            pass
        if status_of(reply) == 503:
            refused = reply
            s.close()
            break
        held.append(s)
    check("a connection over --max-connections is 503 with Retry-After and an X-Request-Id",
          refused is not None and b"Retry-After: 1" in refused and b"Connection: close" in refused
          and re.search(rb"X-Request-Id: [0-9a-f]{32}\r\n", refused) is not None
          and b"Access-Control-Allow-Origin: *\r\n" in refused
          and len(held) <= 4, (len(held), (refused or b"")[:300]))
    for s in held[1:]:
        s.close()
    time.sleep(0.3)
    out, _ = exchange(port, b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n", until_close=False)
    check("below the limit again, connections are served", status_of(out) == 200, out[:200])
    if held:
        held[0].close()


def peak_rss_kb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM"):
            return int(line.split()[1])
    return 0


def run_bodies(proc, port):
    # Bodies in flight are bounded in bytes: with 1 MB, a second 600 KB body waits unread (its
    # 100 Continue unsent) until the first request is answered.
    def head(length):
        return (b"POST /embed HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                b"Expect: 100-continue\r\nContent-Length: " + str(length).encode() + b"\r\n\r\n")

    body = b'{"inputs":"' + b"a" * (600000 - 13) + b'"}'
    a = socket.create_connection(("127.0.0.1", port), timeout=5)
    a.sendall(head(len(body)))
    first = a.recv(4096)
    b = socket.create_connection(("127.0.0.1", port), timeout=5)
    b.sendall(head(len(body)))
    b.settimeout(1.0)
    try:
        early = b.recv(4096)
    except socket.timeout:
        early = b""
    check("the first body is asked for (100 Continue)", first.startswith(b"HTTP/1.1 100"), first[:100])
    check("a body over --max-body-bytes-in-flight waits unread, no 100 Continue",
          early == b"", early[:100])
    a.sendall(body)
    a.settimeout(10)
    answer = a.recv(4096)
    b.settimeout(10)
    try:
        later = b.recv(4096)
    except socket.timeout:
        later = b""
    check("once the first is answered, the second is asked for",
          status_of(answer) is not None and later.startswith(b"HTTP/1.1 100"), (answer[:80], later[:80]))
    b.sendall(body)
    b.recv(4096)
    a.close()
    b.close()

    # Parse memory: an 8 MB body of one-digit token ids (the worst case per byte) costs a bounded
    # multiple of itself: +501 MB before the request parse went to simdjson's tape, about +130 MB now.
    ids = b'{"inputs":[' + b",".join([b"1"] * 3999990) + b"]}"
    before = peak_rss_kb(proc.pid)
    out, _ = exchange(port, post(b"/embed", ids, key=False), wait=60.0, until_close=False)
    grown_mb = (peak_rss_kb(proc.pid) - before) / 1024
    check("an 8 MB body of token ids peaks under 24x its size", status_of(out) in (413, 400)
          and grown_mb < 24 * 8, f"+{grown_mb:.0f} MB, {out[:120]}")
    print(f"     (8 MB of ids: peak RSS +{grown_mb:.0f} MB)")


if __name__ == "__main__":
    main()
