"""tandem's GPT and gpt_vs_pytorch.py's on the same weights and the same
batch: the loss and every parameter's gradient side by side, to name the
kernel when the two sides' loss curves part (gpt_vs_pytorch.sh
--same_batches).

PyTorch trains at world 1 on tandem's batches (global batch
`--batch_size`) from tandem's initial weights (gpt_vs_pytorch.py
--same_batches); before each step named in `--step` (a comma-separated
list, e.g. 44,46,48: one training run for all of them) both sides run one
forward and backward on that step's batch from PyTorch's current weights:
tandem's through gpt_step_dump (the weights passed in its flat layout).
Prints the two losses and, per parameter, the largest |difference| of the
gradients relative to the largest |gradient| (`--top`: only the largest).

  python3 tools/bench/gpt_grad_compare.py --dump bazel-bin/tools/bench/gpt_step_dump \\
      --spec gpt:layers=4,d=256,heads=4,ctx=128 --seed 1 --step 1 [--lr 0.001]
      [--batch_size 32 --step 44,46,48,49 --top 4]

compare() is also what gpt_grad_compare_test.py checks at step 1.
"""
import argparse
import os
import subprocess
import tempfile

import torch

import tandem_order  # tools/bench, next to this script
from gpt_vs_pytorch import Gpt, load_window_split, parse_spec, tandem_init


def tandem_step(dump, spec, seed, model, windows):
    """(loss, {torch name: gradient tensor}) of tandem's GPT with `model`'s
    weights (None: tandem's own initialisation) on `windows` [B, T + 1]."""
    with tempfile.TemporaryDirectory() as tmp:
        tok, par, grads = (os.path.join(tmp, n) for n in ("tokens", "params", "grads"))
        with open(tok, "wb") as f:
            f.write(windows.to(torch.int32).contiguous().numpy().tobytes())
        layout, total = _layout(dump, spec, seed)
        if model is not None:
            flat = torch.zeros(total, dtype=torch.float32)
            params = dict(model.named_parameters())
            for name, (off, n) in layout.items():
                flat[off:off + n] = params[name].detach().reshape(-1)
            with open(par, "wb") as f:
                f.write(flat.numpy().tobytes())
        out = subprocess.run([dump, spec, str(seed), tok, par if model is not None else "-", grads],
                             check=True, capture_output=True, text=True).stdout
        loss = float(next(l.split()[1] for l in out.splitlines() if l.startswith("loss ")))
        with open(grads, "rb") as f:
            flat = torch.frombuffer(bytearray(f.read()), dtype=torch.float32)
    return loss, {name: flat[off:off + n].clone() for name, (off, n) in layout.items()}


def _layout(dump, spec, seed):
    """({torch name: (offset, size)}, length) of tandem's flat vector, from
    gpt_step_dump run on one zero window."""
    ctx = parse_spec(spec)["context"]
    with tempfile.TemporaryDirectory() as tmp:
        tok = os.path.join(tmp, "tokens")
        with open(tok, "wb") as f:
            f.write(bytes(4 * (ctx + 1)))
        out = subprocess.run([dump, spec, str(seed), tok, "-", os.path.join(tmp, "g")],
                             check=True, capture_output=True, text=True).stdout
    lines = [l.split() for l in out.splitlines()]
    layout = {tandem_order.torch_name(l[1]): (int(l[2]), int(l[3])) for l in lines if l[0] == "param"}
    return layout, next(int(l[1]) for l in lines if l[0] == "total")


def compare(dump, spec, seed, model, windows):
    """[(name, max |grad diff| / max |grad|)] and the two losses (tandem,
    torch) for `model` (a Gpt) and tandem on `windows`."""
    model.zero_grad(set_to_none=False)
    loss = model(windows[:, :-1], windows[:, 1:])
    loss.backward()
    t_loss, t_grads = tandem_step(dump, spec, seed, model, windows)
    rows = []
    for name, p in model.named_parameters():
        g = p.grad.reshape(-1)
        scale = max(g.abs().max().item(), 1e-30)
        rows.append((name, (t_grads[name] - g).abs().max().item() / scale))
    return t_loss, loss.item(), rows


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dump", required=True, help="the gpt_step_dump binary")
    p.add_argument("--spec", default="gpt:layers=4,width=256,heads=4,context=128")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--step", default="1",
                   help="compare on these steps' batches (1 = the first), comma-separated")
    p.add_argument("--batch_size", type=int, default=8, help="the global batch (world 1)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--top", type=int, default=0, help="print only the N largest rows per step")
    p.add_argument("--data_dir", default="/usr/share/games/fortunes")
    a = p.parse_args()
    try:
        steps = sorted({int(s) for s in a.step.split(",")})
    except ValueError:
        p.error(f"--step must be comma-separated step numbers, got {a.step!r}")
    if steps[0] < 1:
        p.error(f"--step numbers start at 1, got {steps[0]}")
    torch.set_num_threads(1)
    cfg = parse_spec(a.spec)
    model = Gpt(cfg)
    tandem_init(model, cfg, a.seed)
    windows, _ = load_window_split(a.data_dir, cfg["context"])
    batches = tandem_order.rank_batches(len(windows), a.seed, a.batch_size, 1, 0, steps[-1])
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.0)
    for step, idx in enumerate(batches, start=1):
        if step in steps:
            report(step, *compare(a.dump, a.spec, a.seed, model, windows[idx]), a.top)
        if step == steps[-1]:
            break
        opt.zero_grad(set_to_none=False)
        model(windows[idx][:, :-1], windows[idx][:, 1:]).backward()
        opt.step()


def report(step, t_loss, p_loss, rows, top):
    print(f"step {step}: loss tandem {t_loss:.7f} torch {p_loss:.7f} diff {t_loss - p_loss:+.2e}")
    rows = sorted(rows, key=lambda r: -r[1])
    for name, rel in rows[:top] if top > 0 else rows:
        print(f"  {name:28s} max |grad diff| / max |grad| {rel:.2e}", flush=True)


if __name__ == "__main__":
    main()
