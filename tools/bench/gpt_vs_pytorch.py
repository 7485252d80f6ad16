"""PyTorch DDP side of tools/bench/gpt_vs_pytorch.sh.

Trains the GPT tandem builds from "gpt:layers=L,width=W,heads=H,context=T"
(common/nn/gpt.h: GPT-2 pre-LN blocks, fused QKV with bias, GELU (tanh) MLP
of width 4W, untied head without bias, N(0, 0.02) init with the residual
projections scaled by 1/sqrt(2L)) on the byte-level fortunes text, the way
`tandem local --dataset fortunes` cuts it (sorted regular files of
/usr/share/games/fortunes without *.dat, concatenated, non-overlapping
windows of T+1 bytes, the last 5% held out), with DistributedDataParallel
over gloo, one process per rank and one thread each. AdamW (0.9, 0.999,
eps 1e-8, no weight decay) at a constant lr, no scaling with the world, a
seeded permutation per epoch split into per-rank slices.

After the last step every rank evaluates its slice of the held-out windows
(the last 5%, the windows tandem's --dataset fortunes evaluates on) and the
sums are all-reduced, as tandem's evaluator does, so both sides report the
mean next-token loss on the same text after the same number of steps.

Prints progress lines in tandem's format ("step S/T epoch E loss L ...
tokens/s X ...", loss = mean over the window on rank 0), tandem's eval line
("final (step S) eval loss L token accuracy A (N sequences)"), then
  RESULT pytorch world=W tokens_per_s=<median of windows after the first> loss=<last window>
         eval_loss=<held-out loss> rank_drift=<max |parameter difference| between ranks, 0>
"""
import argparse
import math
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

from torch_ranks import leave, spawn_ranks  # tools/bench, next to this script


def parse_spec(spec):
    kind, _, rest = spec.partition(":")
    assert kind == "gpt", f"need a gpt: spec, got {spec}"
    alias = {"d": "width", "ctx": "context"}
    cfg = {"vocab": 256}
    for item in rest.split(","):
        k, v = item.split("=")
        cfg[alias.get(k, k)] = int(v)
    return cfg


def load_windows(data_dir, context):
    return load_window_split(data_dir, context)[0]


def load_window_split(data_dir, context):
    """(train, held-out) windows of context+1 tokens, as tandem cuts them."""
    names = sorted(n for n in os.listdir(data_dir)
                   if not n.startswith(".") and not n.endswith(".dat"))
    text = bytearray()
    for n in names:
        path = os.path.join(data_dir, n)
        if os.path.isfile(path) and not os.path.islink(path):
            with open(path, "rb") as f:
                text += f.read()
    data = torch.frombuffer(bytearray(text), dtype=torch.uint8).long()
    n = len(data) // (context + 1)
    windows = data[:n * (context + 1)].view(n, context + 1)
    n_eval = max(1, int(math.floor(n * 0.05 + 0.5)))  # tools/convert: llround
    return windows[:n - n_eval], windows[n - n_eval:]


class Block(torch.nn.Module):
    def __init__(self, w, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(w)
        self.qkv = torch.nn.Linear(w, 3 * w)
        self.proj = torch.nn.Linear(w, w)
        self.ln2 = torch.nn.LayerNorm(w)
        self.fc1 = torch.nn.Linear(w, 4 * w)
        self.fc2 = torch.nn.Linear(4 * w, w)

    def attn(self, x, mask):
        b, t, w = x.shape
        q, k, v = self.qkv(x).split(w, dim=2)
        q, k, v = (z.view(b, t, self.heads, w // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(w // self.heads))
        att = F.softmax(att.masked_fill(mask[:t, :t], float("-inf")), dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, t, w))

    def forward(self, x, mask):
        x = x + self.attn(self.ln1(x), mask)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class Gpt(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        w, t = c["width"], c["context"]
        self.tok = torch.nn.Embedding(c["vocab"], w)
        self.pos = torch.nn.Embedding(t, w)
        self.blocks = torch.nn.ModuleList(Block(w, c["heads"]) for _ in range(c["layers"]))
        self.ln_f = torch.nn.LayerNorm(w)
        self.head = torch.nn.Linear(w, c["vocab"], bias=False)
        # A plain attribute, not a buffer: gloo cannot broadcast bool tensors.
        self.mask = torch.ones(t, t, dtype=torch.bool).triu(1)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                torch.nn.init.zeros_(p)
            elif "ln" in name:
                torch.nn.init.ones_(p)
            else:
                std = 0.02 / math.sqrt(2 * c["layers"]) if name.endswith(
                    ("proj.weight", "fc2.weight")) else 0.02
                torch.nn.init.normal_(p, 0.0, std)

    def logits(self, idx):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t))
        for blk in self.blocks:
            x = blk(x, self.mask)
        return self.head(self.ln_f(x))

    def forward(self, idx, targets):
        logits = self.logits(idx)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))


