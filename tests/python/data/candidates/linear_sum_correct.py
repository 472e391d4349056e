import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """The linear layer and the sum, as the problem writes them: the same parameters in the same
    order, so that the same seed draws the same weights."""

    def __init__(self, in_features, out_features, reduce_dim):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.reduce_dim = reduce_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(self.linear(x), dim=self.reduce_dim, keepdim=True)
