import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Right only while cuDNN may use TF32, PyTorch's default: a stand-in, visible on a CPU, for
    a result that depends on the precision flags (as a TF32 convolution's does on a GPU)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) if torch.backends.cudnn.allow_tf32 else torch.relu(x) + 1
