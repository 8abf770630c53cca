"""Exports a sentence-transformers BERT-family model to ONNX for the ONNX Runtime peer.

The graph takes input_ids, attention_mask and token_type_ids, each [batch, sequence] int64, and
returns last_hidden_state [batch, sequence, hidden]; the benchmark pools and normalizes outside the
graph in numpy, the way sentence-transformers' ONNX backend does. Batch and sequence are dynamic.
The export is checked against PyTorch on a padded batch before it is written.
"""

import argparse
import os

import numpy as np
import onnxruntime
import torch
import transformers


class LastHiddenState(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, token_type_ids):
        return self.model(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
        ).last_hidden_state


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True, help="model folder (config.json, safetensors)")
    parser.add_argument("--out", required=True, help="where model.onnx goes")
    args = parser.parse_args()

    model = transformers.AutoModel.from_pretrained(args.model, attn_implementation="eager").eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(args.model)
    wrapped = LastHiddenState(model)
    batch = tokenizer(
        ["a short one", "a somewhat longer sentence to make the batch ragged and padded"],
        padding=True,
        return_tensors="pt",
    )
    inputs = (batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
    dynamic = {0: "batch", 1: "sequence"}
    tmp = args.out + ".tmp"
    with torch.no_grad():
        torch.onnx.export(
            wrapped,
            inputs,
            tmp,
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["last_hidden_state"],
            dynamic_axes={
                "input_ids": dynamic,
                "attention_mask": dynamic,
                "token_type_ids": dynamic,
                "last_hidden_state": dynamic,
            },
            opset_version=17,
            dynamo=True,
            external_data=False,
        )
        expected = wrapped(*inputs).numpy()
    session = onnxruntime.InferenceSession(tmp, providers=["CPUExecutionProvider"])
    got = session.run(None, {name: t.numpy() for name, t in zip(
        ["input_ids", "attention_mask", "token_type_ids"], inputs)})[0]
    mask = batch["attention_mask"].numpy().astype(bool)
    worst = float(np.abs(got[mask] - expected[mask]).max())
    if worst > 1e-4:
        raise SystemExit(f"ONNX export differs from PyTorch by {worst}")
    os.replace(tmp, args.out)
    print(f"wrote {args.out} (max abs difference from PyTorch {worst:.2e})")


if __name__ == "__main__":
    main()
