#!/usr/bin/python3
"""A small pre-LN transformer language model, scripted for tandem.

    /usr/bin/python3 examples/transformer_lm.py --out lm.pt --context 64
    tandem local --workers 2 --model torchscript:lm.pt --dataset fortunes \
        --seq_len 64 --epochs 1 --optimizer adamw --lr 0.001

forward(tokens) takes int64 tokens [B, T] (byte-level, vocabulary 256) and
returns next-token logits [B, T, 256]; tandem computes the mean
cross-entropy over the tokens (negative labels ignored).
"""
import argparse

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, width: int, heads: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        a, _ = self.attn(h, h, h, attn_mask=mask, need_weights=False)
        x = x + a
        return x + self.mlp(self.ln2(x))


class TinyLm(nn.Module):
    def __init__(self, vocab: int, context: int, width: int, heads: int, layers: int):
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Parameter(torch.zeros(context, width))
        nn.init.normal_(self.pos, std=0.02)
        self.blocks = nn.ModuleList([Block(width, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        t = tokens.size(1)
        x = self.tok(tokens.long()) + self.pos[:t]
        mask = torch.triu(torch.full((t, t), float("-inf"), device=x.device), diagonal=1)
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.ln_f(x))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="where to write the TorchScript archive")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--context", type=int, default=64)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--vocab", type=int, default=256)
    a = p.parse_args()
    torch.manual_seed(a.seed)
    m = TinyLm(a.vocab, a.context, a.width, a.heads, a.layers)
    torch.jit.save(torch.jit.script(m), a.out)


if __name__ == "__main__":
    main()
