"""Train the bundled example: a 64-32-10 MLP on scikit-learn's 8x8 digits.

Run once by a developer (needs numpy and scikit-learn); writes weights.npz,
calib.npy (200 training images for calibration) and test.npz (held-out
images and labels for verification). The build itself never retrains: the
export step (export.py) only turns weights.npz into ONNX.
"""
import numpy as np
from sklearn.datasets import load_digits

rng = np.random.default_rng(0)
d = load_digits()
x = (d.data / 16.0).astype(np.float32)
y = d.target.astype(np.int64)
perm = rng.permutation(len(x))
x, y = x[perm], y[perm]
xtr, ytr, xte, yte = x[:1400], y[:1400], x[1400:], y[1400:]

w1 = (rng.standard_normal((64, 32)) * np.sqrt(2 / 64)).astype(np.float32)
b1 = np.zeros(32, np.float32)
w2 = (rng.standard_normal((32, 10)) * np.sqrt(2 / 32)).astype(np.float32)
b2 = np.zeros(10, np.float32)
lr = 0.1
for epoch in range(60):
    for i in range(0, len(xtr), 32):
        xb, yb = xtr[i:i + 32], ytr[i:i + 32]
        h = np.maximum(xb @ w1 + b1, 0)
        z = h @ w2 + b2
        p = np.exp(z - z.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        g = p.copy()
        g[np.arange(len(yb)), yb] -= 1
        g /= len(yb)
        gw2, gb2 = h.T @ g, g.sum(0)
        gh = (g @ w2.T) * (h > 0)
        gw1, gb1 = xb.T @ gh, gh.sum(0)
        w1 -= lr * gw1; b1 -= lr * gb1; w2 -= lr * gw2; b2 -= lr * gb2
acc = ((np.maximum(xte @ w1 + b1, 0) @ w2 + b2).argmax(1) == yte).mean()
print(f"test accuracy {acc:.4f}")
np.savez("weights.npz", w1=w1, b1=b1, w2=w2, b2=b2)
np.save("calib.npy", xtr[:200])
np.savez("test.npz", input=xte, labels=yte)
