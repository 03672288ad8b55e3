#!/usr/bin/env python3
"""Train and export the small real models of tests/t_infer_crosscheck.sh.

Run with Debian's python3-torch (1.13): /usr/bin/python3 tests/models/make_models.py
It writes, next to this script:
  cnn.onnx          a LeNet-style CNN (Conv, BatchNorm, ReLU, MaxPool, Flatten,
                    Gemm) trained to tell horizontal from vertical bars on
                    synthetic 16x16 images; dynamic batch dimension.
  cnn_functions.onnx  the same CNN exported with its modules as model-local
                    functions (FunctionProto with attribute references).
  transformer.onnx  a 2-layer transformer encoder classifier (Embedding,
                    multi-head attention, LayerNorm, GELU) trained on a toy
                    sequence task; dynamic batch and sequence dimensions, which
                    the exporter turns into Shape/Gather/Concat/Reshape chains.
Training is seeded and takes seconds; the outputs are committed so that CI
never retrains.
"""
import math
import os

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
torch.manual_seed(0)


def bars(n):
    """images of one horizontal (label 0) or vertical (label 1) bar plus noise"""
    x = torch.rand(n, 1, 16, 16) * 0.3
    y = torch.randint(0, 2, (n,))
    pos = torch.randint(2, 14, (n,))
    for i in range(n):
        if y[i] == 0:
            x[i, 0, pos[i], :] += 1.0
        else:
            x[i, 0, :, pos[i]] += 1.0
    return x, y


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(16 * 4 * 4, 32), nn.ReLU(), nn.Linear(32, 2))

    def forward(self, x):
        return self.head(self.features(x))


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln1 = nn.LayerNorm(d)
        self.ln2 = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        b, t, d = x.shape
        h = self.ln1(x)
        q, k, v = self.qkv(h).split(d, dim=2)
        q = q.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
        k = k.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
        v = v.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
        att = torch.softmax(q @ k.transpose(2, 3) / math.sqrt(d // self.heads), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.ff(self.ln2(x))


class Transformer(nn.Module):
    def __init__(self, vocab=16, d=32, heads=4, layers=2, maxlen=64):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(1, maxlen, d) * 0.02)
        self.blocks = nn.ModuleList([Block(d, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.out = nn.Linear(d, 2)

    def forward(self, tok):
        t = tok.shape[1]
        x = self.emb(tok) + self.pos[:, :t]
        for blk in self.blocks:
            x = blk(x)
        return self.out(self.ln(x).mean(dim=1))


def train(model, batch, steps):
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(steps):
        x, y = batch()
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    x, y = batch()
    model.eval()
    with torch.no_grad():
        acc = (model(x).argmax(1) == y).float().mean().item()
    return loss.item(), acc


def tokens():
    """label: does token 3 occur more often than token 5?"""
    x = torch.randint(0, 16, (64, 20))
    y = ((x == 3).sum(1) > (x == 5).sum(1)).long()
    return x, y


def main():
    cnn = CNN()
    print("cnn: loss %.3f accuracy %.2f" % train(cnn, lambda: bars(64), 150))
    torch.onnx.export(cnn, bars(1)[0], os.path.join(HERE, "cnn.onnx"), opset_version=13,
                      input_names=["image"], output_names=["logits"],
                      dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}})
    torch.onnx.export(cnn, bars(1)[0], os.path.join(HERE, "cnn_functions.onnx"), opset_version=15,
                      input_names=["image"], output_names=["logits"],
                      dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}},
                      export_modules_as_functions={nn.Conv2d, nn.BatchNorm2d, nn.Linear, nn.Sequential})
    tr = Transformer()
    print("transformer: loss %.3f accuracy %.2f" % train(tr, tokens, 300))
    torch.onnx.export(tr, tokens()[0][:2], os.path.join(HERE, "transformer.onnx"), opset_version=14,
                      input_names=["tokens"], output_names=["logits"],
                      dynamic_axes={"tokens": {0: "batch", 1: "seq"}, "logits": {0: "batch"}})


if __name__ == "__main__":
    main()
