#!/usr/bin/env python3
"""deploy/kubernetes: every kustomization renders (kubectl kustomize), every object validates
against Kubernetes 1.32's own schemas, strictly (kubernetes-validate, offline), and the pieces
agree with each other and with the binary:

  - the gateway's --workers dns:NAME:PORT names the headless worker Service and its port;
  - readiness on /ready, liveness on /health, on ports the containers declare;
  - terminationGracePeriodSeconds covers preStop + the drain (--drain-timeout, --drain-grace-ms);
  - every $(VAR) in the arguments is defined in the container's env; every --flag is one that
    `quiver <command> --help` lists;
  - the model folder comes from a read-only volume; the API key from a Secret;
  - the gpu overlay asks for nvidia.com/gpu and --device=cuda, the cpu overlay for neither;
  - the PodDisruptionBudgets and the HPA point at the Deployments, and the HPA's metric is one
    the worker exports;
  - the embed Job is Indexed with completions equal to its --shards, writing per-shard outputs;
  - CPU workers and the Job whose threads are left at 0 have a CPU limit equal to their request
    (the threads default to the limit).

A client-side `kubectl apply --dry-run=client` needs an API server to map kinds, and there is
none here, hence the offline schemas.

    manifests_test.py QUIVER_BINARY SOURCE_DIR
"""

import os
import re
import shutil
import subprocess
import sys

import yaml

QUIVER, SOURCE = sys.argv[1], sys.argv[2]
DEPLOY = os.path.join(SOURCE, "deploy", "kubernetes")
VALIDATE = os.path.join(os.path.dirname(sys.executable), "kubernetes-validate")
failures = []


def check(name, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else f": {detail}"))
    if not ok:
        failures.append(name)


def render(path):
    r = subprocess.run(["kubectl", "kustomize", path], capture_output=True, text=True, timeout=60)
    check(f"kubectl kustomize {os.path.relpath(path, SOURCE)}", r.returncode == 0, r.stderr)
    return r.stdout, [d for d in yaml.safe_load_all(r.stdout) if d]


def validate(name, text):
    with open(f"/tmp/quiver-manifests-{os.getpid()}.yaml", "w") as f:
        f.write(text)
    r = subprocess.run([VALIDATE, "--strict", "-k", "1.32.0", "--quiet", f.name],
                       capture_output=True, text=True, timeout=120)
    os.remove(f.name)
    check(f"{name}: every object validates against Kubernetes 1.32 (strict)", r.returncode == 0,
          (r.stdout + r.stderr)[-1500:])


def find(docs, kind, name):
    for d in docs:
        if d["kind"] == kind and d["metadata"]["name"] == name:
            return d
    return None


_help = {}


def flags_of(command):
    if command not in _help:
        r = subprocess.run([QUIVER, command, "--help"], capture_output=True, text=True)
        _help[command] = set(re.findall(r"(--[a-z0-9-]+)", r.stdout))
    return _help[command]


def check_container(where, c, pod, config):
    args = c.get("args", [])
    command = args[0]
    env = {e["name"]: e for e in c.get("env", [])}
    used = set(re.findall(r"\$\((\w+)\)", " ".join(args)))
    check(f"{where}: every $(VAR) in the arguments is in env", used <= set(env),
          sorted(used - set(env)))
    for e in env.values():
        ref = e.get("valueFrom", {}).get("configMapKeyRef")
        if ref:
            check(f"{where}: {e['name']} is in the ConfigMap", ref["key"] in config,
                  ref["key"])
    unknown = [a.split("=")[0] for a in args[1:]
               if a.startswith("--") and a.split("=")[0] not in flags_of(command)]
    check(f"{where}: every flag is one `quiver {command} --help` lists", not unknown, unknown)
    mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
    model = next((a.split("=", 1)[1] for a in args if a.startswith("--model=")), None)
    if model is not None:
        model = re.sub(r"\$\((\w+)\)", lambda m: config.get(m.group(1), ""), model)
        mount = next((m for p, m in mounts.items() if model.startswith(p.rstrip("/") + "/")), None)
        vol = next((v for v in pod["volumes"] if mount and v["name"] == mount["name"]), None)
        check(f"{where}: the model folder {model} is on a read-only volume",
              mount is not None and mount.get("readOnly") and vol is not None
              and ("persistentVolumeClaim" in vol or "image" in vol or "hostPath" in vol), mount)
    sc = c.get("securityContext", {})
    check(f"{where}: no privilege escalation, all capabilities dropped",
          sc.get("allowPrivilegeEscalation") is False and "ALL" in sc.get("capabilities", {})
          .get("drop", []))
    check(f"{where}: runs as non-root", pod.get("securityContext", {}).get("runAsNonRoot"))
    return args, env


def check_cpu_threads(where, c, threads):
    """A CPU worker's compute threads default (0) to the CPUs its container may use, i.e. its CPU
    limit rounded up (common/cpu_budget.h): with a limit, that is its request, not the node."""
    res = c.get("resources", {})
    limit, request = res.get("limits", {}).get("cpu"), res.get("requests", {}).get("cpu")
    check(f"{where}: threads {threads} follow a CPU limit equal to the request",
          str(threads) != "0" or (limit is not None and limit == request), (threads, res))


