"""Request traces from `quiver serve --otlp-endpoint` to a collector (a local HTTP server standing in
for an OpenTelemetry collector's OTLP/HTTP receiver), end to end:

- every body the server posts parses, strictly, as OpenTelemetry's own ExportTraceServiceRequest
  (the opentelemetry-proto package's protobuf classes and protobuf's JSON mapping: an unknown or
  misspelt field, a wrong type or enum fails), is posted to /v1/traces as application/json;
- one SERVER span per request, and under it serve's engine span of each chunk (INTERNAL, queue
  wait and compute): its name, route, status code and request id (the answer's
  X-Request-Id); a traceparent's trace continued (its id, its span the parent), one saying "not
  sampled" not recorded; the service name from OTEL_SERVICE_NAME; spans queued at SIGTERM posted
  before the process exits;
- a gateway and a worker each exporting: the worker's span of each chunk a child of the gateway's
  span of the request; a gateway that does not trace passes the client's traceparent on;
- a collector that is down, or that takes the connection and never answers, costs the requests
  nothing: they are answered as fast as usual, the lost spans are counted in /metrics, and the
  server still stops promptly.

    tracing_test.py QUIVER SOURCE_DIR
"""

import http.server
import json
import os
import re
import signal
import tempfile
import socket
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
import serving  # noqa: E402
from serving import check, failures  # noqa: E402

from google.protobuf import json_format  # noqa: E402
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceRequest)

QUIVER, SOURCE = sys.argv[1], sys.argv[2]
MODEL = os.path.join(SOURCE, "models", "all-MiniLM-L6-v2")
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


class Collector:
    def __init__(self):
        self.posts = []
        posts = self.posts

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                posts.append((self.path, self.headers.get("Content-Type"), body))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def call(port, path, body=None, headers=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}",
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers)


def attributes(span):
    out = {}
    for a in span["attributes"]:
        value = a["value"]
        out[a["key"]] = int(value["intValue"]) if "intValue" in value else value["stringValue"]
    return out


