import torch
import torch.nn as nn


class Model(nn.Module):
    """Natural logarithm of positive values."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log(x)


batch_size = 16
dim = 256


def get_inputs():
    return [torch.rand(batch_size, dim) + 0.5]


def get_init_inputs():
    return []
