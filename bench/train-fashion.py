"""Train the two Fashion-MNIST models of bench/quantize.py with Debian's
python3-torch, and export them to ONNX.

    /usr/bin/python3 bench/train-fashion.py OUTDIR

Reads the 60,000 training images of Debian's dataset-fashion-mnist
(/usr/share/datasets/fashion-mnist, installed by
`sh scripts/install-deps.sh --bench`; bench/fashion_mnist.py), scaled to
[0, 1], and writes
OUTDIR/fashion-cnn.onnx (two 3x3 convs of 32 and 64 channels, each followed
by 2x2 max pooling, a 3136x128 and a 128x10 layer: weight-heavy, 1.7 MB) and
OUTDIR/fashion-vit.onnx (a small transformer: a 7x7 stride-7 patch
convolution makes 16 tokens of width 64, 2 pre-norm encoder layers of 4
heads written out as in bench/train-digits.py, mean pooling). Input
"input" [N, 1, 28, 28], output "logits" [N, 10]. Fixed seeds, one thread
(the bench machine's two cores are shared), CPU only: 3.7 minutes of CPU
time for both (13 minutes of wall time at load average 11). Prints each
model's top-1 on the 10,000 test images (0.9192 and 0.8715).
"""
import importlib.util
import os
import sys
import time

import numpy as np
import torch
from torch import nn

import fashion_mnist

# the transformer layer and the training loop of the digits models
_spec = importlib.util.spec_from_file_location("train_digits", os.path.join(os.path.dirname(__file__),
                                                                            "train-digits.py"))
digits = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(digits)


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.f = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                               nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                               nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))

    def forward(self, x):
        return self.f(x)


class ViT(nn.Module):
    def __init__(self, d=64, heads=4, layers=2):
        super().__init__()
        self.emb = nn.Conv2d(1, d, 7, stride=7)
        self.pos = nn.Parameter(torch.randn(1, 16, d) * 0.02)
        self.blocks = nn.Sequential(*[digits.Block(d, heads) for _ in range(layers)])
        self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, 10)

    def forward(self, x):
        x = self.blocks(self.emb(x).flatten(2).transpose(1, 2) + self.pos)
        return self.head(self.norm(x).mean(1))


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    err = fashion_mnist.missing()
    if err:
        sys.exit("train-fashion.py: " + err)
    xtr, ytr = (torch.tensor(a) for a in fashion_mnist.load("train"))
    xte, yte = fashion_mnist.load("t10k")
    for name, model, epochs, lr, opset in (("fashion-cnn", CNN(), 3, 3e-3, 13), ("fashion-vit", ViT(), 5, 2e-3, 17)):
        t = time.time()
        digits.train(model, xtr, ytr, epochs, lr)
        with torch.no_grad():
            top1 = np.mean([(model(torch.tensor(xte[i:i + 1000])).argmax(1).numpy() == yte[i:i + 1000]).mean()
                            for i in range(0, len(xte), 1000)])
        path = os.path.join(sys.argv[1], name + ".onnx")
        torch.onnx.export(model, xtr[:1], path + ".tmp", input_names=["input"], output_names=["logits"],
                          dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}}, opset_version=opset,
                          do_constant_folding=True)
        os.replace(path + ".tmp", path)
        print("%s: %d epochs in %.0f s, top-1 %.4f on the 10,000 test images" % (name, epochs, time.time() - t, top1))


if __name__ == "__main__":
    main()
