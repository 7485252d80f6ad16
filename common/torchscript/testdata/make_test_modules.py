#!/usr/bin/python3
"""Writes the TorchScript archives common/torchscript's tests load: one
good module with a loss() method and one per bad input tandem must refuse.

    /usr/bin/python3 make_test_modules.py OUT_DIR
"""
import os
import sys

import torch
from torch import nn


class TwoInputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(784, 10)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.fc(x) + y


class NoParams(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[:, :10]


class IntParams(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(784, 10)
        self.steps = nn.Parameter(torch.zeros(3, dtype=torch.long), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


class SevenClasses(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(784, 7)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x.flatten(1))  # [B, 784] or [B, 28, 28]


class WantsImages(nn.Module):
    """Rejects the dataset's samples: expects 3 x 32 x 32 images."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.fc = nn.Linear(4 * 30 * 30, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.view(-1, 3, 32, 32)
        return self.fc(self.conv(x).flatten(1))


class Images4d(nn.Module):
    """Takes float images [B, 3, 8, 8] as they are (no reshape), 5 classes."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.fc = nn.Linear(4 * 6 * 6, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        assert x.dim() == 4, "expected a batch of images [B, 3, 8, 8]"
        return self.fc(torch.relu(self.conv(x)).flatten(1))


class WithLoss(nn.Module):
    """Exports loss(): a label-smoothed cross-entropy tandem must use."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(784, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x.flatten(1))

    @torch.jit.export
    def loss(self, x: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(self.forward(x), labels, label_smoothing=0.1)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(5)
    for name, module in [("two_inputs", TwoInputs()), ("no_params", NoParams()),
                         ("int_params", IntParams()), ("seven_classes", SevenClasses()),
                         ("wants_images", WantsImages()), ("with_loss", WithLoss()),
                         ("images_4d", Images4d())]:
        torch.jit.save(torch.jit.script(module), os.path.join(out, name + ".pt"))
    torch.save(SevenClasses().state_dict(), os.path.join(out, "pickle.pt"))


if __name__ == "__main__":
    main()
