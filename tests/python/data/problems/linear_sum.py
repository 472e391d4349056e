import torch
import torch.nn as nn


class Model(nn.Module):
    """A linear layer followed by a sum over a dimension: parameters, init inputs, a derived
    shape constant and a non-size constant, as in KernelBench's level 2."""

    def __init__(self, in_features, out_features, reduce_dim):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.reduce_dim = reduce_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x).sum(dim=self.reduce_dim, keepdim=True)


batch_size = 8
in_features = 32
out_features = 2 * 8
input_shape = (in_features,)
reduce_dim = 1


def get_inputs():
    return [torch.rand(batch_size, *input_shape)]


def get_init_inputs():
    return [in_features, out_features, reduce_dim]
