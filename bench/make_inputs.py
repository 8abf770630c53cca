"""Cuts corpus/ texts to exact token lengths for the benchmark suites.

Every system in a run gets the same texts from the same file: for each length L, `count`
documents cut so that the model's tokenizer (Hugging Face `tokenizers`, with special tokens) gives
exactly L tokens, plus short queries for the scoring suite. A document is cut at the end of its
(L - specials)-th token and re-encoded; a cut that does not give L tokens again (a word piece that
merges differently) is skipped, so every text is checked, not assumed.

    python bench/make_inputs.py --tokenizer models/all-MiniLM-L6-v2/tokenizer.json \
        --corpus corpus --out .cache/bench/inputs.json [--lengths 16:100,100:100,200:50]
"""

import argparse
import json
import os

from tokenizers import Tokenizer

LENGTHS = {16: 100, 32: 100, 128: 100, 512: 50, 4096: 8}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--lengths", help="LENGTH:COUNT,... instead of the suites' sets, e.g. "
                        "16:100,100:100,128:100,200:50 (lengths that are not whole tile steps)")
    args = parser.parse_args()
    lengths = LENGTHS
    if args.lengths:
        lengths = {}
        for item in args.lengths.split(","):
            length, count = item.split(":")
            lengths[int(length)] = int(count)

    tokenizer = Tokenizer.from_file(args.tokenizer)
    tokenizer.no_truncation()
    tokenizer.no_padding()
    specials = len(tokenizer.encode("").ids)
    docs = []
    for name in ("docs_en.jsonl", "docs_multi.jsonl"):
        with open(os.path.join(args.corpus, name), encoding="utf-8") as f:
            docs += [json.loads(line)["text"] for line in f]
    with open(os.path.join(args.corpus, "queries.jsonl"), encoding="utf-8") as f:
        queries = [json.loads(line)["text"] for line in f][:64]

    sets = {}
    for length, count in lengths.items():
        texts = []
        for doc in docs:
            encoding = tokenizer.encode(doc, add_special_tokens=False)
            if len(encoding.ids) < length - specials:
                continue
            cut = doc[: encoding.offsets[length - specials - 1][1]]
            if len(tokenizer.encode(cut).ids) == length:
                texts.append(cut)
            if len(texts) == count:
                break
        if len(texts) < count:
            raise SystemExit(f"only {len(texts)} corpus texts reach {length} tokens")
        sets[str(length)] = texts
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"tokenizer": args.tokenizer, "sets": sets, "queries": queries}, f,
                  ensure_ascii=False)
    print(f"wrote {args.out}: " + ", ".join(f"{len(v)} x {k} tokens" for k, v in sets.items()))


if __name__ == "__main__":
    main()
