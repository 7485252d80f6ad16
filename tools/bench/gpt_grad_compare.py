"""tandem's GPT and gpt_vs_pytorch.py's on the same weights and the same
batch: the loss and every parameter's gradient side by side, to name the
kernel when the two sides' loss curves part (gpt_vs_pytorch.sh
--same_batches).

PyTorch trains `--step - 1` steps at world 1 on tandem's batches from
tandem's initial weights (gpt_vs_pytorch.py --same_batches), then both
sides run one forward and backward on step `--step`'s batch from
PyTorch's current weights: tandem's through gpt_step_dump (the weights
passed in its flat layout). Prints the two losses and, per parameter, the
largest |difference| of the gradients relative to the largest |gradient|.

  python3 tools/bench/gpt_grad_compare.py --dump bazel-bin/tools/bench/gpt_step_dump \\
      --spec gpt:layers=4,d=256,heads=4,ctx=128 --seed 1 --step 1 [--lr 0.001]

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
    p.add_argument("--step", type=int, default=1, help="compare on this step's batch (1 = the first)")
    p.add_argument("--batch_size", type=int, default=8)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--data_dir", default="/usr/share/games/fortunes")
    a = p.parse_args()
    torch.set_num_threads(1)
    cfg = parse_spec(a.spec)
    model = Gpt(cfg)
    tandem_init(model, cfg, a.seed)
    windows, _ = load_window_split(a.data_dir, cfg["context"])
    batches = tandem_order.rank_batches(len(windows), a.seed, a.batch_size, 1, 0, a.step)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.0)
    for idx in batches[:-1]:
        opt.zero_grad(set_to_none=False)
        model(windows[idx][:, :-1], windows[idx][:, 1:]).backward()
        opt.step()
    t_loss, p_loss, rows = compare(a.dump, a.spec, a.seed, model, windows[batches[-1]])
    print(f"step {a.step}: loss tandem {t_loss:.7f} torch {p_loss:.7f} diff {t_loss - p_loss:+.2e}")
    for name, rel in sorted(rows, key=lambda r: -r[1]):
        print(f"  {name:28s} max |grad diff| / max |grad| {rel:.2e}")


if __name__ == "__main__":
    main()
