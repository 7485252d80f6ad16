#!/usr/bin/python3
"""The plain PyTorch training loop tandem's TorchScript worker must equal:
the same archive, initial weights and batches, torch.optim.SGD or AdamW.

    /usr/bin/python3 pytorch_loop.py --module M.pt --features X.f32 \
        --labels Y.i32 --sample 784 --batch 16 --steps 20 --optimizer sgd \
        --lr 0.05 --momentum 0.9 --out params.f32

X.f32: float32 [N, *sample]; Y.i32: int32 labels [N] (or [N, T] with
--tokens). Batch i is samples [i*B, (i+1)*B). Writes every parameter,
named_parameters order, as float32 to --out and the names, one a line, to
--out.names.
"""
import argparse

import numpy as np
import torch


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--module", required=True)
    p.add_argument("--features", required=True)
    p.add_argument("--labels", required=True)
    p.add_argument("--sample", type=int, required=True, help="elements per sample")
    p.add_argument("--tokens", action="store_true")
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--optimizer", choices=["sgd", "adamw"], required=True)
    p.add_argument("--lr", type=float, required=True)
    p.add_argument("--momentum", type=float, default=0.0)
    p.add_argument("--weight_decay", type=float, default=0.0)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    torch.set_num_threads(1)
    m = torch.jit.load(a.module)
    m.train()
    x = np.fromfile(a.features, dtype=np.float32 if not a.tokens else np.int32)
    y = np.fromfile(a.labels, dtype=np.int32)
    x = torch.from_numpy(x.reshape(-1, a.sample))
    y = torch.from_numpy(y.astype(np.int64)).reshape(x.shape[0], -1).squeeze(1)
    if a.tokens:
        x = x.long()
    params = list(m.parameters())
    if a.optimizer == "sgd":
        opt = torch.optim.SGD(params, lr=a.lr, momentum=a.momentum, weight_decay=a.weight_decay)
    else:
        opt = torch.optim.AdamW(params, lr=a.lr, weight_decay=a.weight_decay)
    for step in range(a.steps):
        xb = x[step * a.batch:(step + 1) * a.batch]
        yb = y[step * a.batch:(step + 1) * a.batch]
        opt.zero_grad()
        logits = m(xb)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 yb.reshape(-1))
        loss.backward()
        opt.step()
    names = [n for n, _ in m.named_parameters()]
    with open(a.out, "wb") as f:
        for t in m.parameters():
            f.write(t.detach().contiguous().numpy().astype(np.float32).tobytes())
    with open(a.out + ".names", "w") as f:
        f.write("\n".join(names) + "\n")


if __name__ == "__main__":
    main()
