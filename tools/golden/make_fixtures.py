#!/usr/bin/env python3
"""Writes the reference fixtures under tests/fixtures/ from the upstream implementations.

Run through tools/golden/run.sh, which builds the venv this needs (torch, transformers,
sentence-transformers, tokenizers, safetensors). Tests never import any of these: they read the
files written here.

  minilm/embeddings.jsonl   all-MiniLM-L6-v2 sentence embeddings (sentence-transformers, fp32)
                            with the token ids Hugging Face produced, for texts of corpus/
  minilm/tensors.json       the safetensors header of the real model, as the safetensors library
                            reads it (name -> dtype, shape)
  tiny/<name>/              seeded random-weight checkpoints in Hugging Face layout, with
                            reference.jsonl holding each input's ids and the upstream output
  VERSIONS.json             the package versions that made these files

Every number is a float32 printed with 9 significant digits, which round-trips exactly.
Re-running the script on the same package versions reproduces the same bytes.
"""

import argparse
from collections import Counter
import hashlib
import json
import os
import random
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import safetensors
import safetensors.torch
import sentence_transformers
import tokenizers
import torch
import transformers
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer import modules as st_models
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "corpus"
LANGS = ["en", "de", "fr", "ru", "zh", "ja"]

# Qwen2/Qwen3 pre-tokenization pattern, as in their tokenizer.json (needs lookahead).
QWEN_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

RERANK_PREFIX = (
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query "
    'and the Instruct provided. Note that the answer can only be "yes" or "no".<|im_end|>\n'
    "<|im_start|>user\n"
)
RERANK_SUFFIX = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
RERANK_INSTRUCTION = "Given a web search query, retrieve relevant passages that answer the query"


def fmt(x: float) -> str:
    return format(float(np.float32(x)), ".9g")


def vec_json(v) -> str:
    return "[" + ",".join(fmt(x) for x in np.asarray(v, dtype=np.float32).ravel()) + "]"


def write_jsonl(path: Path, rows):
    """rows: list of dicts; list-of-float values under key 'output'/'embedding' are formatted."""
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            parts = []
            for key, value in row.items():
                if isinstance(value, np.ndarray):
                    parts.append(f"{json.dumps(key)}:{vec_json(value)}")
                else:
                    parts.append(f"{json.dumps(key)}:{json.dumps(value, ensure_ascii=False)}")
            f.write("{" + ",".join(parts) + "}\n")


def read_jsonl(path: Path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


# ---- Texts ----------------------------------------------------------------------------------------


def corpus_texts(per_lang_queries: int, per_lang_docs: int, seed: int):
    """Queries and document openings from every language, chosen by a seeded sample."""
    queries = read_jsonl(CORPUS / "queries.jsonl")
    docs = read_jsonl(CORPUS / "docs_en.jsonl") + read_jsonl(CORPUS / "docs_multi.jsonl")
    rng = random.Random(seed)
    out = []
    opening_chars = [80, 200, 400, 700, 1200, 2000]
    for lang in LANGS:
        qs = sorted((q for q in queries if q["lang"] == lang), key=lambda q: q["id"])
        for q in rng.sample(qs, per_lang_queries):
            out.append({"id": q["id"], "lang": lang, "kind": "query", "text": q["text"]})
        ds = sorted((d for d in docs if d["lang"] == lang), key=lambda d: d["id"])
        for i, d in enumerate(rng.sample(ds, per_lang_docs)):
            n = opening_chars[i % len(opening_chars)]
            out.append({"id": d["id"], "lang": lang, "kind": "doc", "text": d["text"][:n]})
    return out


def training_text(max_chars: int):
    docs = read_jsonl(CORPUS / "docs_en.jsonl") + read_jsonl(CORPUS / "docs_multi.jsonl")
    docs.sort(key=lambda d: d["id"])
    rng = random.Random(7)
    rng.shuffle(docs)
    out, total = [], 0
    for d in docs:
        out.append(d["text"][:20000])
        total += len(out[-1])
        if total >= max_chars:
            break
    return out


# ---- all-MiniLM-L6-v2 -----------------------------------------------------------------------------


def make_minilm(model_dir: Path, out_dir: Path):
    out_dir.mkdir(parents=True, exist_ok=True)
    st = SentenceTransformer(str(model_dir), device="cpu")
    st.eval()
    rows = corpus_texts(per_lang_queries=20, per_lang_docs=20, seed=2026)
    texts = [r["text"] for r in rows]
    # Batch size 1: no padding anywhere, so the reference is each text alone.
    emb = st.encode(texts, batch_size=1, convert_to_numpy=True, normalize_embeddings=False)
    tok = st.tokenizer
    max_len = st.max_seq_length
    for row, e in zip(rows, emb):
        enc = tok(row["text"], truncation=True, max_length=max_len, return_token_type_ids=True)
        row["ids"] = enc["input_ids"]
        row["type_ids"] = enc["token_type_ids"]
        row["embedding"] = e
    write_jsonl(out_dir / "embeddings.jsonl", rows)
    meta = {"model": "sentence-transformers/all-MiniLM-L6-v2", "max_seq_length": max_len,
            "normalized": True, "pooling": "mean", "count": len(rows)}
    (out_dir / "embeddings.meta.json").write_text(json.dumps(meta, indent=2) + "\n")

    tensors = {}
    with safetensors.safe_open(str(model_dir / "model.safetensors"), "np") as f:
        for name in f.keys():
            sl = f.get_slice(name)
            tensors[name] = {"dtype": sl.get_dtype(), "shape": list(sl.get_shape())}
    (out_dir / "tensors.json").write_text(json.dumps(tensors, indent=1, sort_keys=True) + "\n")


# ---- Tiny tokenizers ------------------------------------------------------------------------------


def train_wordpiece(vocab_size: int) -> Tokenizer:
    """Same pipeline as bert-base-uncased / all-MiniLM-L6-v2's tokenizer.json, smaller vocab.

    The vocabulary is counted here rather than by tokenizers' WordPieceTrainer, whose choice
    among equally frequent pieces changes from run to run: characters and their ## forms, then
    frequent word endings, then whole words, each by count with ties broken by the text.
    """
    normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                            strip_accents=None, lowercase=True)
    pre = pre_tokenizers.BertPreTokenizer()
    words, chars, endings = Counter(), Counter(), Counter()
    for text in training_text(600_000):
        for word, _ in pre.pre_tokenize_str(normalizer.normalize_str(text)):
            words[word] += 1
            chars.update(word)
            for n in (2, 3, 4):
                if len(word) > n + 1:
                    endings["##" + word[-n:]] += 1

    def by_count(counter):
        return [k for k, _ in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))]

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    top_chars = by_count(chars)[:250]
    vocab = specials + top_chars + ["##" + c for c in top_chars]
    vocab += by_count(endings)[:100]
    seen = set(vocab)
    for word in by_count(words):
        if len(vocab) >= vocab_size:
            break
        if len(word) > 1 and word not in seen:
            vocab.append(word)
            seen.add(word)

    tok = Tokenizer(models.WordPiece({t: i for i, t in enumerate(vocab)}, unk_token="[UNK]",
                                     continuing_subword_prefix="##",
                                     max_input_chars_per_word=100))
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre
    tok.decoder = decoders.WordPiece(prefix="##")
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    for special in specials:
        tok.add_special_tokens([special])
    return tok