def main():
    collector = Collector()
    proc, port, log = serving.start(
        QUIVER, MODEL, ["--otlp-endpoint", f"http://127.0.0.1:{collector.port}/"],
        prefix="quiver-tracing-", env={"OTEL_SERVICE_NAME": "quiver-under-test"})
    ids = {}
    try:
        s, h = call(port, "/v1/embeddings", {"input": "a first query"})
        ids["plain"] = h["X-Request-Id"]
        s, h = call(port, "/embed", {"inputs": "a query in a trace"},
                    headers={"traceparent": f"00-{TRACE}-{PARENT}-01"})
        ids["traced"] = h["X-Request-Id"]
        s, h = call(port, "/embed", {"inputs": "a query not sampled"},
                    headers={"traceparent": f"00-{TRACE}-{PARENT}-00"})
        ids["unsampled"] = h["X-Request-Id"]
        s, h = call(port, "/embed", {"inputs": "word " * 600})
        check("a refused request is answered", s == 413)
        ids["refused"] = h["X-Request-Id"]
        # Spans arrive within the export interval (1 s) while the server runs.
        end = time.time() + 10
        while time.time() < end and len(collector.posts) == 0:
            time.sleep(0.1)
        check("spans are posted while the server runs", len(collector.posts) > 0)
        s, h = call(port, "/health")
        ids["last"] = h["X-Request-Id"]
    finally:
        proc.send_signal(signal.SIGTERM)
        check("exit 0 on SIGTERM", proc.wait(timeout=30) == 0, open(log).read()[-500:])

    spans = []
    for path, content_type, body in collector.posts:
        check(f"posted to /v1/traces as application/json ({path}, {content_type})",
              path == "/v1/traces" and content_type == "application/json")
        try:
            json_format.Parse(body, ExportTraceServiceRequest(), ignore_unknown_fields=False)
            ok = True
        except json_format.ParseError as e:
            ok = False
            print(e)
        check("the body parses as OpenTelemetry's ExportTraceServiceRequest", ok, body[:300])
        doc = json.loads(body)
        for rs in doc["resourceSpans"]:
            service = {a["key"]: a["value"]["stringValue"] for a in rs["resource"]["attributes"]}
            check("service.name from OTEL_SERVICE_NAME", service.get("service.name") == "quiver-under-test",
                  service)
            for ss in rs["scopeSpans"]:
                spans.extend(ss["spans"])
    by_id = {attributes(sp).get("quiver.request_id"): sp for sp in spans}
    check("the span of a request answered just before SIGTERM is posted before exit", ids["last"] in by_id)
    check("a traceparent that says not sampled is not recorded", ids["unsampled"] not in by_id)
    plain, traced, refused = by_id.get(ids["plain"]), by_id.get(ids["traced"]), by_id.get(ids["refused"])
    check("one span per request", None not in (plain, traced, refused))
    if None in (plain, traced, refused):
        return finish()
    a = attributes(plain)
    check("a span names its method and route, kind SERVER",
          plain["name"] == "POST /v1/embeddings" and plain["kind"] == 2 and
          a["http.request.method"] == "POST" and a["http.route"] == "/v1/embeddings" and
          a["http.response.status_code"] == 200 and a["quiver.model"] == "all-MiniLM-L6-v2", plain)
    check("a new trace for a request without traceparent",
          re.fullmatch(r"[0-9a-f]{32}", plain["traceId"]) and plain["traceId"] != TRACE and
          "parentSpanId" not in plain and re.fullmatch(r"[0-9a-f]{16}", plain["spanId"]), plain)
    check("a traceparent's trace is continued, its span the parent",
          traced["traceId"] == TRACE and traced["parentSpanId"] == PARENT and
          traced["spanId"] != PARENT, traced)
    check("times in nanoseconds, the end after the start",
          0 < int(plain["endTimeUnixNano"]) - int(plain["startTimeUnixNano"]) < 60e9 and
          abs(int(plain["startTimeUnixNano"]) / 1e9 - time.time()) < 600, plain)
    engine = [sp for sp in spans if sp["name"] == "quiver.engine/Embed"]
    under = [sp for sp in engine if sp.get("parentSpanId") == plain["spanId"]]
    check("serve: the engine's span of the request's chunk, INTERNAL, a child of the request's",
          len(under) == 1 and under[0]["traceId"] == plain["traceId"] and under[0]["kind"] == 1 and
          attributes(under[0])["quiver.compute_us"] > 0 and
          attributes(under[0])["quiver.chunk.sequences"] == 1 and
          int(plain["startTimeUnixNano"]) <= int(under[0]["startTimeUnixNano"]) and
          int(under[0]["endTimeUnixNano"]) <= int(plain["endTimeUnixNano"]), under)
    check("serve: no engine span for the request whose trace is not sampled",
          [sp.get("parentSpanId") for sp in engine if sp["traceId"] == TRACE] == [traced["spanId"]],
          [(sp["traceId"], sp.get("parentSpanId")) for sp in engine])
    check("a 413 is a span with its status code and no error status (a client's error)",
          attributes(refused)["http.response.status_code"] == 413 and "code" not in refused["status"],
          refused)

    # A collector that is down: requests answered as fast as without tracing, the spans counted lost.
    dead = serving.free_port()
    proc, port, log = serving.start(QUIVER, MODEL, ["--otlp-endpoint", f"http://127.0.0.1:{dead}"],
                                    prefix="quiver-tracing-")
    try:
        start = time.time()
        for i in range(20):
            call(port, "/v1/embeddings", {"input": f"query {i}"})
        took = time.time() - start
        check(f"20 requests with the collector down in {took:.2f} s", took < 5)
        time.sleep(2.5)  # one export attempt, refused at once
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
        m = re.search(r'quiver_otlp_spans_total\{outcome="failed"\} (\d+)', metrics)
        check("spans the collector did not take are counted", m is not None and int(m.group(1)) >= 20,
              m.group(0) if m else metrics[-300:])
    finally:
        proc.send_signal(signal.SIGTERM)
        check("exit 0 on SIGTERM with the collector down", proc.wait(timeout=30) == 0)

    # A collector that takes the connection and never answers: each post gives up after its 2 s,
    # on the exporter's thread; the requests do not wait, and the server still stops.
    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(64)  # never accepted: the kernel completes the handshakes, nobody reads
    proc, port, log = serving.start(
        QUIVER, MODEL, ["--otlp-endpoint", f"http://127.0.0.1:{hung.getsockname()[1]}"],
        prefix="quiver-tracing-")
    try:
        call(port, "/v1/embeddings", {"input": "warm"})
        time.sleep(1.5)  # the exporter is now inside a post that hangs
        start = time.time()
        for i in range(20):
            call(port, "/v1/embeddings", {"input": f"query {i}"})
        took = time.time() - start
        check(f"20 requests with the collector hanging in {took:.2f} s", took < 5)
    finally:
        start = time.time()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
        took = time.time() - start
        check(f"exit 0 on SIGTERM with the collector hanging, in {took:.1f} s (posts time out)",
              code == 0 and took < 15)
        hung.close()

    check_gateway_and_worker()

    bad = subprocess.run([QUIVER, "serve", "--model", MODEL, "--port", "0", "--otlp-endpoint",
                          "https://collector:4318"], capture_output=True, text=True, timeout=60)
    check("an https endpoint is refused at start, naming the flag",
          bad.returncode == 2 and "--otlp-endpoint 'https://collector:4318'" in bad.stderr, bad.stderr[-300:])
    return finish()


