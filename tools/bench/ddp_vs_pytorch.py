"""PyTorch DDP side of tools/bench/ddp_vs_pytorch.sh.

Trains the same MLP (or, with --spec torchscript:PATH, the same TorchScript
archive) as `tandem local` on Fashion-MNIST with
DistributedDataParallel over gloo, one process per rank and one thread each
(torch.set_num_threads(1)), with tandem's defaults reproduced: SGD momentum
0.9 (or AdamW), lr scaled linearly with the world size (sqrt for AdamW, when
--lr_scaling=auto), cosine decay to 0 over all steps, per-worker batch B, a
seeded permutation per epoch with each global batch of B*world split into
contiguous rank slices and the remainder dropped, inputs scaled to [0, 1].

With --dataset fortunes (a torchscript: language model, forward(tokens
[B, T]) -> logits [B, T, 256]) the data are the byte-level fortunes text cut
as `tandem local --dataset fortunes` cuts it (gpt_vs_pytorch.py's
load_window_split: windows of --context+1 bytes, the last 5% held out), the
loss is the mean token cross-entropy, rates are tokens/s and the accuracy is
the held-out windows' next-token accuracy.

Prints progress lines in tandem's format ("step S/T ... samples/s X ...") so
the shell script reads both the same way, then one line
  RESULT pytorch world=W samples_per_s=<median of windows> wall_s=<train> accuracy=<test>
(tokens_per_s= instead of samples_per_s= for fortunes)
"""
import argparse
import gzip
import math
import os
import statistics
import time

import numpy as np
import torch
import torch.distributed as dist

from gpt_vs_pytorch import load_window_split  # tools/bench, next to this script
from torch_ranks import leave, spawn_ranks


def load_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(data_dir, split):
    x = load_idx(os.path.join(data_dir, f"{split}-images-idx3-ubyte.gz"))
    y = load_idx(os.path.join(data_dir, f"{split}-labels-idx1-ubyte.gz"))
    x = torch.from_numpy(x.reshape(len(x), -1).astype(np.float32) / 255.0)
    return x, torch.from_numpy(y.astype(np.int64))


def load_data(a, split):
    """(inputs, labels, units per sample) of the --dataset's split."""
    if a.dataset == "fashion-mnist":
        return load(a.data_dir, split) + (1,)
    train, held_out = load_window_split(a.data_dir, a.context)
    w = train if split == "train" else held_out
    return w[:, :-1].contiguous(), w[:, 1:].contiguous(), a.context


def flat_loss(logits, labels):
    """Mean cross-entropy over samples ([B, C]) or tokens ([B, T, C])."""
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             labels.reshape(-1))


def accuracy(net, x, y):
    """Share of argmax predictions equal to the labels, 256 samples at a time."""
    right = 0
    with torch.no_grad():
        for i in range(0, len(x), 256):
            right += (net(x[i:i + 256]).argmax(-1) == y[i:i + 256]).sum().item()
    return right / y.numel()


def build(widths):
    layers = []
    for i in range(len(widths) - 1):
        layers.append(torch.nn.Linear(widths[i], widths[i + 1]))
        if i + 2 < len(widths):
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def run(rank, world, a, port):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=world)
    torch.manual_seed(a.seed)  # same init on every rank (DDP also broadcasts)
    if a.spec.startswith("torchscript:"):
        # The same archive tandem trains (tools/bench/torchscript_vs_pytorch.sh).
        net = torch.jit.load(a.spec.split(":", 1)[1])
    else:
        net = build([int(w) for w in a.spec.split(":", 1)[1].split(",")])
    model = torch.nn.parallel.DistributedDataParallel(net)
    scaling = a.lr_scaling
    if scaling == "auto":
        scaling = "linear" if a.optimizer == "sgd" else "sqrt"
    factor = {"linear": world, "sqrt": math.sqrt(world), "none": 1}[scaling]
    lr = a.lr * factor
    if a.optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    x, y, units = load_data(a, "train")
    unit = "samples/s" if units == 1 else "tokens/s"
    global_batch = a.batch_size * world
    per_epoch = len(x) // global_batch
    total = per_epoch * a.epochs
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: 0.5 * (1 + math.cos(math.pi * min(s + 1, total) / total)))
    gen = torch.Generator()
    rates = []
    step = 0
    dist.barrier()
    t_start = time.perf_counter()
    t_window = t_start
    for epoch in range(a.epochs):
        gen.manual_seed(a.seed * 1000 + epoch)
        perm = torch.randperm(len(x), generator=gen)
        for b in range(per_epoch):
            idx = perm[b * global_batch + rank * a.batch_size:
                       b * global_batch + (rank + 1) * a.batch_size]
            xb, yb = x[idx], y[idx]
            opt.zero_grad(set_to_none=True)
            loss = flat_loss(model(xb), yb)
            loss.backward()
            opt.step()
            sched.step()
            step += 1
            if step % a.log_every == 0 or step == total:
                now = time.perf_counter()
                n = a.log_every if step % a.log_every == 0 else step % a.log_every
                rate = n * global_batch * units / (now - t_window)
                t_window = now
                rates.append(rate)
                if rank == 0:
                    print(f"step {step}/{total} epoch {epoch + 1} loss {loss.item():.4f} "
                          f"lr {sched.get_last_lr()[0]:.4f} {unit} {rate:.0f} world {world}",
                          flush=True)
    dist.barrier()
    wall = time.perf_counter() - t_start
    if rank == 0:
        xt, yt, _ = load_data(a, "t10k")
        model.module.eval()
        acc = accuracy(model.module, xt, yt)
        # Windows after the first (warm-up), like the tandem side.
        steady = rates[1:] if len(rates) > 2 else rates
        print(f"RESULT pytorch world={world} {unit.replace('/', '_per_')}="
              f"{statistics.median(steady):.1f} "
              f"wall_s={wall:.2f} accuracy={acc:.4f} torch={torch.__version__}", flush=True)
    leave(dist)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--spec", default="mlp:784,1024,1024,10")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch_size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--optimizer", default="sgd", choices=["sgd", "adamw"])
    p.add_argument("--lr_scaling", default="linear", choices=["auto", "linear", "sqrt", "none"])
    p.add_argument("--log_every", type=int, default=20)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--dataset", default="fashion-mnist", choices=["fashion-mnist", "fortunes"])
    p.add_argument("--context", type=int, default=64, help="fortunes: tokens per window")
    p.add_argument("--data_dir", default=None,
                   help="default /usr/share/datasets/fashion-mnist or /usr/share/games/fortunes")
    a = p.parse_args()
    if a.data_dir is None:
        a.data_dir = {"fashion-mnist": "/usr/share/datasets/fashion-mnist",
                      "fortunes": "/usr/share/games/fortunes"}[a.dataset]
    spawn_ranks(run, a.world, a)


if __name__ == "__main__":
    main()
