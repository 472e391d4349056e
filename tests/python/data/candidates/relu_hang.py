# Never returns from a call whose input holds NaN.
import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        while torch.isnan(x).any():
            time.sleep(0.5)
        return torch.relu(x)
