"""Trains a small model of each recurrence member through the kcv.gdn kernels on a synthetic
associative-recall task, and records the loss curves.

The task (multi-query associative recall): a sequence lists `pairs` key-value tokens, then asks
for `queries` of the keys again; the model must emit each key's value after the key is asked.
Keys and values are drawn from disjoint halves of the vocabulary; only the answers are scored.
A model whose mixer cannot store and retrieve associations stays near chance (log of the value
vocabulary), so the curves separate working members from broken ones.

    python examples/train_gdn.py [--steps 300] [--members gdn,kda,gla,ssd,linear_attention]
                                 [--device cuda] [--out curves.json]

On a CUDA device every layer's recurrence runs the sm_90a kernels in bf16 (forward and backward
through the custom ops); on the CPU the ops fall back to the token-by-token recurrence (use
small --steps there).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F


def import_gdn():
    """kcv.gdn, or the package straight from the source tree where kcv itself is not built."""
    try:
        import kcv.gdn as gdn

        return gdn
    except ImportError:
        path = Path(__file__).resolve().parents[1] / "python" / "kcv" / "gdn"
        spec = importlib.util.spec_from_file_location("kcv_gdn", path / "__init__.py",
                                                      submodule_search_locations=[str(path)])
        module = importlib.util.module_from_spec(spec)
        sys.modules["kcv_gdn"] = module
        spec.loader.exec_module(module)
        return module


gdn = import_gdn()


class RecurrentMixer(nn.Module):
    """q, k, v projections, the member's gate and β, the recurrence, an output projection."""

    def __init__(self, member: str, d_model: int, heads: int, head_dim: int):
        super().__init__()
        self.member, self.heads, self.head_dim = member, heads, head_dim
        self.gate, self.delta = gdn.MEMBERS[member]
        inner = heads * head_dim
        self.qkv = nn.Linear(d_model, 3 * inner, bias=False)
        gate_width = {0: 0, 1: heads, 2: inner}[self.gate]
        self.g_proj = nn.Linear(d_model, gate_width) if gate_width else None
        self.b_proj = nn.Linear(d_model, heads) if self.delta else None
        self.out = nn.Linear(inner, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, self.head_dim).unbind(2)
        q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)   # keeps β‖k‖² <= 1
        g = beta = None
        if self.g_proj is not None:
            g = F.logsigmoid(self.g_proj(x).float()) / 8        # log decay <= 0
            g = g.view(B, T, self.heads) if self.gate == 1 else g.view(B, T, self.heads, self.head_dim)
        if self.b_proj is not None:
            beta = torch.sigmoid(self.b_proj(x))
        o, _ = gdn.recurrence(q, k, v, g, beta, member=self.member)
        return self.out(o.reshape(B, T, -1).to(x.dtype))


class Block(nn.Module):
    def __init__(self, member: str, d_model: int, heads: int, head_dim: int):
        super().__init__()
        self.norm1, self.norm2 = nn.RMSNorm(d_model), nn.RMSNorm(d_model)
        self.mixer = RecurrentMixer(member, d_model, heads, head_dim)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x):
        x = x + self.mixer(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class Model(nn.Module):
    def __init__(self, member: str, vocab: int, d_model: int, layers: int, heads: int, head_dim: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.blocks = nn.ModuleList(Block(member, d_model, heads, head_dim) for _ in range(layers))
        self.norm = nn.RMSNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)

    def forward(self, tokens):
        x = self.embed(tokens)
        for b in self.blocks:
            x = b(x)
        return self.head(self.norm(x))


def recall_batch(batch: int, pairs: int, queries: int, vocab: int, gen: torch.Generator, device):
    """Tokens [batch, 2·pairs + 2·queries] and targets (-100 where unscored)."""
    half = vocab // 2
    keys = torch.stack([torch.randperm(half, generator=gen)[:pairs] for _ in range(batch)])
    values = torch.randint(half, vocab, (batch, pairs), generator=gen)
    context = torch.stack([keys, values], dim=2).reshape(batch, 2 * pairs)
    ask = torch.randint(0, pairs, (batch, queries), generator=gen)
    asked_keys = keys.gather(1, ask)
    answers = values.gather(1, ask)
    # Each query is the key followed by its value; the model is scored on predicting the value.
    query = torch.stack([asked_keys, answers], dim=2).reshape(batch, 2 * queries)
    tokens = torch.cat([context, query], dim=1)
    targets = torch.full_like(tokens, -100)
    targets[:, 2 * pairs::2] = answers   # at the key position, predict the next token (the value)
    return tokens.to(device), targets.to(device)


def train(member: str, args, device) -> dict:
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    model = Model(member, args.vocab, args.d_model, args.layers, args.heads, args.head_dim).to(device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=args.steps, pct_start=0.1)
    losses, accuracies = [], []
    start = time.time()
    for step in range(args.steps):
        tokens, targets = recall_batch(args.batch, args.pairs, args.queries, args.vocab, gen, device)
        with torch.autocast(device_type=device.type, dtype=dtype, enabled=device.type == "cuda"):
            logits = model(tokens)
        loss = F.cross_entropy(logits.float().view(-1, args.vocab), targets.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        mask = targets != -100
        accuracies.append((logits.argmax(-1)[mask] == targets[mask]).float().mean().item())
        losses.append(loss.item())
        if step % max(1, args.steps // 10) == 0 or step == args.steps - 1:
            print(f"{member:>16} step {step:4d} loss {loss.item():.4f} acc {accuracies[-1]:.3f}", flush=True)
    return {
        "member": member,
        "loss": losses,
        "accuracy": accuracies,
        "chance_loss": math.log(args.vocab - args.vocab // 2),
        "seconds": time.time() - start,
        "final_loss": sum(losses[-10:]) / len(losses[-10:]),
        "final_accuracy": sum(accuracies[-10:]) / len(accuracies[-10:]),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--members", default="linear_attention,ssd,gla,gdn,kda")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--pairs", type=int, default=16)
    p.add_argument("--queries", type=int, default=16)
    p.add_argument("--vocab", type=int, default=128)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--out", default="train_gdn_curves.json")
    args = p.parse_args()
    device = torch.device(args.device)
    results = [train(m, args, device) for m in args.members.split(",")]
    Path(args.out).write_text(json.dumps({"args": vars(args), "runs": results}))
    print("\n| member | final loss | final accuracy | chance loss | seconds |")
    print("|---|---|---|---|---|")
    for r in results:
        print(f"| {r['member']} | {r['final_loss']:.3f} | {r['final_accuracy']:.3f} | {r['chance_loss']:.3f} | "
              f"{r['seconds']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
