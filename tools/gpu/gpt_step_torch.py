#!/usr/bin/env python3
"""PyTorch eager baseline for tools/gpu/gpt_step_bench: the same GPT-2-style
model (pre-LN, GELU tanh, MLP 4W, untied head without bias, LayerNorm eps
1e-5), random tokens, one training step = forward + backward + AdamW.
Prints one line in gpt_step_bench's format: median ms and tokens/s.

  gpt_step_torch.py --spec gpt:layers=12,heads=12,width=768,context=1024,vocab=50304 \
                    --batch 8 --iters 10 --math fp32|tf32|bf16

--math maps to torch.set_float32_matmul_precision: fp32 -> "highest",
tf32 -> "high", bf16 -> "medium" (fp32 tensors, reduced-precision products),
matching tandem's MathMode. Attention is written out (matmul, mask, softmax,
matmul) as tandem does it, not a fused kernel.
"""
import argparse
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def parse_spec(spec):
    if not spec.startswith("gpt:"):
        raise SystemExit(f"spec must start with gpt: (got {spec!r})")
    kv = dict(item.split("=") for item in spec[4:].split(","))
    return {k: int(v) for k, v in kv.items()}


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(width, eps=1e-5)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.ln2 = nn.LayerNorm(width, eps=1e-5)
        self.fc1 = nn.Linear(width, 4 * width)
        self.fc2 = nn.Linear(4 * width, width)

    def forward(self, x, mask):
        b, t, w = x.shape
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, h, w // h).permute(2, 0, 3, 1, 4)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(w // h))
        att = att.masked_fill(mask[:t, :t], float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, w)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, layers, heads, width, context, vocab):
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Embedding(context, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.lnf = nn.LayerNorm(width, eps=1e-5)
        self.head = nn.Linear(width, vocab, bias=False)
        self.register_buffer(
            "mask", torch.triu(torch.ones(context, context, dtype=torch.bool), 1))

    def forward(self, ids, labels):
        t = ids.shape[1]
        x = self.tok(ids) + self.pos(torch.arange(t, device=ids.device))
        for blk in self.blocks:
            x = blk(x, self.mask)
        logits = self.head(self.lnf(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--spec", default="gpt:layers=12,heads=12,width=768,context=1024,vocab=50304")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--math", default="fp32", choices=["fp32", "tf32", "bf16"])
    p.add_argument("--device", default="cuda", help="cpu only for a smoke test")
    a = p.parse_args()
    torch.set_float32_matmul_precision({"fp32": "highest", "tf32": "high", "bf16": "medium"}[a.math])
    c = parse_spec(a.spec)
    torch.manual_seed(1)
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    model = Gpt(c["layers"], c["heads"], c["width"], c["context"], c["vocab"]).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    tokens = torch.randint(0, c["vocab"], (a.batch, c["context"] + 1), device=dev)
    ids, labels = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()

    def step():
        opt.zero_grad(set_to_none=False)
        loss = model(ids, labels)
        loss.backward()
        opt.step()
        return loss

    for _ in range(3):
        first = step()
    first = first.item()
    times = []
    for _ in range(a.iters):
        if cuda:
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            loss = step()
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e))
        else:
            t0 = time.perf_counter()
            loss = step()
            times.append((time.perf_counter() - t0) * 1e3)
    med = statistics.median(times)
    n = sum(p.numel() for p in model.parameters())
    print(f"gpt_step torch {a.spec} batch={a.batch} math={a.math} params={n}: "
          f"median {med:.2f} ms, {a.batch * c['context'] / (med * 1e-3):.0f} tokens/s, "
          f"loss {first:.4f} -> {loss.item():.4f}  (torch {torch.__version__})")


if __name__ == "__main__":
    main()
