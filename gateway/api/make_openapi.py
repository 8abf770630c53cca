#!/usr/bin/env python3
"""Writes gateway/api/openapi.json, quiver's OpenAPI 3.1 document (served at GET /openapi.json and
checked against the live server by tests/gateway/schemathesis_test.py). Edit this file, then run

    python3 gateway/api/make_openapi.py

Request fields the server treats as absent when null (as TEI's optional fields and pydantic
clients send them) are declared nullable; integers carry the bounds the parsers enforce.
"""
import json
import os
ref = lambda n: {"$ref": f"#/components/schemas/{n}"}
string = {"type": "string"}
integer = {"type": "integer"}
number = {"type": "number"}
boolean = {"type": "boolean"}
def arr(x, **k): return {"type": "array", "items": x, **k}
def nullable(x):
    if isinstance(x, dict) and "anyOf" in x:
        return x if {"type": "null"} in x["anyOf"] else {"anyOf": x["anyOf"] + [{"type": "null"}]}
    return {"anyOf": [x, {"type": "null"}]}
def obj(props, required=(), **k):
    o = {"type": "object", "properties": props, **k}
    if required: o["required"] = list(required)
    return o
def request(props, required=(), **k):
    """A request object: optional fields may be null (the parsers read null as not sent)."""
    return obj({n: (v if n in required else nullable(v)) for n, v in props.items()}, required, **k)
