#!/usr/bin/env python3
"""The OpenAI Python client (PyPI `openai`, in the project venv) against `quiver serve`, unchanged:
client.embeddings.create with float and base64 encodings, compared with the reference
embeddings of tests/fixtures/minilm.

    .venv/bin/python openai_client_test.py QUIVER_BINARY SOURCE_DIR
"""

import base64
import json
import struct
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

import openai

QUIVER, SOURCE = sys.argv[1], sys.argv[2]


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def main():
    log = tempfile.NamedTemporaryFile(prefix="quiver-openai-", suffix=".log", delete=False)
    proc = subprocess.Popen([QUIVER, "serve", "--model", os.path.join(SOURCE, "models", "all-MiniLM-L6-v2"),
                             "--host", "127.0.0.1", "--port", "0", "--api-key", "test-key"],
                            stderr=log, stdout=subprocess.DEVNULL)
    port = None
    for _ in range(300):
        m = re.search(r" port=(\d+) ", open(log.name).read())
        if m:
            port = int(m.group(1))
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=5).status == 200:
                    break
            except OSError:
                pass
        time.sleep(0.1)
    failures = []
    try:
        fixtures = [json.loads(l) for l in open(os.path.join(SOURCE, "tests", "fixtures", "minilm", "embeddings.jsonl"))]
        fixtures = [f for f in fixtures if len(f["ids"]) < 256][:12]
        texts = [f["text"] for f in fixtures]
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="test-key")
        for fmt in ("float", "base64", None):  # None: the client's default (it asks for base64)
            kwargs = {"encoding_format": fmt} if fmt else {}
            resp = client.embeddings.create(model="all-MiniLM-L6-v2", input=texts, **kwargs)
            # Asked explicitly, base64 comes back as the string; by default the client decodes it.
            vectors = [list(struct.unpack(f"<{len(base64.b64decode(d.embedding)) // 4}f", base64.b64decode(d.embedding)))
                       if isinstance(d.embedding, str) else d.embedding for d in resp.data]
            worst = min(cosine(v, f["embedding"]) for v, f in zip(vectors, fixtures))
            print(f"openai client, encoding_format={fmt}: {len(resp.data)} embeddings, worst cosine {worst:.9f}, usage {resp.usage.prompt_tokens} tokens")
            if worst < 0.99999 or len(resp.data) != len(texts) or resp.usage.prompt_tokens <= 0:
                failures.append(fmt)
        short = client.embeddings.create(model="all-MiniLM-L6-v2", input="hello", dimensions=32)
        if len(short.data[0].embedding) != 32:
            failures.append("dimensions")
        try:
            client.embeddings.create(model="other-model", input="x")
            failures.append("unknown model accepted")
        except openai.NotFoundError as e:
            print("unknown model ->", e.status_code)
        try:
            openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="wrong").embeddings.create(model="all-MiniLM-L6-v2", input="x")
            failures.append("wrong key accepted")
        except openai.AuthenticationError as e:
            print("wrong key ->", e.status_code)
    finally:
        proc.send_signal(signal.SIGTERM)
        if proc.wait(timeout=30) != 0:
            failures.append("exit status")
    if failures:
        print("openai client test failed:", failures)
        sys.exit(1)
    print("openai client test: all checks passed")


if __name__ == "__main__":
    main()
