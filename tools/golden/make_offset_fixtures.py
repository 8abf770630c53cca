#!/usr/bin/env python3
"""Reference token offsets from Hugging Face `tokenizers` for quiver's /tokenize (TEI's start and
stop): UTF-8 byte offsets [start, stop) of each token in the text it came from, as TEI's Rust
router reports them, null for the special tokens the post-processor adds.

    python3 tools/golden/make_offset_fixtures.py   (with tokenizers==VERSIONS.json's version)

Writes tests/fixtures/tokenizers/<each fixture tokenizer>/offsets.jsonl (WordPiece, byte-level
BPE, and the two Unigram ones with Metaspace, behind NFKC and behind XLM-R's Precompiled rules):
the queries of corpus/ and every
400th line of the document files (English and multilingual: accents, CJK, other scripts), plus a
few texts that stress the alignment (accents stripped, case folded, CJK spacing, control
characters, typed special tokens, unknown words).
"""

import json
from pathlib import Path

from tokenizers import Tokenizer

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "tokenizers"

EXTRA = [
    "Café déjà vu: naïve façade",
    "ÅNGSTRÖM Ünïcödé",
    "中文分词测试 mixed 日本語",
    "tab\there\x07bell\u200bzero-width",
    "[CLS] typed [SEP] specials [MASK]",
    "a" * 120,
    "e\u0301 combining acute, ﬁ ligature, Ⅻ numeral",
    "",
    "   leading and trailing   ",
    # sentencepiece's rules (Precompiled): full-width forms, a ligature, a circled digit, a
    # full-width letter whose accent the cluster rule drops, control characters and newlines
    # removed or turned into spaces, runs of spaces collapsed
    "\uff26\uff55\uff4c\uff4c \ufb01ne \u2460\u2461 \uff21\u0301 a\x01b\x7f c\n\nd\te     f",
    "\x01leading control, then \u3000ideographic\u3000spaces",
    # XLM-R's added tokens inside the text: each section after one is pre-tokenized alone
    # (Metaspace's prefix again), <mask> strips the space on its left
    "<s>typed start</s> then a <mask> token<pad>and <unk>x",
]


def byte_offsets(text, char_offsets):
    # Python's tokenizers gives character offsets; TEI reports the Rust side's bytes.
    starts = [0]
    for ch in text:
        starts.append(starts[-1] + len(ch.encode("utf-8")))
    return [[starts[a], starts[b]] for a, b in char_offsets]


def main():
    texts = [json.loads(l)["text"] for l in open(ROOT / "corpus" / "queries.jsonl")]
    for name in ("docs_en.jsonl", "docs_multi.jsonl"):
        texts += [json.loads(l)["text"] for i, l in enumerate(open(ROOT / "corpus" / name)) if i % 400 == 0]
    texts += EXTRA
    for fixture in ("minilm_wordpiece", "qwen_style_bpe", "xlmr_style_unigram",
                    "xlmr_precompiled_unigram"):
        tok = Tokenizer.from_file(str(FIXTURES / fixture / "tokenizer.json"))
        tok.no_padding()
        tok.no_truncation()
        with open(FIXTURES / fixture / "offsets.jsonl", "w") as out:
            for text in texts:
                enc = tok.encode(text)
                offsets = byte_offsets(text, enc.offsets)
                spans = [None if special else o for o, special in zip(offsets, enc.special_tokens_mask)]
                out.write(json.dumps({"text": text, "ids": enc.ids, "offsets": spans}, ensure_ascii=False) + "\n")
        print(f"{len(texts)} texts -> {FIXTURES / fixture / 'offsets.jsonl'}")


if __name__ == "__main__":
    main()