def evaluate(model, held_out, rank, world, batch_size):
    """Mean next-token loss and token accuracy over every held-out window, as
    tandem's evaluator computes them (services/worker/evaluator): each rank
    takes a contiguous 1/world slice in batches of batch_size, the sums meet
    in an all-reduce."""
    per_rank = (len(held_out) + world - 1) // world
    mine = held_out[rank * per_rank:(rank + 1) * per_rank]
    sums = torch.zeros(3, dtype=torch.float64)  # loss sum, right, tokens
    with torch.no_grad():
        for lo in range(0, len(mine), batch_size):
            xb = mine[lo:lo + batch_size]
            logits = model.logits(xb[:, :-1])
            flat, target = logits.reshape(-1, logits.shape[-1]), xb[:, 1:].reshape(-1)
            sums[0] += F.cross_entropy(flat, target, reduction="sum").double()
            sums[1] += (flat.argmax(dim=-1) == target).sum().double()
            sums[2] += target.numel()
    dist.all_reduce(sums)
    return sums[0].item() / sums[2].item(), sums[1].item() / sums[2].item()


def rank_drift(model, world):
    """Largest |difference| of any parameter between rank 0 and any rank:
    0 when DDP kept the replicas identical."""
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    copies = [torch.empty_like(flat) for _ in range(world)]
    dist.all_gather(copies, flat)
    return max((c - copies[0]).abs().max().item() for c in copies)


def run(rank, world, a, port):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=world)
    cfg = parse_spec(a.spec)
    torch.manual_seed(a.seed)
    model = torch.nn.parallel.DistributedDataParallel(Gpt(cfg))
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.0)
    windows, held_out = load_window_split(a.data_dir, cfg["context"])
    global_batch = a.batch_size * world
    per_epoch = len(windows) // global_batch
    total = a.max_steps
    gen = torch.Generator()
    rates, losses = [], []
    step = 0
    dist.barrier()
    t_window = time.perf_counter()
    epoch = 0
    while step < total:
        gen.manual_seed(a.seed * 1000 + epoch)
        perm = torch.randperm(len(windows), generator=gen)
        for b in range(per_epoch):
            if step >= total:
                break
            idx = perm[b * global_batch + rank * a.batch_size:
                       b * global_batch + (rank + 1) * a.batch_size]
            xb = windows[idx]
            opt.zero_grad(set_to_none=False)
            loss = model(xb[:, :-1], xb[:, 1:])
            loss.backward()
            opt.step()
            losses.append(loss.item())
            step += 1
            if step % a.log_every == 0 or step == total:
                now = time.perf_counter()
                n = a.log_every if step % a.log_every == 0 else step % a.log_every
                dt = now - t_window
                rate = n * global_batch * cfg["context"] / dt
                t_window = now
                rates.append(rate)
                window_loss = sum(losses[-n:]) / n
                if rank == 0:
                    print(f"step {step}/{total} epoch {epoch + 1} loss {window_loss:.4f} "
                          f"lr {a.lr:.4f} tokens/s {rate:.0f} ms/step {1e3 * dt / n:.1f} "
                          f"world {world}", flush=True)
        epoch += 1
    dist.barrier()
    drift = rank_drift(model.module, world)
    eval_loss, eval_acc = evaluate(model.module, held_out, rank, world, a.batch_size)
    if rank == 0:
        print(f"final (step {total}) eval loss {eval_loss:.4f} token accuracy {eval_acc:.4f} "
              f"({len(held_out)} sequences)", flush=True)
        print(f"ranks agree: max |parameter difference| between ranks {drift:.3g}", flush=True)
        steady = rates[1:] if len(rates) > 2 else rates
        n = total % a.log_every or a.log_every
        print(f"RESULT pytorch world={world} tokens_per_s={statistics.median(steady):.1f} "
              f"loss={sum(losses[-n:]) / n:.4f} eval_loss={eval_loss:.4f} rank_drift={drift:.3g} "
              f"torch={torch.__version__}", flush=True)
    leave(dist)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--spec", default="gpt:layers=4,width=256,heads=4,context=128")
    p.add_argument("--batch_size", type=int, default=8)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--max_steps", type=int, default=100)
    p.add_argument("--log_every", type=int, default=10)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data_dir", default="/usr/share/games/fortunes")
    a = p.parse_args()
    spawn_ranks(run, a.world, a)


if __name__ == "__main__":
    main()
