#!/usr/bin/env python3
"""Reference token ids from Hugging Face `tokenizers` for quiver's tokenizer tests.

Run through tools/golden/run.sh --tokenizers. Writes tests/fixtures/tokenizers/<name>/:

  tokenizer.json   the tokenizer under test
  corpus.jsonl     every text of corpus/ (all documents, all queries), encoded with
                   special tokens and without truncation: file, line, token count, and FNV-1a 64
                   hashes of the ids and type ids (as little-endian u32); queries also carry the
                   full ids, so a mismatch there shows the tokens
  edge.jsonl       the edge-case list with full ids (the 1 MB text with hashes only)
  pairs.jsonl      query/document pairs, with and without truncation (each strategy, each side)
  decode.jsonl     ids -> text through the tokenizer's decoder, with and without special tokens

The four tokenizers: all-MiniLM-L6-v2's real tokenizer.json (WordPiece); a Qwen2/Qwen3-style
byte-level BPE and an XLM-R-style Unigram, trained here on the corpus with the same pipeline as
the real ones (no PyPI package carries those files; see tests/fixtures/README.md); and that
Unigram behind XLM-R's own normalizer, sentencepiece's Precompiled nmt_nfkc rules.
"""

import argparse
import math
from collections import Counter
import json
import random
import shutil
from pathlib import Path

import tokenizers
from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers,
                        pre_tokenizers, processors, trainers)

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "corpus"
CORPUS_FILES = ["queries.jsonl", "docs_en.jsonl", "docs_multi.jsonl"]

QWEN_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3


def fnv1a64(values) -> str:
    h = FNV_OFFSET
    for v in values:
        for b in int(v).to_bytes(4, "little"):
            h ^= b
            h = (h * FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def read_jsonl(path: Path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def training_text(max_chars: int, seed: int):
    docs = read_jsonl(CORPUS / "docs_en.jsonl") + read_jsonl(CORPUS / "docs_multi.jsonl")
    docs.sort(key=lambda d: d["id"])
    random.Random(seed).shuffle(docs)
    out, total = [], 0
    for d in docs:
        out.append(d["text"][:30000])
        total += len(out[-1])
        if total >= max_chars:
            break
    return out


def qwen_style_bpe() -> Tokenizer:
    """Qwen2/Qwen3 tokenizer.json pipeline: NFC, the Qwen regex Split, ByteLevel, BPE."""
    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False, ignore_merges=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = trainers.BpeTrainer(vocab_size=24000, special_tokens=[],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(training_text(6_000_000, seed=31), trainer=trainer)
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    # Qwen3's added tokens: specials, and <think> tags that are added but not special.
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True)
                            for t in ("<|endoftext|>", "<|im_start|>", "<|im_end|>")])
    tok.add_tokens([AddedToken(t, normalized=False, special=False)
                    for t in ("<think>", "</think>")])
    return tok


def nmt_nfkc_charsmap() -> bytes:
    """sentencepiece's compiled nmt_nfkc rules (NFKC plus whitespace and control-character
    clean-up), as every model trained with its default normalization carries them (XLM-R, and so
    multilingual-e5, bge-m3): a model trained here on a few lines, its normalizer spec read back.
    The rules are sentencepiece's built-in table; the training data does not change them."""
    import io
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2
    lines = ["a few lines to train on", "de quoi entraîner", "ein paar Zeilen"] * 20
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model,
                                   vocab_size=40, model_type="unigram", hard_vocab_limit=False,
                                   normalization_rule_name="nmt_nfkc", minloglevel=2)
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model.getvalue())
    assert proto.normalizer_spec.name == "nmt_nfkc"
    return proto.normalizer_spec.precompiled_charsmap


def xlmr_precompiled_unigram() -> Tokenizer:
    """XLM-R's own normalizer: Precompiled (sentencepiece's nmt_nfkc) then Replace, as
    transformers' converter writes it for XLM-R; the rest as xlmr_style_unigram."""
    return xlmr_style_unigram(normalizers.Sequence([
        normalizers.Precompiled(nmt_nfkc_charsmap()),
        normalizers.Replace(Regex(" {2,}"), " ")]))


