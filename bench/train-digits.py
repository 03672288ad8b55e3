"""Train the two real models of bench/quantize.py on scikit-learn's 8x8
digits with Debian's python3-torch, and export them to ONNX.

    /usr/bin/python3 bench/train-digits.py DATA.npz OUTDIR

DATA.npz holds xtr, ytr (training images, 64 floats in [0, 1], labels)
written by bench/quantize.py, which reads the digits with scikit-learn from
the test virtual environment (Debian's torch lives in the system Python,
scikit-learn in .venv). Writes OUTDIR/digits-cnn.onnx (two 3x3 convs of
32 and 64 channels, max pooling, a 1024x128 and a 128x10 layer: weight-heavy)
and OUTDIR/digits-vit.onnx (a small transformer: the 8 rows of the image are
8 tokens, width 64, 2 encoder layers of 4 heads, mean pooling). Fixed seeds;
CPU only; a minute or so. bench/train-fashion.py reuses Block and train.
"""
import sys

import numpy as np
import torch
from torch import nn


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.f = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
                               nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64 * 16, 128), nn.ReLU(),
                               nn.Linear(128, 10))

    def forward(self, x):
        return self.f(x.reshape(-1, 1, 8, 8))


class Block(nn.Module):
    """pre-norm encoder layer written out, so that it exports as plain
    MatMul/Softmax/LayerNormalization operators"""

    def __init__(self, d, heads):
        super().__init__()
        self.h, self.dk = heads, d // heads
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.o = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.n1(x)).reshape(b, t, 3, self.h, self.dk).permute(2, 0, 3, 1, 4)
        a = torch.softmax(q @ k.transpose(-1, -2) / self.dk ** 0.5, dim=-1) @ v
        x = x + self.o(a.transpose(1, 2).reshape(b, t, d))
        return x + self.ff(self.n2(x))


class ViT(nn.Module):
    def __init__(self, d=64, heads=4, layers=2):
        super().__init__()
        self.emb = nn.Linear(8, d)
        self.pos = nn.Parameter(torch.randn(1, 8, d) * 0.02)
        self.blocks = nn.Sequential(*[Block(d, heads) for _ in range(layers)])
        self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, 10)

    def forward(self, x):
        x = self.blocks(self.emb(x.reshape(-1, 8, 8)) + self.pos)
        return self.head(self.norm(x).mean(1))


def train(model, x, y, epochs, lr):
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, lr, total_steps=epochs * ((len(x) + 63) // 64))
    g = torch.Generator().manual_seed(1)
    for _ in range(epochs):
        model.train()
        for idx in torch.randperm(len(x), generator=g).split(64):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x[idx]), y[idx]).backward()
            opt.step()
            sched.step()
    model.eval()
    return model


def main():
    torch.manual_seed(0)
    torch.set_num_threads(2)
    d = np.load(sys.argv[1])
    x, y = torch.tensor(d["xtr"], dtype=torch.float32), torch.tensor(d["ytr"], dtype=torch.int64)
    for name, model, epochs, lr, opset in (("digits-cnn", CNN(), 30, 3e-3, 13), ("digits-vit", ViT(), 80, 2e-3, 17)):
        train(model, x, y, epochs, lr)
        torch.onnx.export(model, x[:1], "%s/%s.onnx" % (sys.argv[2], name), input_names=["input"],
                          output_names=["logits"], dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}},
                          opset_version=opset, do_constant_folding=True)


if __name__ == "__main__":
    main()
