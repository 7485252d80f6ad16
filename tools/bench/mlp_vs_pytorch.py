"""PyTorch side of tools/bench/mlp_vs_pytorch.sh: training-step samples/s of
an MLP (Linear+ReLU ..., Linear, CrossEntropyLoss, SGD momentum 0.9), one
thread, synthetic data; median of several timed runs after a warm-up. Prints
one RESULT line per batch size in the same format as mlp_step_bench."""
import argparse
import statistics
import time

import torch


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--spec", default="mlp:784,1024,1024,10")
    p.add_argument("--batches", default="64,256")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    widths = [int(w) for w in a.spec.split(":", 1)[1].split(",")]
    for batch in [int(b) for b in a.batches.split(",")]:
        layers = []
        for i in range(len(widths) - 1):
            layers.append(torch.nn.Linear(widths[i], widths[i + 1]))
            if i + 2 < len(widths):
                layers.append(torch.nn.ReLU())
        model = torch.nn.Sequential(*layers)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
        loss_fn = torch.nn.CrossEntropyLoss()
        x = torch.randn(batch, widths[0])
        y = torch.arange(batch) % widths[-1]

        def step():
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()

        for _ in range(3):
            step()
        rates = []
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            for _ in range(a.steps):
                step()
            rates.append(a.steps * batch / (time.perf_counter() - t0))
        print("RESULT pytorch %s batch=%d threads=%d samples_per_s=%.1f "
              "(median of %d x %d steps; min %.1f max %.1f) torch %s"
              % (a.spec, batch, a.threads, statistics.median(rates), a.repeats,
                 a.steps, min(rates), max(rates), torch.__version__))


if __name__ == "__main__":
    main()
