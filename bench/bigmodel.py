#!/usr/bin/env python3
"""Write a big float32 model whose weights live in external data (by default
about 4 GiB, over protobuf's 2 GiB limit), for bench/bigmodel.sh and tests.

    .venv/bin/python bench/bigmodel.py OUT.onnx [--gib 4] [--dim 8192]

The graph is an MLP on x[batch, D]: blocks of MatMul(D->4D) + Add + Relu +
MatMul(4D->D) + Add, the last down-projection a Gemm (transB=1), then a
Conv (1x1 over the D features seen as channels) and Softmax. Blocks are
added until the weights reach --gib. Weights are written one by one into
OUT.onnx.data (each at a 4096-aligned offset, as onnx.save aligns them)
without ever holding the whole model in memory; values are small random
normals from a fixed seed, so a run is reproducible."""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--gib", type=float, default=4.0, help="weight bytes to reach (GiB)")
    ap.add_argument("--dim", type=int, default=8192, help="feature width D (hidden 4D)")
    ap.add_argument("--batch", type=int, default=1, help="batch size; 0: symbolic (N)")
    a = ap.parse_args()
    D, H = a.dim, 4 * a.dim
    block = 2 * D * H * 4
    nblocks = max(1, round(a.gib * 2**30 / block))
    dataname = os.path.basename(a.out) + ".data"
    datapath = os.path.join(os.path.dirname(a.out) or ".", dataname)
    rng = np.random.default_rng(1234)
    inits, nodes = [], []
    f = open(datapath, "wb")

    def ext(name, arr):
        off = (f.tell() + 4095) // 4096 * 4096
        f.seek(off)
        f.write(np.ascontiguousarray(arr).tobytes())
        t = TensorProto()
        t.name = name
        t.data_type = helper.np_dtype_to_tensor_dtype(arr.dtype)
        t.dims.extend(arr.shape)
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", dataname), ("offset", str(off)), ("length", str(arr.nbytes))):
            e = t.external_data.add()
            e.key, e.value = k, v
        inits.append(t)

    def weight(shape, fan_in):
        w = rng.standard_normal(shape, dtype=np.float32)
        w *= np.float32(1.0 / np.sqrt(fan_in))
        return w

    x = "x"
    for i in range(nblocks):
        ext(f"w{i}_up", weight((D, H), D))
        ext(f"b{i}_up", weight((H,), H) * np.float32(0.1))
        nodes += [
            helper.make_node("MatMul", [x, f"w{i}_up"], [f"h{i}_mm"], name=f"up{i}"),
            helper.make_node("Add", [f"h{i}_mm", f"b{i}_up"], [f"h{i}_add"], name=f"up{i}_bias"),
            helper.make_node("Relu", [f"h{i}_add"], [f"h{i}"], name=f"relu{i}"),
        ]
        if i == nblocks - 1:
            ext(f"w{i}_down", weight((D, H), H))  # Gemm transB: [N, K]
            ext(f"b{i}_down", weight((D,), D) * np.float32(0.1))
            nodes.append(helper.make_node("Gemm", [f"h{i}", f"w{i}_down", f"b{i}_down"], [f"y{i}"],
                                          name=f"down{i}", transB=1))
        else:
            ext(f"w{i}_down", weight((H, D), H))
            ext(f"b{i}_down", weight((D,), D) * np.float32(0.1))
            nodes += [
                helper.make_node("MatMul", [f"h{i}", f"w{i}_down"], [f"y{i}_mm"], name=f"down{i}"),
                helper.make_node("Add", [f"y{i}_mm", f"b{i}_down"], [f"y{i}"], name=f"down{i}_bias"),
            ]
        x = f"y{i}"
    ext("conv_w", weight((16, D, 1), D))
    ext("conv_b", weight((16,), 16))
    shape = helper.make_tensor("conv_shape", TensorProto.INT64, [3], [a.batch or -1, D, 1])
    inits.append(shape)
    nodes += [
        helper.make_node("Reshape", [x, "conv_shape"], ["c_in"], name="to_conv"),
        helper.make_node("Conv", ["c_in", "conv_w", "conv_b"], ["c_out"], name="head", kernel_shape=[1]),
        helper.make_node("Flatten", ["c_out"], ["logits"], name="flatten"),
        helper.make_node("Softmax", ["logits"], ["prob"], name="softmax", axis=1),
    ]
    f.close()
    g = helper.make_graph(nodes, "bigmodel",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [a.batch or "N", D])],
                          [helper.make_tensor_value_info("prob", TensorProto.FLOAT, [a.batch or "N", 16])],
                          initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="bigmodel.py")
    m.ir_version = 8
    with open(a.out, "wb") as fo:
        fo.write(m.SerializeToString())
    onnx.checker.check_model(a.out)
    print(f"{a.out}: {nblocks} blocks, D={D}, {os.path.getsize(datapath) / 2**30:.2f} GiB in {dataname}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