def xlmr_style_unigram(normalizer=None) -> Tokenizer:
    """XLM-R pipeline: Unigram with Metaspace; NFKC + Replace stand in for the Precompiled
    (sentencepiece nmt_nfkc) normalizer (xlmr_precompiled_unigram has that one).

    The pieces and scores are counted here, not trained by tokenizers' UnigramTrainer, whose
    result changes from run to run (Rust's randomly seeded hash maps decide ties): every
    character seen, then the most frequent substrings of words (up to 8 characters), scored
    log(count / total) as a unigram language model, ties broken by the text.
    """
    if normalizer is None:
        normalizer = normalizers.Sequence([normalizers.NFKC(),
                                           normalizers.Replace(Regex(" {2,}"), " ")])
    pre = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    chars, pieces = Counter(), Counter()
    for text in training_text(1_500_000, seed=37):
        for word, _ in pre.pre_tokenize_str(normalizer.normalize_str(text)):
            chars.update(word)
            for i in range(len(word)):
                for n in range(2, 9):
                    if i + n > len(word):
                        break
                    pieces[word[i:i + n]] += 1
    specials = ["<s>", "<pad>", "</s>", "<unk>"]
    by_count = lambda c: sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))
    chosen = by_count(chars)[:3000] + [kv for kv in by_count(pieces) if kv[1] >= 3][:9000]
    total = sum(count for _, count in chosen)
    vocab = [(t, 0.0) for t in specials] + [(p, math.log(c / total)) for p, c in chosen]
    tok = Tokenizer(models.Unigram(vocab, unk_id=3, byte_fallback=False))
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", 0), ("</s>", 2)])
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in specials])
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, normalized=False, special=True)])
    return tok