INT_MAX = 2147483647
# The served model's name: the server writes it in place of the placeholder when it serves the
# document, so that the document says which "model" it accepts.
model = {"type": "string", "enum": ["{{served_model}}", ""], "description": "The served model (--model-name); empty or absent: the same"}
def positive(): return {"type": "integer", "minimum": 1, "maximum": INT_MAX}
# vLLM's truncate_prompt_tokens: -1 (the model's limit) or k > 0 (k tokens, at most the limit).
def truncate_tokens(): return {"anyOf": [{"type": "integer", "enum": [-1]}, positive()]}
token_ids = arr({"type": "integer", "minimum": 0, "maximum": 2147483647}, minItems=1)
schemas = {
  "TeiError": obj({"error": string, "error_type": {"type": "string", "enum": ["Unhealthy", "Backend", "Overloaded", "Validation", "Tokenizer", "Empty"]}}, ["error", "error_type"]),
  "OpenAiError": obj({"error": obj({"message": string, "type": string, "param": nullable(string), "code": nullable(string)}, ["message", "type", "param", "code"])}, ["error"]),
  "CohereError": obj({"message": string}, ["message"]),
  "Input": {"anyOf": [string, token_ids]},
  "Inputs": {"anyOf": [string, token_ids, arr(ref("Input"), minItems=1)]},
  # TEI refuses empty texts (400 Empty).
  "TeiInput": {"anyOf": [{"type": "string", "minLength": 1}, token_ids]},
  "TeiInputs": {"anyOf": [{"type": "string", "minLength": 1}, token_ids, arr(ref("TeiInput"), minItems=1)]},
  "TruncationDirection": {"type": "string", "enum": ["Left", "Right", "left", "right"]},
  "Embedding": arr(number),
  "Usage": obj({"prompt_tokens": integer, "total_tokens": integer, "completion_tokens": integer,
                "prompt_tokens_details": {"type": "null"}}, ["prompt_tokens", "total_tokens"]),
  "EncodingFormat": {"type": "string", "enum": ["float", "base64", "base64_int8", "base64_binary"]},
  "OpenAiEmbedRequest": request({
      "input": ref("Inputs"), "model": model, "encoding_format": ref("EncodingFormat"),
      "dimensions": positive(), "user": string,
      "truncate": {"type": "boolean", "description": "quiver/TEI extension: cut over-long inputs to the model's limit"},
      "truncate_prompt_tokens": {**truncate_tokens(), "description": "vLLM extension: -1 cuts to the model's limit, k > 0 to k tokens (at most the model's limit)"},
      "prompt_name": string,
      "use_activation": {"type": "boolean", "description": "vLLM extension: false leaves the embedding unnormalized"},
      "normalize": {"type": "boolean", "description": "the same, by vLLM's earlier name (and TEI's)"},
      "add_special_tokens": boolean, "truncation_side": {"type": "string", "enum": ["left", "right"]},
      "task": {"type": "string", "description": "Jina: the model's prompt of that name, as prompt_name"},
      "late_chunking": {"type": "boolean", "description": "Jina: the inputs as the chunks of one text, embedded in its context"},
      "embedding_type": {"type": "string", "enum": ["float", "base64"], "description": "Jina: as encoding_format"},
      "normalized": {"type": "boolean", "description": "Jina: as normalize"},
      "modality": {"type": "string", "enum": ["text"], "description": "Infinity: text only"},
      "embed_dtype": {"type": "string", "enum": ["float32", "float16", "bfloat16"], "description": "vLLM extension: the values' type in base64"},
      "endianness": {"type": "string", "enum": ["native", "little", "big"], "description": "vLLM extension: their byte order in base64"}}, ["input"]),
  "OpenAiEmbedResponse": obj({
      "object": {"const": "list"},
      "data": arr(obj({"object": {"const": "embedding"}, "index": integer, "embedding": {"anyOf": [ref("Embedding"), string]}}, ["object", "index", "embedding"])),
      "model": string, "usage": ref("Usage")}, ["object", "data", "model", "usage"]),
  "ContextualizedRequest": request({
      "input": arr(arr({"type": "string", "minLength": 1}, minItems=1), minItems=1), "model": model,
      "dimensions": positive(), "encoding_format": ref("EncodingFormat")}, ["input"]),
  "ContextualizedResponse": obj({
      "object": {"const": "list"},
      "data": arr(obj({"object": {"const": "list"}, "index": integer,
                       "data": arr(obj({"object": {"const": "embedding"}, "index": integer, "embedding": {"anyOf": [ref("Embedding"), string]}}, ["object", "index", "embedding"]))},
                      ["object", "index", "data"])),
      "model": string, "usage": ref("Usage")}, ["object", "data", "model", "usage"]),
  "TeiEmbedRequest": request({
      "inputs": ref("TeiInputs"), "normalize": {"type": "boolean", "default": True},
      "truncate": boolean, "truncation_direction": ref("TruncationDirection"),
      "prompt_name": string, "dimensions": positive()}, ["inputs"]),
  "TeiEmbedResponse": arr(ref("Embedding")),
  "TeiEmbedAllRequest": request({
      "inputs": ref("TeiInputs"), "truncate": boolean,
      "truncation_direction": ref("TruncationDirection"), "prompt_name": string}, ["inputs"]),
  "TeiEmbedAllResponse": arr(arr(ref("Embedding"))),
  "SimilarityRequest": request({
      "inputs": obj({"source_sentence": {"type": "string", "minLength": 1}, "sentences": arr({"type": "string", "minLength": 1}, minItems=1)}, ["source_sentence", "sentences"]),
      "parameters": request({"truncate": boolean, "truncation_direction": ref("TruncationDirection"), "prompt_name": string})}, ["inputs"]),
  "SimilarityResponse": arr(number),
  "TeiRerankRequest": request({
      "query": string, "texts": arr(string, minItems=1), "raw_scores": boolean, "return_text": boolean,
      "truncate": boolean, "truncation_direction": ref("TruncationDirection")}, ["query", "texts"]),
  "TeiRerankResponse": arr(obj({"index": integer, "score": number, "text": string}, ["index", "score"])),
  "Document": {"anyOf": [string, obj({"text": string}, ["text"])]},
  "RerankRequest": request({
      "query": string, "documents": arr(ref("Document"), minItems=1), "model": model,
      "top_n": {"type": "integer", "minimum": 0, "maximum": INT_MAX, "description": "0: every document (vLLM's default)"},
      "return_documents": boolean, "raw_scores": boolean,
      "truncate_prompt_tokens": truncate_tokens(),
      "max_tokens_per_doc": {**positive(), "description": "Cohere: each document scored on its first this many tokens (returned whole)"}}, ["query", "documents"]),
  "RerankResponse": obj({
      "id": string, "object": {"const": "rerank"}, "created": integer, "model": string,
      "results": arr(obj({"index": integer, "relevance_score": number, "document": obj({"text": string}, ["text"])}, ["index", "relevance_score"])),
      "usage": ref("Usage"), "meta": {"type": "object"}}, ["id", "model", "results", "usage"]),
  "ScoreRequest": request({
      "text_1": {"anyOf": [string, arr(string, minItems=1)]}, "text_2": {"anyOf": [string, arr(string, minItems=1)]},
      "model": model, "truncate_prompt_tokens": truncate_tokens(),
      "use_activation": {"type": "boolean", "description": "vLLM: false gives the logits"}}, ["text_1", "text_2"]),
  "ScoreResponse": obj({
      "id": string, "object": {"const": "list"}, "created": integer, "model": string,
      "data": arr(obj({"index": integer, "object": {"const": "score"}, "score": number}, ["index", "object", "score"])),
      "usage": ref("Usage")}, ["id", "object", "created", "model", "data", "usage"]),
  "CohereEmbedRequest": request({
      "texts": arr(string, minItems=1), "model": model,
      "input_type": {"type": "string", "enum": ["search_document", "search_query", "classification", "clustering"]},
      "embedding_types": arr({"type": "string", "enum": ["float", "int8", "uint8", "binary", "ubinary"]}),
      "truncate": {"type": "string", "enum": ["NONE", "START", "END"]},
      "output_dimension": positive(), "max_tokens": positive()}, ["texts"]),
  "CohereEmbedResponse": obj({
      "id": string, "response_type": {"type": "string", "enum": ["embeddings_floats", "embeddings_by_type"]},
      "embeddings": {"anyOf": [arr(ref("Embedding")), obj({
          "float": arr(ref("Embedding")), "int8": arr(arr(integer)), "uint8": arr(arr(integer)),
          "binary": arr(arr(integer)), "ubinary": arr(arr(integer))})]},
      "texts": arr(string), "meta": {"type": "object"}}, ["id", "response_type", "embeddings", "texts"]),
  "TokenizeRequest": request({"inputs": {"anyOf": [{"type": "string", "minLength": 1}, arr({"type": "string", "minLength": 1}, minItems=1)]}, "add_special_tokens": boolean, "prompt_name": string}, ["inputs"]),
  "TokenizeResponse": arr(arr(obj({"id": integer, "text": string, "special": boolean, "start": nullable(integer), "stop": nullable(integer)}, ["id", "text", "special", "start", "stop"]))),
  "DecodeRequest": request({"ids": {"anyOf": [arr({"type": "integer", "minimum": 0, "maximum": 2147483647}), arr(arr({"type": "integer", "minimum": 0, "maximum": 2147483647}), minItems=1)]}, "skip_special_tokens": boolean}, ["ids"]),
  "DecodeResponse": arr(string),
  "VllmTokenizeRequest": request({"prompt": string, "model": model, "add_special_tokens": boolean,
                                  "return_token_strs": boolean}, ["prompt"]),
  "VllmTokenizeResponse": obj({"count": integer, "max_model_len": integer, "tokens": arr(integer),
                               "token_strs": nullable(arr(string))},
                              ["count", "max_model_len", "tokens", "token_strs"]),
  "DetokenizeRequest": request({"tokens": arr({"type": "integer", "minimum": 0, "maximum": 2147483647}),
                                "model": model}, ["tokens"]),
  "DetokenizeResponse": obj({"prompt": string}, ["prompt"]),
  "PredictRequest": request({
      "inputs": {"anyOf": [{"type": "string", "minLength": 1},
                           arr({"type": "string", "minLength": 1}, minItems=1, maxItems=2),
                           arr({"anyOf": [{"type": "string", "minLength": 1},
                                          arr({"type": "string", "minLength": 1}, minItems=1, maxItems=2)]},
                               minItems=1)]},
      "raw_scores": boolean, "truncate": boolean,
      "truncation_direction": {"type": "string", "enum": ["Left", "Right", "left", "right"]}},
      ["inputs"]),
  # vLLM's /classify refuses an empty text too; token ids are sent as they are.
  "ClassifyRequest": request({
      "input": {"anyOf": [{"type": "string", "minLength": 1}, token_ids,
                          arr({"anyOf": [{"type": "string", "minLength": 1}, token_ids]}, minItems=1)]},
      "model": model, "user": string, "use_activation": boolean, "activation": boolean, "softmax": boolean,
      "add_special_tokens": boolean, "truncate_prompt_tokens": truncate_tokens(),
      "truncation_side": {"type": "string", "enum": ["left", "right"]},
      "priority": {"type": "integer", "enum": [0], "description": "first come, first served: only 0"}},
      ["input"]),
  "ClassifyResponse": obj({
      "id": string, "object": {"const": "list"}, "created": integer, "model": string,
      "data": arr(obj({"index": integer, "label": string, "probs": arr(number), "num_classes": integer},
                      ["index", "label", "probs", "num_classes"])),
      "usage": ref("Usage")}, ["id", "object", "created", "model", "data", "usage"]),
  "EmbedSparseResponse": arr(arr(obj({"index": integer, "value": number}, ["index", "value"]))),
  "PredictResponse": {"anyOf": [arr(obj({"score": number, "label": string}, ["score", "label"])),
                                arr(arr(obj({"score": number, "label": string}, ["score", "label"])))]},
  "Info": obj({
      "model_id": string, "model_sha": nullable(string), "model_dtype": string,
      "model_type": {"type": "object"}, "prompts": {"type": "object", "additionalProperties": string},
      "max_concurrent_requests": integer, "max_input_length": integer, "max_batch_tokens": integer,
      "max_batch_requests": nullable(integer), "max_client_batch_size": integer, "auto_truncate": boolean,
      "tokenization_workers": integer, "version": string, "sha": nullable(string), "docker_label": nullable(string),
      "architecture": string, "hidden_size": integer},
      ["model_id", "model_dtype", "model_type", "max_concurrent_requests", "max_input_length", "max_batch_tokens", "max_client_batch_size", "auto_truncate", "tokenization_workers", "version"]),
  "Model": obj({"id": string, "object": {"const": "model"}, "created": integer, "owned_by": string,
                 "max_model_len": integer, "backend": string, "stats": {"type": "object"},
                 "capabilities": arr({"type": "string", "enum": ["embed", "rerank", "classify"]})},
                ["id", "object", "created", "owned_by"]),
  "ModelList": obj({"object": {"const": "list"}, "data": arr(ref("Model"))}, ["object", "data"]),
}
def body(name): return {"required": True, "content": {"application/json": {"schema": ref(name)}}}
def ok(name, desc="OK"): return {"description": desc, "content": {"application/json": {"schema": ref(name)}}}
def err(dialect):
    return {"description": "An error: the status code and a message naming the field or limit",
            "content": {"application/json": {"schema": ref({"tei": "TeiError", "openai": "OpenAiError", "cohere": "CohereError"}[dialect])}}}
