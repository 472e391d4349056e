import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Treats subnormal inputs as zero, as a kernel built with denormals-are-zero does."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tiny = torch.finfo(x.dtype).tiny
        return torch.log(torch.where(x.abs() < tiny, torch.zeros_like(x), x))