def edge_cases():
    docs = read_jsonl(CORPUS / "docs_multi.jsonl") + read_jsonl(CORPUS / "docs_en.jsonl")
    megabyte, i = [], 0
    while sum(len(t.encode()) for t in megabyte) < (1 << 20):
        megabyte.append(docs[i]["text"])
        i += 1
    big = "\n\n".join(megabyte)
    return [
        ("empty", ""),
        ("spaces", "   "),
        ("whitespace_mix", " \t\n\r\u00a0\u3000\u2028 "),
        ("control_chars", "a\x00b\x01c\x07d\x1be\x7ff\u0085g\u200bh\ufeffi\ufffdj"),
        ("combining_marks", "e\u0301 a\u0308 n\u0303 A\u030a Ç e\u0301\u0301\u0301 \u0915\u093f"),
        ("precomposed_vs_decomposed", "caf\u00e9 cafe\u0301 \u00c5ngstr\u00f6m \u212b"),
        # sentencepiece's rules as Hugging Face applies them: per grapheme cluster, a short one
        # replaced whole by its first key (the accent after a full-width A goes with it).
        ("compatibility_forms", "\uff21\u0301 \uff46\uff55\uff4c\uff4c \ufb01 \u2460 "
                                "\u00a0x \u2028y \u3000z a\tb\u00adc \u1100\u1161\u11a8 "
                                "\u0915\u094d\u0937\u093f \U0001F44D\U0001F3FD\u0301"),
        ("emoji_zwj", "family \U0001F468\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466 ok "
                      "\U0001F3F3\ufe0f\u200d\U0001F308 \U0001F44D\U0001F3FD"),
        ("cjk", "日本語のテキストを分割します。中文文本测试，한국어 텍스트"),
        ("thai", "ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ"),
        ("arabic_rtl", "مرحبا بالعالم \u200fهذا نص\u200e mixed"),
        ("hebrew_rtl", "שלום עולם, זה טקסט בעברית"),
        ("digits_punct", "v1.2.3-rc4 (x86_64) $HOME/.config 3.14159 1,000,000 #!/bin/sh"),
        ("case", "ÀÉÎÕÜ İstanbul ΣΊΣΥΦΟΣ straße ǅ"),
        ("long_word", "x" * 10_000),
        ("long_word_unicode", "é" * 5_000),
        ("specials_in_text", "<|im_start|>user [CLS] hello [SEP] <s> <mask> </s><think>x</think>"),
        ("one_megabyte", big),
    ]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default=str(ROOT / "models" / "all-MiniLM-L6-v2"))
    parser.add_argument("--out", default=str(ROOT / "tests" / "fixtures" / "tokenizers"))
    args = parser.parse_args()
    out = Path(args.out)
    if out.exists():
        shutil.rmtree(out)

    minilm = Tokenizer.from_file(str(Path(args.model) / "tokenizer.json"))
    builders = {
        "minilm_wordpiece": lambda: minilm,
        "qwen_style_bpe": qwen_style_bpe,
        "xlmr_style_unigram": xlmr_style_unigram,
        "xlmr_precompiled_unigram": xlmr_precompiled_unigram,
    }
    corpus = {name: read_jsonl(CORPUS / name) for name in CORPUS_FILES}
    queries = corpus["queries.jsonl"]
    docs = corpus["docs_en.jsonl"] + corpus["docs_multi.jsonl"]
    rng = random.Random(41)
    pair_texts = [(rng.choice(queries)["text"], rng.choice(docs)["text"][:rng.randint(20, 1500)])
                  for _ in range(120)]

    for name, build in builders.items():
        d = out / name
        d.mkdir(parents=True)
        tok = build()
        tok.no_truncation()
        tok.no_padding()
        if name == "minilm_wordpiece":
            shutil.copy(Path(args.model) / "tokenizer.json", d / "tokenizer.json")
        else:
            tok.save(str(d / "tokenizer.json"))
        tok = Tokenizer.from_file(str(d / "tokenizer.json"))  # test what was written
        tok.no_truncation()
        tok.no_padding()

        with open(d / "corpus.jsonl", "w", encoding="utf-8") as f:
            for file in CORPUS_FILES:
                rows = corpus[file]
                encs = tok.encode_batch([r["text"] for r in rows], add_special_tokens=True)
                for line, enc in enumerate(encs):
                    rec = {"file": file, "line": line, "n": len(enc.ids),
                           "ids_fnv": fnv1a64(enc.ids), "types_fnv": fnv1a64(enc.type_ids)}
                    if file == "queries.jsonl":
                        rec["ids"] = enc.ids
                    f.write(json.dumps(rec) + "\n")

        with open(d / "edge.jsonl", "w", encoding="utf-8") as f:
            for case, text in edge_cases():
                enc = tok.encode(text, add_special_tokens=True)
                rec = {"case": case, "text": text, "n": len(enc.ids),
                       "ids_fnv": fnv1a64(enc.ids), "types_fnv": fnv1a64(enc.type_ids)}
                if case == "one_megabyte":
                    rec["text"] = None  # rebuilt by the test from the corpus, same recipe
                    rec["recipe"] = "docs_multi then docs_en texts joined by a blank line until >= 1 MiB"
                else:
                    rec["ids"] = enc.ids
                    rec["type_ids"] = enc.type_ids
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")

        with open(d / "pairs.jsonl", "w", encoding="utf-8") as f:
            settings = [(None, None, None)] + [
                (max_len, strategy, side)
                for max_len in (32, 77)
                for strategy in ("longest_first", "only_first", "only_second")
                for side in ("right", "left")]
            for k, (query, doc) in enumerate(pair_texts):
                max_len, strategy, side = settings[k % len(settings)]
                if max_len is None:
                    tok.no_truncation()
                else:
                    tok.enable_truncation(max_len, strategy=strategy, direction=side)
                try:
                    enc = tok.encode(query, doc, add_special_tokens=True)
                    rec = {"text": query, "text_pair": doc, "max_length": max_len,
                           "strategy": strategy, "direction": side, "ids": enc.ids,
                           "type_ids": enc.type_ids}
                except Exception as e:  # e.g. only_first when the first is too short
                    rec = {"text": query, "text_pair": doc, "max_length": max_len,
                           "strategy": strategy, "direction": side, "error": str(e)}
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            tok.no_truncation()
        with open(d / "decode.jsonl", "w", encoding="utf-8") as f:
            texts = [q["text"] for q in queries[::15]] + [t for _, t in pair_texts[:60]]
            for text in texts:
                ids = tok.encode(text, add_special_tokens=True).ids
                rec = {"ids": ids, "skip_special": tok.decode(ids, skip_special_tokens=True),
                       "keep_special": tok.decode(ids, skip_special_tokens=False)}
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
        print(f"{name}: written to {d}")

    (out / "VERSIONS.json").write_text(
        json.dumps({"tokenizers": tokenizers.__version__}, indent=2) + "\n")


if __name__ == "__main__":
    main()
