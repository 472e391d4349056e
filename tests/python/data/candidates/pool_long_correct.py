import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool1d(kernel_size=5, stride=1, dilation=3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)
