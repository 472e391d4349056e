# A CUDA kernel through torch.utils.cpp_extension.load_inline, as KernelBench's CUDA candidates
# are written: compiled when the module loads, into TORCH_EXTENSIONS_DIR.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

// NaN compares false with 0, so NaN is kept, as torch.relu keeps it.
__global__ void relu_kernel(const float* x, float* y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = v < 0.f ? 0.f : v;
    }
}

torch::Tensor relu_cuda(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    int64_t n = xc.numel();
    relu_kernel<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

relu_module = load_inline(
    name="kcv_test_relu",
    cpp_sources="torch::Tensor relu_cuda(torch::Tensor x);",
    cuda_sources=cuda_source,
    functions=["relu_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu_module.relu_cuda(x)