def start_tier(args, prefix, pattern):
    log = tempfile.NamedTemporaryFile(prefix=prefix, suffix=".log", delete=False).name
    proc = subprocess.Popen([QUIVER, *args], stderr=open(log, "w"), stdout=subprocess.DEVNULL)
    return proc, serving.wait_for(pattern, log, proc)


def check_gateway_and_worker():
    """A gateway and a worker, each exporting: the worker's span of a chunk is a child of the
    gateway's span of the request, in the client's trace; then a gateway that does not trace
    passes the client's traceparent on, and the worker's span is the client span's child. A
    request without traceparent through the untracing gateway gives the worker no trace: no
    span."""
    for gateway_traces in (True, False):
        collector = Collector()
        endpoint = f"http://127.0.0.1:{collector.port}"
        worker, m = start_tier(["worker", "--model", MODEL, "--listen", "127.0.0.1:0",
                                "--metrics-port", "-1", "--threads", "1", "--otlp-endpoint", endpoint],
                               "quiver-tracing-worker-", r" port=(\d+) ")
        wport = int(m.group(1))
        gateway = None
        try:
            args = ["gateway", "--model", MODEL, "--host", "127.0.0.1", "--port", "0",
                    "--workers", f"127.0.0.1:{wport}", "--max-chunk-tokens", "64"]
            if gateway_traces:
                args += ["--otlp-endpoint", endpoint]
            gateway, m = start_tier(args, "quiver-tracing-gateway-", r" port=(\d+) ")
            gport = int(m.group(1))
            end = time.time() + 30
            while time.time() < end:  # until the gateway has seen the worker healthy
                try:
                    if urllib.request.urlopen(f"http://127.0.0.1:{gport}/ready", timeout=5).status == 200:
                        break
                except OSError:
                    time.sleep(0.1)
            # Three texts of about 30 tokens over chunks of 64 tokens: two chunks, two worker spans.
            texts = ["the manual page of a command and all of its options explained " * 2] * 3
            s, h = call(gport, "/embed", {"inputs": texts},
                        headers={"traceparent": f"00-{TRACE}-{PARENT}-01"})
            check(f"gateway+worker (gateway traces: {gateway_traces}): answered", s == 200)
            request_id = h.get("X-Request-Id")
            if not gateway_traces:
                s, _ = call(gport, "/embed", {"inputs": ["no trace at all"]})
                check("gateway+worker: answered without traceparent", s == 200)
        finally:
            for p in (gateway, worker):
                if p is not None:
                    p.send_signal(signal.SIGTERM)
                    p.wait(timeout=60)
        spans = [sp for _, _, body in collector.posts
                 for rs in json.loads(body)["resourceSpans"] for ss in rs["scopeSpans"]
                 for sp in ss["spans"]]
        for _, _, body in collector.posts:
            json_format.Parse(body, ExportTraceServiceRequest(), ignore_unknown_fields=False)
        outer = [sp for sp in spans if attributes(sp).get("quiver.request_id") == request_id]
        inner = [sp for sp in spans if sp["name"] == "quiver.v1.Inference/Embed"]
        if gateway_traces:
            check("the gateway's span of the request, in the client's trace",
                  len(outer) == 1 and outer[0]["traceId"] == TRACE and outer[0]["parentSpanId"] == PARENT,
                  outer)
            parent = outer[0]["spanId"] if outer else None
        else:
            parent = PARENT  # the client's span: the gateway passed its traceparent on
        check(f"the worker's spans of the chunks are children of {'the gateway span' if gateway_traces else 'the client span'}"
              " (and a chunk that carries no trace has no span)",
              len(inner) == 2 and all(sp["traceId"] == TRACE and sp["parentSpanId"] == parent for sp in inner),
              [(sp["traceId"], sp.get("parentSpanId"), parent) for sp in inner])
        a = [attributes(sp) for sp in inner]
        check("a worker span says what it computed",
              sum(x["quiver.chunk.sequences"] for x in a) == 3 and
              all(x["rpc.grpc.status_code"] == 0 and x["quiver.compute_us"] > 0 and
                  x["rpc.method"] == "Embed" for x in a), a)


def finish():
    print(f"{len(failures)} failed" if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