def check_service_tier(name, docs):
    config = find(docs, "ConfigMap", "quiver-limits")
    config = config["data"] if config else {}
    for dep_name, cmd in (("quiver-gateway", "gateway"), ("quiver-worker", "worker")):
        dep = find(docs, "Deployment", dep_name)
        check(f"{name}: Deployment {dep_name}", dep is not None)
        if dep is None:
            continue
        pod = dep["spec"]["template"]["spec"]
        c = pod["containers"][0]
        where = f"{name}/{dep_name}"
        args, env = check_container(where, c, pod, config)
        check(f"{where}: runs `quiver {cmd}`", args[0] == cmd, args[:1])
        fmt = env.get("QUIVER_LOG_FORMAT", {}).get("valueFrom", {}).get("configMapKeyRef", {})
        check(f"{where}: logs JSON lines (QUIVER_LOG_FORMAT from the ConfigMap)",
              config.get(fmt.get("key")) == "json", fmt)
        otlp = env.get("QUIVER_OTLP_ENDPOINT", {}).get("valueFrom", {}).get("configMapKeyRef", {})
        check(f"{where}: the trace collector from the ConfigMap (QUIVER_OTLP_ENDPOINT; empty: none)",
              otlp.get("key") in config and config[otlp["key"]] in ("", None) or
              str(config.get(otlp.get("key"), "")).startswith("http://"), otlp)
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        rp, lp = c["readinessProbe"]["httpGet"], c["livenessProbe"]["httpGet"]
        check(f"{where}: readiness on /ready, liveness on /health, on declared ports",
              rp["path"] == "/ready" and lp["path"] == "/health" and rp["port"] in ports
              and lp["port"] in ports, (rp, lp))
        pre = c.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
        grace = pod.get("terminationGracePeriodSeconds", 30)
        if cmd == "gateway":
            drain = int(config.get("DRAIN_TIMEOUT", 30))
        else:
            drain_ms = next((int(a.split("=")[1]) for a in args
                             if a.startswith("--drain-grace-ms=")), 1000)
            drain = drain_ms / 1000 + 30  # + the longest admitted work it finishes first
        check(f"{where}: terminationGracePeriodSeconds {grace} covers preStop {pre} s + drain "
              f"{drain:.0f} s", grace >= pre + drain, grace)
        labels = dep["spec"]["template"]["metadata"]["labels"]
        pdb = find(docs, "PodDisruptionBudget", dep_name)
        check(f"{where}: a PodDisruptionBudget selects its pods",
              pdb is not None and all(labels.get(k) == v for k, v in
                                      pdb["spec"]["selector"]["matchLabels"].items()))
        if cmd == "gateway":
            workers = next(a.split("=", 1)[1] for a in args if a.startswith("--workers="))
            m = re.fullmatch(r"dns:([\w.-]+):(\d+)", workers)
            svc = find(docs, "Service", m.group(1).split(".")[0]) if m else None
            check(f"{where}: --workers {workers} is the headless worker Service and its port",
                  svc is not None and svc["spec"].get("clusterIP") == "None"
                  and int(m.group(2)) in [p["port"] for p in svc["spec"]["ports"]], workers)
            key = env.get("QUIVER_API_KEY", {}).get("valueFrom", {}).get("secretKeyRef")
            check(f"{where}: the API key comes from a Secret", key is not None, env.keys())
            svc = find(docs, "Service", "quiver-gateway")
            check(f"{where}: a Service in front of it",
                  svc is not None and all(labels.get(k) == v
                                          for k, v in svc["spec"]["selector"].items()))
        gpus = c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu")
        if cmd == "worker" and name.endswith("gpu"):
            check(f"{where}: one GPU and --device=cuda", gpus == "1" and "--device=cuda" in args,
                  (gpus, args))
        else:
            check(f"{where}: no GPU asked for", gpus is None and "--device=cuda" not in args)
        if cmd == "worker" and not name.endswith("gpu"):
            check_cpu_threads(where, c, config.get("WORKER_THREADS"))
    hpa = find(docs, "HorizontalPodAutoscaler", "quiver-worker")
    if hpa is not None:
        metric = hpa["spec"]["metrics"][0]["pods"]["metric"]["name"]
        exported = subprocess.run(["grep", "-rq", f'"{metric}"', os.path.join(SOURCE, "scheduler"),
                                   os.path.join(SOURCE, "worker")]).returncode == 0
        check(f"{name}: the HPA scales the worker Deployment on {metric}, which workers export",
              hpa["spec"]["scaleTargetRef"]["name"] == "quiver-worker" and exported)
    return hpa is not None


def main():
    if shutil.which("kubectl") is None:
        sys.exit("kubectl is not installed (scripts/setup.sh installs Debian's kubernetes-client)")
    hpas = 0
    for overlay in ("cpu", "gpu"):
        text, docs = render(os.path.join(DEPLOY, "overlays", overlay))
        validate(f"overlays/{overlay}", text)
        hpas += check_service_tier(f"overlays/{overlay}", docs)
    check("an HPA example on the queue metric is rendered (cpu overlay)", hpas >= 1)

    text, docs = render(os.path.join(DEPLOY, "embed-job"))
    validate("embed-job", text)
    job = next((d for d in docs if d["kind"] == "Job"), None)
    check("embed-job: a Job", job is not None)
    if job is not None:
        pod = job["spec"]["template"]["spec"]
        args, _ = check_container("embed-job", pod["containers"][0], pod, {})
        threads = next((a.split("=")[1] for a in args if a.startswith("--threads=")), "0")
        check_cpu_threads("embed-job", pod["containers"][0], threads)
        shards = next((int(a.split("=")[1]) for a in args if a.startswith("--shards=")), None)
        out = next((a for a in args if a.startswith("--output=")), "")
        check("embed-job: Indexed, completions = --shards, an output per shard",
              job["spec"].get("completionMode") == "Indexed"
              and job["spec"]["completions"] == shards and "{shard}" in out, (shards, out))
        check("embed-job: restartPolicy Never (a failed pod is replaced and resumes)",
              pod.get("restartPolicy") == "Never")
    if failures:
        print(f"{len(failures)} FAILED")
        sys.exit(1)
    print("manifests: OK")


if __name__ == "__main__":
    main()
