import torch
import torch.nn as nn


class Model(nn.Module):
    """Mean squared error of two batches: a scalar output."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.mean((a - b) ** 2)


batch_size = 64
dim = 128


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