def post(op, summary, req, resp, dialect, tag):
    return {"post": {"operationId": op, "summary": summary, "tags": [tag], "requestBody": body(req),
                     "responses": {"200": ok(resp), "default": err(dialect)}}}
def get(op, summary, resp, dialect, tag, params=None):
    o = {"operationId": op, "summary": summary, "tags": [tag], "responses": {"200": resp, "default": err(dialect)}}
    if params: o["parameters"] = params
    return {"get": o}
paths = {
  "/v1/embeddings": post("openai_embed", "Embeddings (OpenAI)", "OpenAiEmbedRequest", "OpenAiEmbedResponse", "openai", "OpenAI"),
  "/embeddings": post("openai_embed_root", "Embeddings (OpenAI, without /v1)", "OpenAiEmbedRequest", "OpenAiEmbedResponse", "openai", "OpenAI"),
  "/v1/contextualizedembeddings": post("contextualized_embed", "Contextualized embeddings by late chunking (Perplexity)", "ContextualizedRequest", "ContextualizedResponse", "openai", "Perplexity"),
  "/v1/models": get("list_models", "The served model (OpenAI)", ok("ModelList"), "openai", "OpenAI"),
  "/models": get("list_models_root", "The served model (Infinity, OpenAI without /v1)", ok("ModelList"), "openai", "OpenAI"),
  "/v1/models/{model}": get("get_model", "One model (OpenAI)", ok("Model"), "openai", "OpenAI",
                             [{"name": "model", "in": "path", "required": True, "schema": string}]),
  "/embed": post("embed", "Embeddings (TEI)", "TeiEmbedRequest", "TeiEmbedResponse", "tei", "TEI"),
  "/similarity": post("similarity", "Cosine similarity of a sentence to others (TEI)", "SimilarityRequest", "SimilarityResponse", "tei", "TEI"),
  "/rerank": {"post": {"operationId": "rerank", "summary": "Rerank (TEI with texts; vLLM and Jina with documents)", "tags": ["TEI"],
                       "requestBody": {"required": True, "content": {"application/json": {"schema": {"anyOf": [ref("TeiRerankRequest"), ref("RerankRequest")]}}}},
                       "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"anyOf": [ref("TeiRerankResponse"), ref("RerankResponse")]}}}},
                                     "default": {"description": "An error", "content": {"application/json": {"schema": {"anyOf": [ref("TeiError"), ref("OpenAiError")]}}}}}}},
  "/tokenize": {"post": {"operationId": "tokenize", "summary": "Tokenize (TEI with inputs; vLLM with prompt)", "tags": ["TEI"],
                         "requestBody": {"required": True, "content": {"application/json": {"schema": {"anyOf": [ref("TokenizeRequest"), ref("VllmTokenizeRequest")]}}}},
                         "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"anyOf": [ref("TokenizeResponse"), ref("VllmTokenizeResponse")]}}}},
                                       "default": {"description": "An error", "content": {"application/json": {"schema": {"anyOf": [ref("TeiError"), ref("OpenAiError")]}}}}}}},
  "/detokenize": post("detokenize", "Token ids to text (vLLM; special tokens kept)", "DetokenizeRequest", "DetokenizeResponse", "openai", "vLLM"),
  "/decode": post("decode", "Decode token ids (TEI)", "DecodeRequest", "DecodeResponse", "tei", "TEI"),
  "/embed_all": post("embed_all", "Token embeddings (TEI): per input, every token's last hidden state (no pooling, no Dense modules, not normalized), special tokens included; at most 8,388,608 values (tokens x hidden) per request", "TeiEmbedAllRequest", "TeiEmbedAllResponse", "tei", "TEI"),
  "/embed_sparse": post("embed_sparse", "Sparse embeddings from a SPLADE model (TEI): nonzero terms as index and value", "TeiEmbedRequest", "EmbedSparseResponse", "tei", "TEI"),
  "/predict": post("predict", "Sequence classification (TEI): labels with scores", "PredictRequest", "PredictResponse", "tei", "TEI"),
  "/info": get("info", "The model and the server's limits (TEI)", ok("Info"), "tei", "TEI"),
  "/v1/rerank": post("rerank_v1", "Rerank (vLLM, Cohere v1; errors in OpenAI's shape)", "RerankRequest", "RerankResponse", "openai", "vLLM"),
  "/v2/rerank": post("rerank_v2", "Rerank (Cohere v2)", "RerankRequest", "RerankResponse", "cohere", "Cohere"),
  "/v1/embed": post("cohere_embed_v1", "Embeddings (Cohere v1)", "CohereEmbedRequest", "CohereEmbedResponse", "cohere", "Cohere"),
  "/v2/embed": post("cohere_embed_v2", "Embeddings (Cohere v2)", "CohereEmbedRequest", "CohereEmbedResponse", "cohere", "Cohere"),
  "/v1/score": post("score", "Scores of text pairs (vLLM)", "ScoreRequest", "ScoreResponse", "openai", "vLLM"),
  "/classify": post("classify", "Sequence classification (vLLM): each input's class probabilities and top label", "ClassifyRequest", "ClassifyResponse", "openai", "vLLM"),
  "/v1/classify": post("classify_v1", "Sequence classification (vLLM, SGLang's /v1 path)", "ClassifyRequest", "ClassifyResponse", "openai", "vLLM"),
  "/score": post("score_root", "Scores of text pairs (vLLM, without /v1)", "ScoreRequest", "ScoreResponse", "openai", "vLLM"),
  "/": {"post": {"operationId": "predict_root", "summary": "TEI's root route: /embed for an embedding model (or /similarity for a body whose inputs is an object), /rerank for a reranker, /embed_sparse for a SPLADE model", "tags": ["TEI"],
                 "requestBody": {"required": True, "content": {"application/json": {"schema": {"anyOf": [ref("TeiEmbedRequest"), ref("SimilarityRequest"), ref("TeiRerankRequest")]}}}},
                 "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"anyOf": [ref("TeiEmbedResponse"), ref("SimilarityResponse"), ref("TeiRerankResponse"), ref("RerankResponse"), ref("EmbedSparseResponse")]}}}},
                               "default": {"description": "An error", "content": {"application/json": {"schema": {"anyOf": [ref("TeiError"), ref("OpenAiError")]}}}}}}},
  "/health": get("health", "200 while a replica is healthy", {"description": "Healthy", "content": {"application/json": {"schema": obj({"status": string}, ["status"])}}}, "tei", "quiver"),
  "/ready": get("ready", "200 once the model is loaded and warmed up", {"description": "Ready", "content": {"application/json": {"schema": obj({"ready": boolean}, ["ready"])}}}, "tei", "quiver"),
  "/metrics": {"get": {"operationId": "metrics", "summary": "Prometheus metrics", "tags": ["quiver"], "responses": {"200": {"description": "The text exposition format", "content": {"text/plain": {"schema": string}}}}}},
  "/openapi.json": {"get": {"operationId": "openapi", "summary": "This document", "tags": ["quiver"], "responses": {"200": {"description": "OpenAPI 3.1", "content": {"application/json": {"schema": {"type": "object"}}}}}}},
}
# With --api-key every route needs the key but these.
OPEN = {"/health", "/ready", "/metrics", "/openapi.json"}
for path, item in paths.items():
    for op in item.values():
        op["security"] = [] if path in OPEN else [{"bearer": []}]
doc = {"openapi": "3.1.0",
       "info": {"title": "quiver", "version": "0.1.0",
                "description": "Text embedding and reranking server speaking the OpenAI, TEI, Cohere, vLLM and Perplexity APIs. With --api-key, every route but /health, /ready, /metrics and /openapi.json needs Authorization: Bearer KEY."},
       "components": {"schemas": schemas, "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
       "paths": paths}
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "openapi.json")
with open(out, "w") as f:
    json.dump(doc, f, indent=1)
    f.write("\n")