def train_bytelevel_bpe(vocab_size: int, append_eos: bool) -> Tokenizer:
    """Same pipeline as Qwen2/Qwen3's tokenizer.json (NFC, regex split, byte-level BPE)."""
    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False, ignore_merges=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(tokenizers.Regex(QWEN_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    # The reranker scores with the tokens "yes" and "no", single tokens in Qwen3's vocabulary;
    # a small corpus of man pages needs a nudge to learn them.
    tok.train_from_iterator(training_text(600_000) + ["yes\nno\n"] * 2000, trainer=trainer)
    for word in ("yes", "no"):
        if tok.token_to_id(word) is None:
            sys.exit(f"trained BPE vocabulary lacks the single token '{word}'")
    if append_eos:
        eos = tok.token_to_id("<|endoftext|>")
        tok.post_processor = processors.TemplateProcessing(
            single="$A:0 <|endoftext|>:0", pair="$A:0 <|endoftext|>:0 $B:1 <|endoftext|>:1",
            special_tokens=[("<|endoftext|>", eos)])
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def save_tokenizer(tok: Tokenizer, out_dir: Path, **special):
    tok.save(str(out_dir / "tokenizer.json"))
    fast = transformers.PreTrainedTokenizerFast(tokenizer_file=str(out_dir / "tokenizer.json"),
                                                **special)
    return fast


# ---- Tiny checkpoints -----------------------------------------------------------------------------


def randomize(model: torch.nn.Module, seed: int):
    """Seeded weights far from the default init, so outputs differ clearly between inputs."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float32)
            if "norm" in name.lower() and name.endswith("weight"):
                p.copy_(1.0 + 0.1 * noise)
            else:
                p.copy_(0.15 * noise)


def tiny_texts(seed: int, count: int):
    rows = corpus_texts(per_lang_queries=1, per_lang_docs=1, seed=seed)
    rows = rows[:count]
    # Lengths vary from a few tokens to about a hundred.
    return [r["text"][:300] for r in rows]


def reload_f32(cls, path: Path):
    return cls.from_pretrained(str(path), dtype=torch.float32, attn_implementation="eager").eval()


def write_st_modules(out_dir: Path, dim: int, pooling: str, normalize: bool, max_seq_length: int):
    """The sentence-transformers folder layout (modules.json, 1_Pooling/config.json)."""
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling",
                "type": "sentence_transformers.models.Pooling"}]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize",
                        "type": "sentence_transformers.models.Normalize"})
    (out_dir / "modules.json").write_text(json.dumps(modules, indent=2) + "\n")
    (out_dir / "1_Pooling").mkdir(exist_ok=True)
    pool = {"word_embedding_dimension": dim,
            "pooling_mode_cls_token": pooling == "cls",
            "pooling_mode_mean_tokens": pooling == "mean",
            "pooling_mode_max_tokens": False,
            "pooling_mode_mean_sqrt_len_tokens": False,
            "pooling_mode_weightedmean_tokens": False,
            "pooling_mode_lasttoken": pooling == "lasttoken",
            "include_prompt": True}
    (out_dir / "1_Pooling" / "config.json").write_text(json.dumps(pool, indent=4) + "\n")
    (out_dir / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": max_seq_length, "do_lower_case": False}, indent=2) + "\n")


WORDPIECE_SPECIALS = dict(unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                          sep_token="[SEP]", mask_token="[MASK]")


def save_sentence_transformer(out_dir: Path, model, tok: Tokenizer, specials: dict, dim: int,
                              pooling: str, max_seq_length=None, normalize=False, dense=()):
    """`model` and `tok` as a folder saved by sentence-transformers itself (Transformer, Pooling,
    Normalize when asked); max_seq_length None leaves the length to the tokenizer. Returns the
    folder loaded back, in eval mode."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        fast = save_tokenizer(tok, tmp, **specials)
        model.save_pretrained(str(tmp))
        fast.save_pretrained(str(tmp))
        kw = {} if max_seq_length is None else {"max_seq_length": max_seq_length}
        modules = [st_models.Transformer(str(tmp), **kw), st_models.Pooling(dim, pooling_mode=pooling)]
        modules += list(dense)
        if normalize:
            modules.append(st_models.Normalize())
        SentenceTransformer(modules=modules, device="cpu").save(str(out_dir))
    return SentenceTransformer(str(out_dir), device="cpu").eval()


def make_bert_mean(out_dir: Path, wp: Tokenizer):
    """BertModel + mean pooling, f32, built and run by sentence-transformers."""
    cfg = transformers.BertConfig(vocab_size=wp.get_vocab_size(), hidden_size=36,
                                  num_hidden_layers=2, num_attention_heads=3,
                                  intermediate_size=52, max_position_embeddings=128,
                                  type_vocab_size=2, hidden_act="gelu", layer_norm_eps=1e-12)
    torch.manual_seed(11)
    model = transformers.BertModel(cfg, add_pooling_layer=True)
    randomize(model, 11)
    st = save_sentence_transformer(out_dir, model, wp, WORDPIECE_SPECIALS, 36, "mean", 128)
    texts = tiny_texts(seed=101, count=12)
    emb = st.encode(texts, batch_size=1, convert_to_numpy=True)
    rows = []
    for text, e in zip(texts, emb):
        enc = st.tokenizer(text, truncation=True, max_length=128, return_token_type_ids=True)
        rows.append({"text": text, "ids": enc["input_ids"], "type_ids": enc["token_type_ids"],
                     "output": e})
    # The same transformer pooled the other ways (sentence-transformers' Pooling module swapped
    # for one of that mode), which is what `--pooling MODE` asks of the engine on this folder.
    other = []
    for mode in ("cls", "max", "lasttoken", "mean_sqrt_len_tokens", "weightedmean"):
        pooled = SentenceTransformer(modules=[st[0], st_models.Pooling(36, pooling_mode=mode)],
                                     device="cpu").eval()
        for row, e in zip(rows, pooled.encode(texts, batch_size=1, convert_to_numpy=True)):
            other.append({"pooling": mode, "text": row["text"], "ids": row["ids"], "output": e})
    write_jsonl(out_dir / "reference_pooling.jsonl", other)
    return rows, {"kind": "embedding", "pooling": "mean", "normalize": False, "dtype": "F32",
                  "reference": "sentence_transformers.SentenceTransformer.encode"}


def make_cross_encoder(out_dir: Path, wp: Tokenizer):
    """BertForSequenceClassification with one label, stored in f16; score = the raw logit."""
    fast = save_tokenizer(wp, out_dir, **WORDPIECE_SPECIALS)
    cfg = transformers.BertConfig(vocab_size=wp.get_vocab_size(), hidden_size=40,
                                  num_hidden_layers=2, num_attention_heads=5,
                                  intermediate_size=68, max_position_embeddings=160,
                                  type_vocab_size=2, num_labels=1, layer_norm_eps=1e-12)
    torch.manual_seed(12)
    model = transformers.BertForSequenceClassification(cfg)
    randomize(model, 12)
    model.to(torch.float16).save_pretrained(str(out_dir))
    fast.save_pretrained(str(out_dir))
    ref = reload_f32(transformers.BertForSequenceClassification, out_dir)
    queries = tiny_texts(seed=102, count=6)
    docs = tiny_texts(seed=103, count=12)
    rows = []
    for i, doc in enumerate(docs):
        query = queries[i % len(queries)][:80]
        enc = fast(query, doc, truncation="longest_first", max_length=160,
                   return_token_type_ids=True)
        with torch.no_grad():
            logit = ref(input_ids=torch.tensor([enc["input_ids"]]),
                        token_type_ids=torch.tensor([enc["token_type_ids"]]),
                        attention_mask=torch.tensor([enc["attention_mask"]])).logits[0]
        rows.append({"text": query, "text_pair": doc, "ids": enc["input_ids"],
                     "type_ids": enc["token_type_ids"], "output": logit.numpy()})
    return rows, {"kind": "score", "dtype": "F16",
                  "reference": "transformers.BertForSequenceClassification logits (f32 compute)"}


def st_embedding_rows(st, texts, type_ids=True):
    emb = st.encode(texts, batch_size=1, convert_to_numpy=True)
    rows = []
    for text, e in zip(texts, emb):
        enc = st.tokenizer(text, truncation=True, max_length=st.max_seq_length,
                           return_token_type_ids=type_ids)
        row = {"text": text, "ids": enc["input_ids"], "output": e}
        if type_ids:
            row["type_ids"] = enc["token_type_ids"]
        rows.append(row)
    return rows


def make_bert_max(out_dir: Path, wp: Tokenizer):
    """BertModel + max pooling + Normalize (sentence-transformers' max over tokens)."""
    cfg = transformers.BertConfig(vocab_size=wp.get_vocab_size(), hidden_size=28,
                                  num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=44, max_position_embeddings=160,
                                  type_vocab_size=2, hidden_act="gelu", layer_norm_eps=1e-12)
    torch.manual_seed(19)
    model = transformers.BertModel(cfg, add_pooling_layer=False)
    randomize(model, 19)
    st = save_sentence_transformer(out_dir, model, wp, WORDPIECE_SPECIALS, 28, "max", 160,
                                   normalize=True)
    rows = st_embedding_rows(st, tiny_texts(seed=114, count=12))
    return rows, {"kind": "embedding", "pooling": "max", "normalize": True, "dtype": "F32",
                  "reference": "sentence_transformers.SentenceTransformer.encode (max pooling)"}


def small_bert(wp: Tokenizer, seed: int):
    """The pooling fixtures' encoder: a two-layer BertModel of width 20, seeded weights."""
    cfg = transformers.BertConfig(vocab_size=wp.get_vocab_size(), hidden_size=20,
                                  num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                                  max_position_embeddings=160, type_vocab_size=2)
    torch.manual_seed(seed)
    model = transformers.BertModel(cfg, add_pooling_layer=False)
    randomize(model, seed)
    return model


def make_bert_pooling(out_dir: Path, wp: Tokenizer, mode: str, seed: int, texts_seed: int):
    """BertModel + sentence-transformers' `mode` pooling (weightedmean: position weights from the
    first token; mean_sqrt_len_tokens: the sum over sqrt(length))."""
    model = small_bert(wp, seed)
    st = save_sentence_transformer(out_dir, model, wp, WORDPIECE_SPECIALS, 20, mode, 160)
    rows = st_embedding_rows(st, tiny_texts(seed=texts_seed, count=12))
    return rows, {"kind": "embedding", "pooling": mode, "normalize": False, "dtype": "F32",
                  "reference": f"sentence_transformers.SentenceTransformer.encode ({mode} pooling)"}


def make_bert_concat_pooling(out_dir: Path, wp: Tokenizer, modes, legacy: bool, seed: int,
                             texts_seed: int):
    """BertModel + one Pooling module with several modes, concatenated in the module's order
    (cls, max and mean here), then Normalize: saved by sentence-transformers as a list
    ("pooling_mode": [...]), or, with `legacy`, as the older boolean per mode (whose order is
    sentence-transformers' own: cls, max, mean, mean_sqrt_len_tokens, weightedmean, lasttoken)
    and a Dense module (the modes' 60 values to 24, tanh) before Normalize."""
    model = small_bert(wp, seed)
    dense = ([seeded_dense(seed + 100, 20 * len(modes), 24, True, torch.nn.Tanh())]
             if legacy else [])
    st = save_sentence_transformer(out_dir, model, wp, WORDPIECE_SPECIALS, 20, tuple(modes), 160,
                                   normalize=True, dense=dense)
    if legacy:
        names = {"cls": "pooling_mode_cls_token", "max": "pooling_mode_max_tokens",
                 "mean": "pooling_mode_mean_tokens",
                 "mean_sqrt_len_tokens": "pooling_mode_mean_sqrt_len_tokens",
                 "weightedmean": "pooling_mode_weightedmean_tokens",
                 "lasttoken": "pooling_mode_lasttoken"}
        pool = {"word_embedding_dimension": 20, "include_prompt": True}
        pool.update({flag: mode in modes for mode, flag in names.items()})
        (out_dir / "1_Pooling" / "config.json").write_text(json.dumps(pool, indent=4) + "\n")
        st = SentenceTransformer(str(out_dir), device="cpu").eval()
    assert st[1].get_embedding_dimension() == 20 * len(modes)
    assert st.get_embedding_dimension() == (24 if legacy else 20 * len(modes))
    rows = st_embedding_rows(st, tiny_texts(seed=texts_seed, count=12))
    return rows, {"kind": "embedding", "pooling": "+".join(modes), "normalize": True,
                  "dtype": "F32",
                  "reference": "sentence_transformers.SentenceTransformer.encode (the modes "
                               "concatenated)"}


PROMPTS = {"query": "Represent this question for retrieving documents: ",
           "passage": "Represent the document: "}


def make_bert_prompt(out_dir: Path, wp: Tokenizer, mode: str, seed: int, texts_seed: int):
    """BertModel + `mode` pooling with include_prompt False (INSTRUCTOR / GRIT style): the
    prompt's tokens (sentence-transformers' prompt_length: the prompt tokenized alone, less its
    trailing special token) are left out of the pooling. Prompts "query" (the default) and
    "passage" in config_sentence_transformers.json; the rows take query, passage, then none."""
    model = small_bert(wp, seed)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        fast = save_tokenizer(wp, tmp, **WORDPIECE_SPECIALS)
        model.save_pretrained(str(tmp))
        fast.save_pretrained(str(tmp))
        modules = [st_models.Transformer(str(tmp), max_seq_length=160),
                   st_models.Pooling(20, pooling_mode=mode, include_prompt=False)]
        if mode == "mean":
            modules.append(st_models.Normalize())
        SentenceTransformer(modules=modules, prompts=PROMPTS, default_prompt_name="query",
                            device="cpu").save(str(out_dir))
    st = SentenceTransformer(str(out_dir), device="cpu").eval()
    assert not st[1].include_prompt
    rows = []
    for i, text in enumerate(tiny_texts(seed=texts_seed, count=12)):
        name = ("query", "passage", None)[i % 3]
        prompt = PROMPTS[name] if name else ""
        # prompt="" asks for no prompt (None would take the default one).
        emb = st.encode([text], prompt=prompt, batch_size=1, convert_to_numpy=True)[0]
        enc = st.tokenizer(prompt + text, truncation=True, max_length=st.max_seq_length,
                           return_token_type_ids=True)
        row = {"text": text, "prompt_name": name, "ids": enc["input_ids"], "output": emb,
               "type_ids": enc["token_type_ids"]}
        if name:
            # The length sentence-transformers itself passed to Pooling.
            row["prompt_length"] = st[0]._get_prompt_length(prompt)
        rows.append(row)
    return rows, {"kind": "embedding", "pooling": mode, "normalize": mode == "mean",
                  "include_prompt": False, "dtype": "F32",
                  "reference": f"sentence_transformers.SentenceTransformer.encode with prompts "
                               f"({mode} pooling, include_prompt False)"}


def make_distilbert_mean(out_dir: Path, wp: Tokenizer):
    """DistilBertModel (transformer.layer.i.* names, no token types) + mean pooling, by
    sentence-transformers."""
    cfg = transformers.DistilBertConfig(vocab_size=wp.get_vocab_size(), dim=32, n_layers=2,
                                        n_heads=4, hidden_dim=48, max_position_embeddings=160,
                                        activation="gelu")
    torch.manual_seed(14)
    model = transformers.DistilBertModel(cfg)
    randomize(model, 14)
    st = save_sentence_transformer(out_dir, model, wp, WORDPIECE_SPECIALS, 32, "mean", 160)
    rows = st_embedding_rows(st, tiny_texts(seed=108, count=12), type_ids=False)
    return rows, {"kind": "embedding", "pooling": "mean", "normalize": False, "dtype": "F32",
                  "reference": "sentence_transformers.SentenceTransformer.encode (DistilBertModel)"}


def make_distilbert_classifier(out_dir: Path, wp: Tokenizer):
    """DistilBertForSequenceClassification, three labels, relu FFN: pre_classifier, ReLU,
    classifier on the first token; the raw logits."""
    fast = save_tokenizer(wp, out_dir, **WORDPIECE_SPECIALS)
    cfg = transformers.DistilBertConfig(vocab_size=wp.get_vocab_size(), dim=24, n_layers=2,
                                        n_heads=3, hidden_dim=40, max_position_embeddings=160,
                                        activation="relu", num_labels=3,
                                        id2label={0: "negative", 1: "neutral", 2: "positive"},
                                        label2id={"negative": 0, "neutral": 1, "positive": 2})
    torch.manual_seed(15)
    model = transformers.DistilBertForSequenceClassification(cfg)
    randomize(model, 15)
    model.save_pretrained(str(out_dir))
    fast.save_pretrained(str(out_dir))
    ref = reload_f32(transformers.DistilBertForSequenceClassification, out_dir)
    rows = []
    for text in tiny_texts(seed=109, count=12):
        enc = fast(text, truncation=True, max_length=160)
        with torch.no_grad():
            logits = ref(input_ids=torch.tensor([enc["input_ids"]]),
                         attention_mask=torch.tensor([enc["attention_mask"]])).logits[0]
        rows.append({"text": text, "ids": enc["input_ids"], "output": logits.numpy()})
    return rows, {"kind": "score", "dtype": "F32", "labels": ["negative", "neutral", "positive"],
                  "reference": "transformers.DistilBertForSequenceClassification logits"}


UNIGRAM_SPECIALS = dict(bos_token="<s>", eos_token="</s>", unk_token="<unk>", pad_token="<pad>",
                        cls_token="<s>", sep_token="</s>", mask_token="<mask>")


def roberta_style(out_dir: Path, config_cls, model_cls, seed: int, texts_seed: int):
    """A RoBERTa-family encoder (position ids from padding_idx + 1) + CLS pooling, saved by
    sentence-transformers without max_seq_length: the tokenizer's model_max_length (40) cuts, as
    sentence-transformers 6 does."""
    uni = Tokenizer.from_file(str(ROOT / "tests" / "fixtures" / "tokenizers" / "xlmr_style_unigram" /
                                  "tokenizer.json"))
    cfg = config_cls(vocab_size=uni.get_vocab_size(), hidden_size=16, num_hidden_layers=2,
                     num_attention_heads=2, intermediate_size=28, max_position_embeddings=162,
                     type_vocab_size=1, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                     layer_norm_eps=1e-5)
    torch.manual_seed(seed)
    model = model_cls(cfg, add_pooling_layer=False)
    randomize(model, seed)
    # No max_seq_length: the tokenizer's model_max_length.
    save_sentence_transformer(out_dir, model, uni, dict(UNIGRAM_SPECIALS, model_max_length=40),
                              16, "cls")
    sbert = json.loads((out_dir / "sentence_bert_config.json").read_text())
    if sbert.get("max_seq_length") is not None:
        # Older sentence-transformers write it; the fixture must exercise the fallback.
        sbert.pop("max_seq_length")
        (out_dir / "sentence_bert_config.json").write_text(json.dumps(sbert, indent=2) + "\n")
    st = SentenceTransformer(str(out_dir), device="cpu").eval()
    if st.max_seq_length != 40:
        sys.exit(f"{out_dir}: sentence-transformers took max_seq_length {st.max_seq_length}, not 40")
    rows = st_embedding_rows(st, tiny_texts(seed=texts_seed, count=12), type_ids=False)
    return rows, {"kind": "embedding", "pooling": "cls", "normalize": False, "dtype": "F32",
                  "max_seq_length": 40,
                  "reference": f"sentence_transformers.SentenceTransformer.encode ({model_cls.__name__})"}


def make_xlmr_cls(out_dir: Path):
    return roberta_style(out_dir, transformers.XLMRobertaConfig, transformers.XLMRobertaModel,
                         seed=16, texts_seed=110)


def make_camembert_cls(out_dir: Path):
    return roberta_style(out_dir, transformers.CamembertConfig, transformers.CamembertModel,
                         seed=17, texts_seed=111)


def make_xlmr_cross_encoder(out_dir: Path):
    """XLMRobertaForSequenceClassification with one label (bge-reranker-v2-m3 style): position ids
    from padding_idx + 1, classifier.dense + tanh + out_proj on <s>; the raw logit of each
    (query, document) pair."""
    cfg = transformers.XLMRobertaConfig(vocab_size=UNIGRAM_VOCAB, hidden_size=16,
                                        num_hidden_layers=2, num_attention_heads=2,
                                        intermediate_size=28, max_position_embeddings=162,
                                        type_vocab_size=1, pad_token_id=1, bos_token_id=0,
                                        eos_token_id=2, layer_norm_eps=1e-5, num_labels=1)
    return pair_classifier(out_dir, cfg, transformers.XLMRobertaForSequenceClassification, seed=18,
                           texts_seeds=(112, 113))


def unigram_tokenizer() -> Tokenizer:
    return Tokenizer.from_file(str(ROOT / "tests" / "fixtures" / "tokenizers" /
                                   "xlmr_style_unigram" / "tokenizer.json"))


UNIGRAM_VOCAB = None  # set in main() from the unigram tokenizer


def pair_classifier(out_dir: Path, cfg, model_cls, seed: int, texts_seeds, max_length=160):
    """A one-label cross-encoder on the XLM-R-style unigram tokenizer (<pad> is id 1, as the
    position ids of RoBERTa and MPNet assume): the raw logit of each (query, document) pair."""
    fast = save_tokenizer(unigram_tokenizer(), out_dir, **UNIGRAM_SPECIALS)
    torch.manual_seed(seed)
    model = model_cls(cfg)
    randomize(model, seed)
    model.save_pretrained(str(out_dir))
    fast.save_pretrained(str(out_dir))
    ref = reload_f32(model_cls, out_dir)
    queries = tiny_texts(seed=texts_seeds[0], count=6)
    docs = tiny_texts(seed=texts_seeds[1], count=12)
    rows = []
    for i, doc in enumerate(docs):
        query = queries[i % len(queries)][:80]
        enc = fast(query, doc, truncation="longest_first", max_length=max_length)
        with torch.no_grad():
            logit = ref(input_ids=torch.tensor([enc["input_ids"]]),
                        attention_mask=torch.tensor([enc["attention_mask"]])).logits[0]
        rows.append({"text": query, "text_pair": doc, "ids": enc["input_ids"],
                     "output": logit.numpy()})
    return rows, {"kind": "score", "dtype": "F32",
                  "reference": f"transformers.{model_cls.__name__} logits"}


def long_texts(seed: int, count: int, chars: int):
    """Document openings long enough to pass 128 tokens (where relative position buckets stop
    changing)."""
    rows = [r for r in corpus_texts(per_lang_queries=0, per_lang_docs=5, seed=seed)
            if len(r["text"]) >= chars]
    return [r["text"][:chars] for r in rows[:count]]


def make_mpnet_mean(out_dir: Path):
    """all-mpnet-base-v2 style: MPNetModel (relative position bias shared by the layers, position
    ids from padding_idx + 1) + mean pooling + Normalize, by sentence-transformers; two texts
    longer than the bias's 128-token reach."""
    cfg = transformers.MPNetConfig(vocab_size=UNIGRAM_VOCAB, hidden_size=16, num_hidden_layers=2,
                                   num_attention_heads=2, intermediate_size=28,
                                   max_position_embeddings=258, pad_token_id=1, bos_token_id=0,
                                   eos_token_id=2, layer_norm_eps=1e-5)
    torch.manual_seed(19)
    model = transformers.MPNetModel(cfg, add_pooling_layer=False)
    randomize(model, 19)
    st = save_sentence_transformer(out_dir, model, unigram_tokenizer(), UNIGRAM_SPECIALS, 16, "mean",
                                   256, normalize=True)
    texts = tiny_texts(seed=114, count=10) + long_texts(seed=115, count=2, chars=900)
    rows = st_embedding_rows(st, texts, type_ids=False)
    if max(len(r["ids"]) for r in rows) <= 130:
        sys.exit(f"{out_dir}: no text passes 130 tokens")
    return rows, {"kind": "embedding", "pooling": "mean", "normalize": True, "dtype": "F32",
                  "max_seq_length": 256,
                  "reference": "sentence_transformers.SentenceTransformer.encode (MPNetModel)"}


def make_mpnet_cross_encoder(out_dir: Path):
    """MPNetForSequenceClassification with one label: RoBERTa's head (dense, tanh, out_proj) on
    <s> over the relative-biased encoder."""
    cfg = transformers.MPNetConfig(vocab_size=UNIGRAM_VOCAB, hidden_size=16, num_hidden_layers=2,
                                   num_attention_heads=2, intermediate_size=28,
                                   max_position_embeddings=258, pad_token_id=1, bos_token_id=0,
                                   eos_token_id=2, layer_norm_eps=1e-5, num_labels=1)
    return pair_classifier(out_dir, cfg, transformers.MPNetForSequenceClassification, seed=20,
                           texts_seeds=(116, 117), max_length=256)


def modernbert_config(**kw):
    """A tiny ModernBERT: 4 layers (global, local, local, global with global_attn_every_n_layers 3),
    a local window of 16 (8 each side) so that the fixture's texts cross it, distinct global and
    local rotary thetas, LayerNorms without bias as the released models."""
    return transformers.ModernBertConfig(
        vocab_size=UNIGRAM_VOCAB, hidden_size=24, intermediate_size=40, num_hidden_layers=4,
        num_attention_heads=3, max_position_embeddings=512, local_attention=16,
        global_attn_every_n_layers=3, global_rope_theta=160000.0, local_rope_theta=10000.0,
        norm_eps=1e-5, norm_bias=False, attention_bias=False, mlp_bias=False,
        pad_token_id=1, bos_token_id=0, eos_token_id=2, cls_token_id=0, sep_token_id=2, **kw)


def make_modernbert_cls(out_dir: Path):
    """gte-modernbert style: ModernBertModel + CLS pooling + Normalize, by sentence-transformers
    (sdpa attention, whose sliding-window mask transformers builds itself)."""
    cfg = modernbert_config()
    torch.manual_seed(21)
    model = transformers.ModernBertModel(cfg)
    randomize(model, 21)
    st = save_sentence_transformer(out_dir, model, unigram_tokenizer(), UNIGRAM_SPECIALS, 24, "cls",
                                   256, normalize=True)
    texts = tiny_texts(seed=118, count=10) + long_texts(seed=119, count=2, chars=900)
    rows = st_embedding_rows(st, texts, type_ids=False)
    return rows, {"kind": "embedding", "pooling": "cls", "normalize": True, "dtype": "F32",
                  "max_seq_length": 256,
                  "reference": "sentence_transformers.SentenceTransformer.encode (ModernBertModel)"}


def make_modernbert_cross_encoder(out_dir: Path):
    """gte-reranker-modernbert style: ModernBertForSequenceClassification, one label, mean
    classifier pooling (head.dense, gelu, head.norm, classifier)."""
    cfg = modernbert_config(num_labels=1, classifier_pooling="mean", classifier_activation="gelu")
    return pair_classifier(out_dir, cfg, transformers.ModernBertForSequenceClassification, seed=22,
                           texts_seeds=(120, 121), max_length=256)


def seeded_dense(seed: int, in_features: int, out_features: int, bias: bool, activation):
    """A sentence-transformers Dense module with seeded weights of a clear spread."""
    dense = st_models.Dense(in_features, out_features, bias=bias, activation_function=activation)
    randomize(dense, seed)
    return dense


def make_bert_dense(out_dir: Path, wp: Tokenizer):
    """LaBSE style: BertModel + CLS pooling + Dense (bias, tanh) + Normalize."""
    cfg = transformers.BertConfig(vocab_size=wp.get_vocab_size(), hidden_size=24,
                                  num_hidden_layers=2, num_attention_heads=3, intermediate_size=40,
                                  max_position_embeddings=160, type_vocab_size=2)
    torch.manual_seed(23)
    model = transformers.BertModel(cfg, add_pooling_layer=False)
    randomize(model, 23)
    dense = seeded_dense(24, 24, 20, True, torch.nn.Tanh())
    st = save_sentence_transformer(out_dir, model, wp, WORDPIECE_SPECIALS, 24, "cls", 160,
                                   normalize=True, dense=[dense])
    rows = st_embedding_rows(st, tiny_texts(seed=122, count=12))
    return rows, {"kind": "embedding", "pooling": "cls", "normalize": True, "dtype": "F32",
                  "dimensions": 20,
                  "reference": "sentence_transformers.SentenceTransformer.encode (BertModel + Dense)"}


def make_t5_mean(out_dir: Path):
    """sentence-t5 style: T5EncoderModel (relative attention buckets from the first block, unscaled
    scores, RMS norms, ReLU FFN) + mean pooling + Dense (no bias, identity) + Normalize."""
    cfg = transformers.T5Config(vocab_size=UNIGRAM_VOCAB, d_model=16, d_kv=8, d_ff=28,
                                num_layers=2, num_heads=2, relative_attention_num_buckets=32,
                                relative_attention_max_distance=128, feed_forward_proj="relu",
                                is_encoder_decoder=False, use_cache=False, pad_token_id=1,
                                eos_token_id=2, decoder_start_token_id=1)
    torch.manual_seed(25)
    model = transformers.T5EncoderModel(cfg)
    randomize(model, 25)
    dense = seeded_dense(26, 16, 16, False, torch.nn.Identity())
    st = save_sentence_transformer(out_dir, model, unigram_tokenizer(), UNIGRAM_SPECIALS, 16, "mean",
                                   256, normalize=True, dense=[dense])
    texts = tiny_texts(seed=123, count=10) + long_texts(seed=124, count=2, chars=900)
    rows = st_embedding_rows(st, texts, type_ids=False)
    return rows, {"kind": "embedding", "pooling": "mean", "normalize": True, "dtype": "F32",
                  "max_seq_length": 256,
                  "reference": "sentence_transformers.SentenceTransformer.encode (T5EncoderModel + Dense)"}


def make_t5_gated(out_dir: Path):
    """GTR / T5 v1.1 style: T5EncoderModel with the gated-gelu FFN (gelu_new on wi_0, times wi_1),
    d_kv apart from d_model / heads, mean pooling, no Dense."""
    cfg = transformers.T5Config(vocab_size=UNIGRAM_VOCAB, d_model=16, d_kv=6, d_ff=24,
                                num_layers=2, num_heads=4, relative_attention_num_buckets=16,
                                relative_attention_max_distance=64, feed_forward_proj="gated-gelu",
                                is_encoder_decoder=False, use_cache=False, pad_token_id=1,
                                eos_token_id=2, decoder_start_token_id=1)
    torch.manual_seed(27)
    model = transformers.T5EncoderModel(cfg)
    randomize(model, 27)
    st = save_sentence_transformer(out_dir, model, unigram_tokenizer(), UNIGRAM_SPECIALS, 16, "mean",
                                   256)
    texts = tiny_texts(seed=125, count=10) + long_texts(seed=126, count=2, chars=900)
    rows = st_embedding_rows(st, texts, type_ids=False)
    return rows, {"kind": "embedding", "pooling": "mean", "normalize": False, "dtype": "F32",
                  "max_seq_length": 256,
                  "reference": "sentence_transformers.SentenceTransformer.encode (T5EncoderModel, gated-gelu)"}


def make_gemma3_mean(out_dir: Path, bpe: Tokenizer):
    """EmbeddingGemma style: Gemma3TextModel with bidirectional attention (sliding window 6 on the
    local layers, every third layer global), grouped-query heads, query_pre_attn_scalar apart from
    head_dim, then mean pooling, two Dense modules (16 -> 32 -> 16, no bias, Identity) and
    Normalize, by sentence-transformers."""
    cfg = transformers.Gemma3TextConfig(
        vocab_size=bpe.get_vocab_size(), hidden_size=16, intermediate_size=40, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=512,
        sliding_window=6, sliding_window_pattern=3, query_pre_attn_scalar=12,
        rope_theta=1e6, rope_local_base_freq=1e4, rms_norm_eps=1e-6,
        use_bidirectional_attention=True, pad_token_id=0, bos_token_id=None, eos_token_id=None,
        hidden_activation="gelu_pytorch_tanh")
    torch.manual_seed(28)
    model = transformers.Gemma3TextModel(cfg)
    randomize(model, 28)
    dense = [seeded_dense(29, 16, 32, False, torch.nn.Identity()),
             seeded_dense(30, 32, 16, False, torch.nn.Identity())]
    st = save_sentence_transformer(out_dir, model, bpe,
                                   dict(eos_token="<|endoftext|>", pad_token="<|endoftext|>"),
                                   16, "mean", 256, normalize=True, dense=dense)
    texts = tiny_texts(seed=127, count=12)
    rows = st_embedding_rows(st, texts, type_ids=False)
    return rows, {"kind": "embedding", "pooling": "mean", "normalize": True, "dtype": "F32",
                  "max_seq_length": 256,
                  "reference": "sentence_transformers.SentenceTransformer.encode (Gemma3TextModel + 2 Dense)"}


def splade(out_dir: Path, model, tok: Tokenizer, specials: dict, seed: int, texts_seed: int,
           max_seq_length: int = 300):
    """SPLADE: a masked-LM checkpoint (decoder tied to the word embeddings) saved by
    sentence-transformers' SparseEncoder (MLMTransformer + SpladePooling max, relu); each text's
    term weights max over tokens of log(1 + ReLU(logit)), as a dense vocabulary-wide row."""
    from sentence_transformers import SparseEncoder
    from sentence_transformers.sparse_encoder.models import MLMTransformer, SpladePooling
    torch.manual_seed(seed)
    randomize(model, seed)
    with tempfile.TemporaryDirectory() as tmp:
        fast = save_tokenizer(tok, Path(tmp), **specials)
        model.save_pretrained(tmp)
        fast.save_pretrained(tmp)
        SparseEncoder(modules=[MLMTransformer(tmp, max_seq_length=max_seq_length),
                               SpladePooling(pooling_strategy="max")], device="cpu").save(str(out_dir))
    st = SparseEncoder(str(out_dir), device="cpu").eval()
    texts = tiny_texts(seed=texts_seed, count=10) + long_texts(seed=texts_seed + 1, count=2,
                                                               chars=1200)
    emb = st.encode(texts, batch_size=1, convert_to_tensor=True).to_dense().numpy()
    rows = []
    for text, e in zip(texts, emb):
        enc = st.tokenizer(text, truncation=True, max_length=st.max_seq_length)
        rows.append({"text": text, "ids": enc["input_ids"], "output": e})
    if max(len(r["ids"]) for r in rows) <= 256:
        sys.exit(f"{out_dir}: no text passes 256 tokens (the engine's SPLADE chunk)")
    return rows, {"kind": "sparse", "dtype": "F32", "max_seq_length": max_seq_length,
                  "reference": "sentence_transformers.SparseEncoder.encode (MLMTransformer + "
                               f"SpladePooling max) over {type(model).__name__}"}


def make_splade(out_dir: Path, wp: Tokenizer):
    cfg = transformers.BertConfig(vocab_size=wp.get_vocab_size(), hidden_size=24,
                                  num_hidden_layers=2, num_attention_heads=3, intermediate_size=40,
                                  max_position_embeddings=320, type_vocab_size=2)
    torch.manual_seed(34)
    return splade(out_dir, transformers.BertForMaskedLM(cfg), wp, WORDPIECE_SPECIALS, seed=34,
                  texts_seed=131)


def make_splade_distilbert(out_dir: Path, wp: Tokenizer):
    """DistilBertForMaskedLM (opensearch-neural-sparse-encoding distill style): vocab_transform,
    GELU, vocab_layer_norm, vocab_projector tied to the word embeddings."""
    cfg = transformers.DistilBertConfig(vocab_size=wp.get_vocab_size(), dim=24, n_layers=2,
                                        n_heads=3, hidden_dim=40, max_position_embeddings=320)
    torch.manual_seed(35)
    return splade(out_dir, transformers.DistilBertForMaskedLM(cfg), wp, WORDPIECE_SPECIALS,
                  seed=35, texts_seed=133)


def make_splade_roberta(out_dir: Path, wp: Tokenizer):
    """RobertaForMaskedLM (multilingual SPLADE on XLM-R is the same head): lm_head.dense, erf GELU,
    lm_head.layer_norm, the decoder tied to the word embeddings with lm_head.bias; positions from
    padding_idx + 1. The WordPiece vocabulary keeps the dense reference rows small."""
    pad = wp.token_to_id("[PAD]")
    cfg = transformers.RobertaConfig(vocab_size=wp.get_vocab_size(), hidden_size=16,
                                     num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=28, max_position_embeddings=302 + pad,
                                     type_vocab_size=1, pad_token_id=pad, layer_norm_eps=1e-5)
    torch.manual_seed(36)
    return splade(out_dir, transformers.RobertaForMaskedLM(cfg), wp, WORDPIECE_SPECIALS, seed=36,
                  texts_seed=135)


def write_relative_buckets(path: Path):
    """transformers' relative position buckets (T5's and MPNet's) for distances -300..300, for the
    engine's port (tests/engine/relative_position_test.cc)."""
    from transformers.models.mpnet.modeling_mpnet import MPNetEncoder
    from transformers.models.t5.modeling_t5 import T5Attention
    d = torch.arange(-300, 301)
    cases = []
    for buckets, distance in ((32, 128), (32, 64), (64, 256), (16, 32)):
        t5 = T5Attention._relative_position_bucket(d, bidirectional=True, num_buckets=buckets,
                                                   max_distance=distance)
        mp = MPNetEncoder.relative_position_bucket(d, num_buckets=buckets, max_distance=distance)
        if not torch.equal(t5, mp):
            sys.exit(f"T5 and MPNet buckets differ at ({buckets}, {distance})")
        cases.append({"num_buckets": buckets, "max_distance": distance, "first_distance": -300,
                      "buckets": [int(x) for x in t5]})
    path.write_text(json.dumps({"reference": "transformers T5Attention._relative_position_bucket "
                                             "(bidirectional) == MPNetEncoder.relative_position_bucket",
                                "cases": cases}) + "\n")


def qwen3_config(vocab: int, tie: bool, **kw):
    return transformers.Qwen3Config(vocab_size=vocab, hidden_size=48, num_hidden_layers=2,
                                    num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                    intermediate_size=88, max_position_embeddings=512,
                                    rms_norm_eps=1e-6, rope_theta=1000000.0,
                                    tie_word_embeddings=tie, hidden_act="silu", **kw)


def make_qwen3_causal(out_dir: Path, bpe: Tokenizer):
    """Qwen3-Embedding style: causal Qwen3Model, last-token pooling, normalized; stored in bf16."""
    fast = save_tokenizer(bpe, out_dir, eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    cfg = qwen3_config(bpe.get_vocab_size(), tie=False)
    torch.manual_seed(13)
    model = transformers.Qwen3Model(cfg)
    randomize(model, 13)
    model.to(torch.bfloat16).save_pretrained(str(out_dir))
    fast.save_pretrained(str(out_dir))
    write_st_modules(out_dir, 48, "lasttoken", normalize=True, max_seq_length=512)
    ref = reload_f32(transformers.Qwen3Model, out_dir)
    rows = []
    for text in tiny_texts(seed=104, count=12):
        ids = fast(text)["input_ids"]
        with torch.no_grad():
            h = ref(input_ids=torch.tensor([ids])).last_hidden_state[0, -1]
        rows.append({"text": text, "ids": ids, "output": torch.nn.functional.normalize(h, dim=0).numpy()})
    return rows, {"kind": "embedding", "pooling": "lasttoken", "normalize": True, "dtype": "BF16",
                  "reference": "transformers.Qwen3Model last_hidden_state[-1], L2-normalized"}


def decoder_lasttoken(out_dir: Path, bpe: Tokenizer, config_cls, model_cls, seed: int,
                      texts_seed: int, **kw):
    """A causal decoder embedding (gte-Qwen2 / e5-mistral style): last-token pooling, normalized,
    f32; the reference is transformers' last hidden state of the last token."""
    fast = save_tokenizer(bpe, out_dir, eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    cfg = config_cls(vocab_size=bpe.get_vocab_size(), hidden_size=32, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, intermediate_size=56,
                     max_position_embeddings=512, rms_norm_eps=1e-6, rope_theta=10000.0,
                     tie_word_embeddings=False, hidden_act="silu", **kw)
    torch.manual_seed(seed)
    model = model_cls(cfg)
    randomize(model, seed)
    model.save_pretrained(str(out_dir))
    fast.save_pretrained(str(out_dir))
    write_st_modules(out_dir, 32, "lasttoken", normalize=True, max_seq_length=512)
    ref = reload_f32(model_cls, out_dir)
    rows = []
    for text in tiny_texts(seed=texts_seed, count=12):
        ids = fast(text)["input_ids"]
        with torch.no_grad():
            h = ref(input_ids=torch.tensor([ids])).last_hidden_state[0, -1]
        rows.append({"text": text, "ids": ids,
                     "output": torch.nn.functional.normalize(h, dim=0).numpy()})
    return rows, {"kind": "embedding", "pooling": "lasttoken", "normalize": True, "dtype": "F32",
                  "reference": f"transformers.{model_cls.__name__} last_hidden_state[-1], L2-normalized"}


def make_qwen2_lasttoken(out_dir: Path, bpe: Tokenizer):
    return decoder_lasttoken(out_dir, bpe, transformers.Qwen2Config, transformers.Qwen2Model,
                             seed=20, texts_seed=115)


def make_mistral_lasttoken(out_dir: Path, bpe: Tokenizer):
    return decoder_lasttoken(out_dir, bpe, transformers.MistralConfig, transformers.MistralModel,
                             seed=21, texts_seed=116, sliding_window=None, head_dim=8)


def make_llama_lasttoken(out_dir: Path, bpe: Tokenizer):
    return decoder_lasttoken(out_dir, bpe, transformers.LlamaConfig, transformers.LlamaModel,
                             seed=22, texts_seed=117, attention_bias=True)


def bidirectional_mean_rows(ref, fast, texts, vocab_size: int, add_special_tokens: bool):
    """A decoder's mean-pooled last hidden states under an explicit all-visible additive mask
    (which replaces its causal one); exits if the first token does not see the last."""
    def forward(ids):
        n = len(ids)
        full = torch.zeros((1, 1, n, n), dtype=torch.float32)
        return ref(input_ids=torch.tensor([ids]),
                   attention_mask={"full_attention": full}).last_hidden_state[0]

    rows = []
    for text in texts:
        ids = fast(text, add_special_tokens=add_special_tokens)["input_ids"]
        with torch.no_grad():
            h = forward(ids)
            if len(ids) > 2:
                changed = list(ids)
                changed[-1] = (changed[-1] + 1) % vocab_size
                if torch.allclose(forward(changed)[0], h[0]):
                    sys.exit("bidirectional reference: attention mask was not applied")
        rows.append({"text": text, "ids": ids, "output": h.mean(dim=0).numpy()})
    return rows


def make_qwen3_bidirectional(out_dir: Path, bpe: Tokenizer):
    """pplx-embed style: Qwen3 with bidirectional attention and mean pooling; f32, sharded."""
    fast = save_tokenizer(bpe, out_dir, eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    cfg = qwen3_config(bpe.get_vocab_size(), tie=False, use_bidirectional_attention=True)
    torch.manual_seed(14)
    model = transformers.Qwen3Model(cfg)
    randomize(model, 14)
    model.save_pretrained(str(out_dir), max_shard_size="150KB")
    fast.save_pretrained(str(out_dir))
    write_st_modules(out_dir, 48, "mean", normalize=False, max_seq_length=512)
    ref = reload_f32(transformers.Qwen3Model, out_dir)
    rows = bidirectional_mean_rows(ref, fast, tiny_texts(seed=105, count=12), cfg.vocab_size,
                                   add_special_tokens=False)
    return rows, {"kind": "embedding", "pooling": "mean", "normalize": False, "dtype": "F32",
                  "sharded": True, "add_special_tokens": False,
                  "reference": "transformers.Qwen3Model with an all-visible mask, mean of last_hidden_state"}


def make_qwen2_bidirectional(out_dir: Path, bpe: Tokenizer):
    """gte-Qwen2 style with the config's `is_causal: false`: Qwen2Model (q/k/v biases) with
    bidirectional attention and mean pooling; the reference is transformers' Qwen2Model under an
    all-visible mask."""
    fast = save_tokenizer(bpe, out_dir, eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    cfg = transformers.Qwen2Config(vocab_size=bpe.get_vocab_size(), hidden_size=32,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, intermediate_size=56,
                                   max_position_embeddings=512, rms_norm_eps=1e-6,
                                   rope_theta=10000.0, tie_word_embeddings=False, hidden_act="silu",
                                   is_causal=False)
    torch.manual_seed(33)
    model = transformers.Qwen2Model(cfg)
    randomize(model, 33)
    model.save_pretrained(str(out_dir))
    fast.save_pretrained(str(out_dir))
    saved = json.loads((out_dir / "config.json").read_text())
    if saved.get("is_causal") is not False:
        sys.exit(f"{out_dir}: config.json lost is_causal: false")
    write_st_modules(out_dir, 32, "mean", normalize=False, max_seq_length=512)
    ref = reload_f32(transformers.Qwen2Model, out_dir)
    rows = bidirectional_mean_rows(ref, fast, tiny_texts(seed=130, count=12), cfg.vocab_size,
                                   add_special_tokens=True)
    return rows, {"kind": "embedding", "pooling": "mean", "normalize": False, "dtype": "F32",
                  "reference": "transformers.Qwen2Model with an all-visible mask, mean of last_hidden_state"}


def save_seeded(out_dir: Path, cfg, model_cls, seed: int):
    """model_cls(cfg) with seeded weights, saved to out_dir; returns it reloaded in f32."""
    torch.manual_seed(seed)
    model = model_cls(cfg)
    randomize(model, seed)
    model.save_pretrained(str(out_dir))
    return reload_f32(model_cls, out_dir)


# Decoder *ForSequenceClassification (the Qwen3-Reranker seq-cls conversions, Llama-style
# classifiers): `score` (no bias) over the hidden state of the last token that is not config's
# pad_token_id (transformers' rule); the raw logits, f32, batch 1.


def decoder_classifier(out_dir: Path, bpe: Tokenizer, cfg, model_cls, seed: int, texts_seed: int,
                       labels=None):
    fast = save_tokenizer(bpe, out_dir, eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    ref = save_seeded(out_dir, cfg, model_cls, seed)
    fast.save_pretrained(str(out_dir))
    rows = []
    for text in tiny_texts(seed=texts_seed, count=12):
        ids = fast(text)["input_ids"]
        with torch.no_grad():
            logits = ref(input_ids=torch.tensor([ids])).logits[0]
        rows.append({"text": text, "ids": ids, "output": logits.numpy()})
    meta = {"kind": "score", "dtype": "F32", "reference": f"transformers.{model_cls.__name__} logits"}
    if labels:
        meta["labels"] = labels
    return rows, meta


# The small decoder of the Qwen2 / Llama classifier fixtures.
SMALL_DECODER = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     num_key_value_heads=2, intermediate_size=56, max_position_embeddings=512,
                     rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False,
                     hidden_act="silu")


def make_qwen3_seq_cls(out_dir: Path, bpe: Tokenizer):
    """Qwen3ForSequenceClassification with one label (a Qwen3-Reranker seq-cls conversion). Its
    tokenizer appends <|endoftext|>, which is also its pad token: transformers scores at the token
    before it, the last one that is not the pad token."""
    pad = bpe.token_to_id("<|endoftext|>")
    cfg = qwen3_config(bpe.get_vocab_size(), tie=False, num_labels=1, pad_token_id=pad)
    rows, meta = decoder_classifier(out_dir, bpe, cfg, transformers.Qwen3ForSequenceClassification,
                                    seed=23, texts_seed=118)
    if any(r["ids"][-1] != pad for r in rows):
        sys.exit("qwen3_seq_cls: the tokenizer was meant to append the pad token")
    return rows, meta


def make_qwen2_seq_cls(out_dir: Path, bpe: Tokenizer):
    """Qwen2ForSequenceClassification with one label (q/k/v biased, o not); no pad token in its
    texts, so it scores at the last token."""
    cfg = transformers.Qwen2Config(vocab_size=bpe.get_vocab_size(), num_labels=1,
                                   pad_token_id=bpe.token_to_id("<|endoftext|>"), **SMALL_DECODER)
    return decoder_classifier(out_dir, bpe, cfg, transformers.Qwen2ForSequenceClassification,
                              seed=25, texts_seed=120)


def make_llama_classifier(out_dir: Path, bpe: Tokenizer):
    """LlamaForSequenceClassification with three labels named in id2label; no pad token in its
    texts, so it scores at the last token."""
    labels = ["negative", "neutral", "positive"]
    cfg = transformers.LlamaConfig(vocab_size=bpe.get_vocab_size(), num_labels=3,
                                   pad_token_id=bpe.token_to_id("<|endoftext|>"),
                                   id2label=dict(enumerate(labels)),
                                   label2id={n: i for i, n in enumerate(labels)}, **SMALL_DECODER)
    return decoder_classifier(out_dir, bpe, cfg, transformers.LlamaForSequenceClassification,
                              seed=24, texts_seed=119, labels=labels)


def make_mistral_seq_cls(out_dir: Path, bpe: Tokenizer):
    """MistralForSequenceClassification with two labels (e5-mistral-style classifiers): no
    biases, no sliding window; no pad token in its texts, so it scores at the last token."""
    cfg = transformers.MistralConfig(vocab_size=bpe.get_vocab_size(), num_labels=2,
                                     pad_token_id=bpe.token_to_id("<|endoftext|>"),
                                     sliding_window=None, **SMALL_DECODER)
    return decoder_classifier(out_dir, bpe, cfg, transformers.MistralForSequenceClassification,
                              seed=26, texts_seed=121, labels=["LABEL_0", "LABEL_1"])


def make_qwen3_reranker(out_dir: Path, bpe: Tokenizer):
    """Qwen3-Reranker style: Qwen3ForCausalLM, tied LM head, bf16; score = logit(yes) - logit(no)."""
    fast = save_tokenizer(bpe, out_dir, eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    cfg = qwen3_config(bpe.get_vocab_size(), tie=True)
    torch.manual_seed(15)
    model = transformers.Qwen3ForCausalLM(cfg)
    randomize(model, 15)
    model.to(torch.bfloat16).save_pretrained(str(out_dir))
    fast.save_pretrained(str(out_dir))
    ref = reload_f32(transformers.Qwen3ForCausalLM, out_dir)
    yes, no = bpe.token_to_id("yes"), bpe.token_to_id("no")
    queries = tiny_texts(seed=106, count=6)
    docs = tiny_texts(seed=107, count=12)
    rows = []
    for i, doc in enumerate(docs):
        query = queries[i % len(queries)][:80]
        prompt = (RERANK_PREFIX + f"<Instruct>: {RERANK_INSTRUCTION}\n<Query>: {query}\n"
                  f"<Document>: {doc[:200]}" + RERANK_SUFFIX)
        ids = fast(prompt)["input_ids"]
        with torch.no_grad():
            logits = ref(input_ids=torch.tensor([ids])).logits[0, -1]
        score = (logits[yes] - logits[no]).reshape(1)
        rows.append({"text": query, "text_pair": doc[:200], "prompt": prompt, "ids": ids,
                     "output": score.numpy()})
    meta = {"kind": "rerank", "dtype": "BF16", "yes_token_id": yes, "no_token_id": no,
            "prefix": RERANK_PREFIX, "suffix": RERANK_SUFFIX, "instruction": RERANK_INSTRUCTION,
            "reference": "transformers.Qwen3ForCausalLM logits[-1][yes] - logits[-1][no]"}
    return rows, meta


# ---- Main -----------------------------------------------------------------------------------------


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / "models" / "all-MiniLM-L6-v2"))
    parser.add_argument("--out", default=str(ROOT / "tests" / "fixtures"))
    parser.add_argument("--only", default="",
                        help="comma-separated tiny checkpoints to (re)make, leaving the rest and "
                             "the MiniLM fixtures as they are")
    args = parser.parse_args()

    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    only = [n for n in args.only.split(",") if n]
    if not only:
        make_minilm(Path(args.model), out / "minilm")

    tiny = out / "tiny"
    if tiny.exists() and not only:
        shutil.rmtree(tiny)
    wp = train_wordpiece(vocab_size=1000)
    bpe_eos = train_bytelevel_bpe(vocab_size=1200, append_eos=True)
    bpe_plain = train_bytelevel_bpe(vocab_size=1200, append_eos=False)
    global UNIGRAM_VOCAB
    UNIGRAM_VOCAB = unigram_tokenizer().get_vocab_size()
    write_relative_buckets(out / "relative_position_buckets.json")
    builders = {
        "bert_mean": lambda d: make_bert_mean(d, wp),
        "bert_cross_encoder": lambda d: make_cross_encoder(d, wp),
        "qwen3_causal_lasttoken": lambda d: make_qwen3_causal(d, bpe_eos),
        "qwen3_bidirectional_mean": lambda d: make_qwen3_bidirectional(d, bpe_plain),
        "qwen3_reranker": lambda d: make_qwen3_reranker(d, bpe_plain),
        "qwen3_seq_cls": lambda d: make_qwen3_seq_cls(d, bpe_eos),
        "llama_classifier": lambda d: make_llama_classifier(d, bpe_plain),
        "qwen2_seq_cls": lambda d: make_qwen2_seq_cls(d, bpe_plain),
        "mistral_seq_cls": lambda d: make_mistral_seq_cls(d, bpe_plain),
        "distilbert_mean": lambda d: make_distilbert_mean(d, wp),
        "distilbert_classifier": lambda d: make_distilbert_classifier(d, wp),
        "xlmr_cls": make_xlmr_cls,
        "camembert_cls": make_camembert_cls,
        "xlmr_cross_encoder": make_xlmr_cross_encoder,
        "bert_max": lambda d: make_bert_max(d, wp),
        "qwen2_lasttoken": lambda d: make_qwen2_lasttoken(d, bpe_eos),
        "mistral_lasttoken": lambda d: make_mistral_lasttoken(d, bpe_eos),
        "llama_lasttoken": lambda d: make_llama_lasttoken(d, bpe_eos),
        "mpnet_mean": make_mpnet_mean,
        "mpnet_cross_encoder": make_mpnet_cross_encoder,
        "modernbert_cls": make_modernbert_cls,
        "modernbert_cross_encoder": make_modernbert_cross_encoder,
        "bert_dense": lambda d: make_bert_dense(d, wp),
        "t5_mean": make_t5_mean,
        "t5_gated": make_t5_gated,
        "gemma3_mean": lambda d: make_gemma3_mean(d, bpe_eos),
        "bert_weightedmean": lambda d: make_bert_pooling(d, wp, "weightedmean", 31, 128),
        "bert_mean_sqrt_len": lambda d: make_bert_pooling(d, wp, "mean_sqrt_len_tokens", 32, 129),
        "qwen2_bidirectional_mean": lambda d: make_qwen2_bidirectional(d, bpe_eos),
        "splade": lambda d: make_splade(d, wp),
        "splade_distilbert": lambda d: make_splade_distilbert(d, wp),
        "splade_roberta": lambda d: make_splade_roberta(d, wp),
        "bert_prompt_mean": lambda d: make_bert_prompt(d, wp, "mean", 41, 141),
        "bert_prompt_weightedmean": lambda d: make_bert_prompt(d, wp, "weightedmean", 42, 142),
        "bert_prompt_cls": lambda d: make_bert_prompt(d, wp, "cls", 43, 143),
        "bert_concat_pooling": lambda d: make_bert_concat_pooling(d, wp, ("mean", "cls", "max"),
                                                                  False, 44, 144),
        "bert_concat_pooling_legacy": lambda d: make_bert_concat_pooling(d, wp, ("cls", "max", "mean"),
                                                                         True, 45, 145),
    }
    for name, build in builders.items():
        if only and name not in only:
            continue
        d = tiny / name
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        rows, meta = build(d)
        write_jsonl(d / "reference.jsonl", rows)
        (d / "reference.meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        size = sum(p.stat().st_size for p in d.rglob("*") if p.is_file())
        if size >= 2 * 1024 * 1024:
            sys.exit(f"{d}: {size} bytes, over the 2 MB budget")
        print(f"{name}: {len(rows)} references, {size} bytes")

    versions = {pkg.__name__: pkg.__version__ for pkg in
                (torch, transformers, sentence_transformers, tokenizers, safetensors, np)}
    versions["python"] = sys.version.split()[0]
    (out / "VERSIONS.json").write_text(json.dumps(versions, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
