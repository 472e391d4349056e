# Kills its own process when an input holds NaN (a kernel that traps on NaN): the standard check
# never sends one; EXC-01 does, and the crash must become that gate's verdict, not a dead audit.
import os
import signal

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        if torch.isnan(x).any():
            os.kill(os.getpid(), signal.SIGSEGV)
        return torch.relu(x)
