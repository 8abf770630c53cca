"""What Hugging Face's own models give in bf16 on the score fixtures: the yardstick for the CUDA
engine's bf16 scores (tests/gpu/engine_stages.cc reads the file this writes).

The tiny seeded cross-encoders of tests/fixtures/tiny/ have scores bunched close together (one
spans 0.02 around -0.04), so an error measured against their spread says more about the fixture
than about the arithmetic. This runs each *ForSequenceClassification fixture through transformers
with the weights and activations in bf16 (the CUDA engine's activation type) and in f32, on the
reference's token ids, and writes the same measures the GPU check takes: the largest |score
difference| over the spread (max - min) of the f32 reference scores, and the cosine of the score
vectors.

    python3 tools/golden/hf_bf16_scores.py --out tests/fixtures/tiny/hf_bf16_scores.json

Runs where torch and transformers import (the lent GPU machine's image has both: a CUDA device is
used when present, else the CPU); standard library otherwise. Its output is committed; CI never
runs it.
"""
import argparse
import json
import math
import os
import platform
import sys


def spread_error(got, want):
    lo, hi = min(want), max(want)
    spread = hi - lo
    if not spread > 1e-6:
        spread = max(abs(hi), abs(lo))
    diff = max(abs(g - w) for g, w in zip(got, want))
    return diff / max(spread, 1e-30)


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / max(na * nb, 1e-30)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fixtures", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                           "tests", "fixtures", "tiny"))
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    import torch
    import transformers

    device = "cuda" if torch.cuda.is_available() else "cpu"
    results = []
    for name in sorted(os.listdir(args.fixtures)):
        folder = os.path.join(args.fixtures, name)
        meta_path = os.path.join(folder, "reference.meta.json")
        if not os.path.isfile(meta_path):
            continue
        with open(meta_path, encoding="utf-8") as f:
            meta = json.load(f)
        with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
            config = json.load(f)
        arch = (config.get("architectures") or [""])[0]
        if meta.get("kind") != "score" or not arch.endswith("ForSequenceClassification"):
            continue
        with open(os.path.join(folder, "reference.jsonl"), encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()]
        want = [float(v) for r in rows for v in r["output"]]
        entry = {"name": name, "architecture": arch, "rows": len(rows)}
        for label, dtype in (("bf16", torch.bfloat16), ("f32", torch.float32)):
            model = transformers.AutoModelForSequenceClassification.from_pretrained(
                folder, dtype=dtype).to(device).eval()
            got = []
            with torch.no_grad():
                for r in rows:
                    kwargs = {"input_ids": torch.tensor([r["ids"]], device=device)}
                    if "type_ids" in r:
                        kwargs["token_type_ids"] = torch.tensor([r["type_ids"]], device=device)
                    got.extend(float(v) for v in model(**kwargs).logits[0].float().cpu())
            entry[f"{label}_err_over_spread"] = spread_error(got, want)
            entry[f"{label}_cos"] = cosine(got, want)
            del model
        results.append(entry)
        print(json.dumps(entry), flush=True)

    doc = {
        "what": "Hugging Face transformers' own bf16 and f32 scores on the score fixtures against "
                "their f32 references (tools/golden/hf_bf16_scores.py)",
        "device": torch.cuda.get_device_name(0) if device == "cuda" else platform.processor(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "fixtures": results,
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    return 0 if results else 1


if __name__ == "__main__":
    sys.exit(main())
