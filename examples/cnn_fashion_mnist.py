#!/usr/bin/python3
"""A small CNN for Fashion-MNIST, scripted for tandem's TorchScript worker.

    /usr/bin/python3 examples/cnn_fashion_mnist.py --out cnn.pt
    tandem local --workers 4 --model torchscript:cnn.pt --dataset fashion-mnist \
        --epochs 2 --batch-size 64 --lr 0.05

forward(x) takes the samples as tandem's worker hands them (float32
[B, 28, 28] for Fashion-MNIST; [B, 784] or [B, 1, 28, 28] work too) and
returns logits [B, 10]; tandem computes the mean cross-entropy. --norm none replaces
BatchNorm by nothing (a model whose N-worker training equals one process at
N x the batch exactly: BatchNorm normalises per worker's batch). --smooth
uses GELU and average pooling instead of ReLU and max-pooling: no ties for
rounding-level differences to flip (tandem's tests compare it with PyTorch).
"""
import argparse

import torch
from torch import nn


class FashionCnn(nn.Module):
    def __init__(self, norm: str = "batch", smooth: bool = False):
        super().__init__()
        self.act = nn.GELU() if smooth else nn.ReLU()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16) if norm == "batch" else nn.Identity()
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(32) if norm == "batch" else nn.Identity()
        self.pool = nn.AvgPool2d(2) if smooth else nn.MaxPool2d(2)
        self.fc1 = nn.Linear(32 * 7 * 7, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.reshape(-1, 1, 28, 28).float()
        x = self.pool(self.act(self.bn1(self.conv1(x))))
        x = self.pool(self.act(self.bn2(self.conv2(x))))
        x = self.act(self.fc1(x.flatten(1)))
        return self.fc2(x)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="where to write the TorchScript archive")
    p.add_argument("--seed", type=int, default=1, help="initial weights")
    p.add_argument("--norm", choices=["batch", "none"], default="batch")
    p.add_argument("--smooth", action="store_true", help="GELU and average pooling")
    a = p.parse_args()
    torch.manual_seed(a.seed)
    torch.jit.save(torch.jit.script(FashionCnn(a.norm, a.smooth)), a.out)


if __name__ == "__main__":
    main()
