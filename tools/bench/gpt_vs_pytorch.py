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
seeded permutation per epoch split into per-rank slices. With
--same_batches the batches are tandem's (its sampler, rank for rank) and
the initial weights tandem's for the same --seed (tandem_order.py), so the
two sides' losses compare step by step.

After the last step every rank evaluates its slice of the held-out windows
(the last 5%, the windows tandem's --dataset fortunes evaluates on) and the
sums are all-reduced, as tandem's evaluator does, so both sides report the
mean next-token loss on the same text after the same number of steps.

Prints progress lines in tandem's format ("step S/T epoch E loss L ...
tokens/s X ...", loss = mean over the window and the ranks, as tandem's),
tandem's eval line ("final (step S) eval loss L token accuracy A (N
sequences)"), then
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

import tandem_order  # tools/bench, next to this script
from torch_ranks import leave, spawn_ranks


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


def torch_normals(seed, count, stddev, skip):
    """tandem_order.init_normals, vectorised: value k of InitRng's stream
    uses its draws 2k + 1 and 2k + 2 (SplitMix64 is a counter: draw i mixes
    init_state + i * golden). int64 arithmetic wraps as uint64 does; the
    shifts are masked to be logical. Rounded to float32, as tandem stores it."""
    def signed(v):
        return v - (1 << 64) if v >= 1 << 63 else v

    def mix(z):
        z = (z ^ ((z >> 30) & ((1 << 34) - 1))) * signed(0xBF58476D1CE4E5B9)
        z = (z ^ ((z >> 27) & ((1 << 37) - 1))) * signed(0x94D049BB133111EB)
        return z ^ ((z >> 31) & ((1 << 33) - 1))

    def uniform(draw):  # draw: int64 tensor of 1-based draw numbers
        z = mix(signed(tandem_order.init_state(seed)) + draw * signed(tandem_order.GOLDEN))
        return ((z >> 11) & ((1 << 53) - 1)).double() * (1.0 / 9007199254740992.0)

    k = torch.arange(skip, skip + count, dtype=torch.int64)
    u1 = 1.0 - uniform(2 * k + 1)
    u2 = uniform(2 * k + 2)
    return (stddev * torch.sqrt(-2.0 * torch.log(u1)) * torch.cos(6.283185307179586 * u2)).float()


def tandem_init(model, cfg, seed):
    """Overwrites `model` (a Gpt) with GptModel::Initialize(seed)'s values:
    the draws of tandem_order.gpt_init_plan, biases 0, LayerNorm gains 1
    (already so). Checks the vectorised draw against the plain one first."""
    head = torch.tensor(tandem_order.init_normals(seed, 64, 0.02)).float()
    assert torch.equal(torch_normals(seed, 64, 0.02, 0), head), "torch_normals disagrees"
    params = dict(model.named_parameters())
    skip = 0
    with torch.no_grad():
        for name, count, std in tandem_order.gpt_init_plan(cfg["layers"], cfg["width"],
                                                           cfg["context"], cfg["vocab"]):
            p = params[name]
            assert p.numel() == count, f"{name}: {p.numel()} elements, tandem has {count}"
            p.copy_(torch_normals(seed, count, std, skip).view_as(p))
            skip += count


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


def torch_order(n, seed, global_batch, world, rank, steps):
    """(epoch, sample indices) of each step: a torch.randperm per epoch seeded
    by seed * 1000 + epoch, cut into global batches and per-rank slices."""
    gen = torch.Generator()
    per_epoch = n // global_batch
    step, epoch = 0, 0
    while step < steps:
        gen.manual_seed(seed * 1000 + epoch)
        perm = torch.randperm(n, generator=gen)
        for b in range(min(per_epoch, steps - step)):
            lo = b * global_batch + rank * (global_batch // world)
            yield epoch, perm[lo:lo + global_batch // world]
            step += 1
        epoch += 1


def tandem_batches(n, seed, global_batch, world, rank, steps):
    """(epoch, sample indices) of each step in tandem's data order."""
    per_epoch = n // global_batch
    for i, idx in enumerate(tandem_order.rank_batches(n, seed, global_batch, world, rank, steps)):
        yield i // per_epoch, torch.tensor(idx, dtype=torch.int64)


def run(rank, world, a, port):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=world)
    cfg = parse_spec(a.spec)
    torch.manual_seed(a.seed)
    gpt = Gpt(cfg)
    if a.same_batches:
        tandem_init(gpt, cfg, a.seed)
    model = torch.nn.parallel.DistributedDataParallel(gpt)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.0)
    windows, held_out = load_window_split(a.data_dir, cfg["context"])
    global_batch = a.batch_size * world
    total = a.max_steps
    order = tandem_batches if a.same_batches else torch_order
    batches = order(len(windows), a.seed, global_batch, world, rank, total)
    rates = []
    # This rank's loss per step; the logged loss is the mean over the ranks
    # (tandem's), summed in one all-reduce per log window.
    losses = torch.zeros(total, dtype=torch.float64)
    dist.barrier()
    t_window = time.perf_counter()
    for step, (epoch, idx) in enumerate(batches, start=1):
        xb = windows[idx]
        opt.zero_grad(set_to_none=False)
        loss = model(xb[:, :-1], xb[:, 1:])
        loss.backward()
        opt.step()
        losses[step - 1] = loss.item()
        if step % a.log_every == 0 or step == total:
            now = time.perf_counter()
            n = a.log_every if step % a.log_every == 0 else step % a.log_every
            dt = now - t_window
            window = losses[step - n:step].clone()
            dist.all_reduce(window)
            t_window = time.perf_counter()
            rates.append(n * global_batch * cfg["context"] / dt)
            losses[step - n:step] = window / world
            if rank == 0:
                print(f"step {step}/{total} epoch {epoch + 1} loss {window.sum().item() / n / world:.4f} "
                      f"lr {a.lr:.4f} tokens/s {rates[-1]:.0f} ms/step {1e3 * dt / n:.1f} "
                      f"world {world}", flush=True)
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
              f"loss={losses[-n:].mean().item():.4f} eval_loss={eval_loss:.4f} "
              f"rank_drift={drift:.3g} torch={torch.__version__}", flush=True)
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
    p.add_argument("--same_batches", action="store_true",
                   help="train on tandem's batches (its sampler, rank for rank) from tandem's "
                        "initial weights for --seed, instead of torch's own order and init")
    a = p.parse_args()
    spawn_ranks(run, a.world, a)


if __name__ == "__main__":
    main()
