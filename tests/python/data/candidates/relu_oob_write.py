# Writes 4 bytes past the end of its output (as a kernel with a missing bounds check would),
# through the CUDA runtime. The values it returns are right, so the standard check passes.
import cupy
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(x)
        torch.cuda.synchronize()
        cupy.cuda.runtime.memset(out.data_ptr() + out.numel() * out.element_size(), 0x11, 4)
        return out
