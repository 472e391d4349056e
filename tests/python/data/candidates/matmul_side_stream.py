# Work on a side stream (GPU only): the product is computed on a stream of its own after a
# delay, and the candidate returns without making the caller's stream wait for it. A check that
# synchronises the whole device (KernelBench's) sees the finished result; a caller that
# synchronises its own stream reads the output before it is written.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.stream = None

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        if self.stream is None:
            self.stream = torch.cuda.Stream()
        C = torch.empty(A.shape[0], B.shape[1], device=A.device, dtype=A.dtype)
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            torch.cuda._sleep(50_000_000)
            torch.matmul(A, B, out=C)
        return C
