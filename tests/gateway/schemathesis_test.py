#!/usr/bin/env python3
"""schemathesis (PyPI, in the project venv) against quiver's own OpenAPI document, served by a live
`quiver serve` at /openapi.json: a bounded run (a fixed seed, a fixed number of examples per
operation, one worker) of every operation, for an embedding model and for a reranker.

    .venv/bin/python schemathesis_test.py QUIVER_BINARY SOURCE_DIR

QUIVER_SCHEMA_EXAMPLES and QUIVER_SCHEMA_SEED (25 and 1 in `make test`) make a longer or another
run, as a soak outside CI.

Checks: no server error; every status code, content type, header and body as the document says;
schema-violating requests refused. Not checked: that every schema-valid request is accepted
(positive_data_acceptance), since some limits depend on the model and cannot be written in the
static document (dimensions up to the hidden size, truncate_prompt_tokens up to the model's
length, text_1 with one text or as many as text_2, prompt names).
"""

import os
import signal
import subprocess
import sys
import tempfile

from serving import start as start_serve

QUIVER, SOURCE = sys.argv[1], sys.argv[2]
SCHEMATHESIS = os.path.join(os.path.dirname(sys.executable), "schemathesis")
KEY = "schema-test-key"
EXAMPLES = os.environ.get("QUIVER_SCHEMA_EXAMPLES", "25")
SEED = os.environ.get("QUIVER_SCHEMA_SEED", "1")


def run(model_dir):
    proc, port, _ = start_serve(QUIVER, model_dir, ["--api-key", KEY], "quiver-schema-")
    base = f"http://127.0.0.1:{port}"
    try:
        with tempfile.TemporaryDirectory() as work:
            cmd = [SCHEMATHESIS, "run", f"{base}/openapi.json", "--url", base,
                   "--header", f"Authorization: Bearer {KEY}",
                   "--checks", "all", "--exclude-checks", "positive_data_acceptance",
                   "--phases", "examples,coverage,fuzzing", "--max-examples", EXAMPLES, "--seed", SEED,
                   "--workers", "1", "--generation-database", "none", "--no-color",
                   "--request-timeout", "60"]
            print("+", " ".join(cmd), flush=True)
            rc = subprocess.run(cmd, cwd=work, timeout=900 * max(1, int(EXAMPLES) // 25)).returncode
    finally:
        proc.send_signal(signal.SIGTERM)
        exit_code = proc.wait(timeout=30)
    return rc, exit_code


def main():
    failures = []
    for name, model_dir in [("all-MiniLM-L6-v2", os.path.join(SOURCE, "models", "all-MiniLM-L6-v2")),
                            ("tiny cross-encoder", os.path.join(SOURCE, "tests", "fixtures", "tiny", "bert_cross_encoder"))]:
        if not os.path.isdir(model_dir):
            sys.exit(f"missing model folder {model_dir}")
        rc, exit_code = run(model_dir)
        if rc != 0:
            failures.append(f"schemathesis found failures against {name} (exit {rc})")
        if exit_code != 0:
            failures.append(f"quiver serve ({name}) exited {exit_code} on SIGTERM")
    for f in failures:
        print("FAIL:", f)
    if failures:
        sys.exit(1)
    print("schemathesis test: all checks passed")


if __name__ == "__main__":
    main()
