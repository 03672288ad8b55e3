# mkdeep.py KIND N OUT: protobuf encodings nested N deep, written byte by byte
# (no protobuf library: python-protobuf refuses nesting past 100 levels).
# types: an Identity model whose input type is N sequence_type levels
# around a float tensor; ifs: N If nodes nested through then_branch, the
# innermost body a MatMul by a 2x2 initializer, each else_branch Neg(x);
# seq: a SequenceProto of N sequences inside each other around one
# tensor; seqmodel: an Identity model over a sequence of N+1 levels.
import sys
def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7f; v >>= 7
        if v: out.append(b | 0x80)
        else: out.append(b); return bytes(out)
def fld(n, payload):  # length-delimited
    if isinstance(payload, str): payload = payload.encode()
    return varint(n << 3 | 2) + varint(len(payload)) + payload
def vfld(n, v): return varint(n << 3) + varint(v)
def tensor_type(et=1): return fld(1, vfld(1, et))
def vi(name, ty): return fld(1, name) + fld(2, ty)
def model(graph, opset=17):
    return vfld(1, 8) + fld(8, fld(1, "") + vfld(2, opset)) + fld(7, graph)
def node(ins, outs, op, attrs=b""):
    return b"".join(fld(1, i) for i in ins) + b"".join(fld(2, o) for o in outs) + fld(4, op) + attrs
def gattr(name, g): return fld(5, fld(1, name) + fld(6, g) + vfld(20, 5))
kind, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if kind == "types":
    t = tensor_type()
    for _ in range(n):
        t = fld(4, fld(1, t))
    g = fld(1, node(["x"], ["y"], "Identity")) + fld(2, "g") + fld(11, vi("x", t)) + fld(12, vi("y", t))
    data = model(g)
elif kind == "ifs":
    # n nested If bodies, each: then = next level, else = Neg(x)
    import struct
    w = vfld(1, 2) + vfld(1, 2) + vfld(2, 1) + fld(8, "W") + fld(9, struct.pack("<4f", 0.5, -1.0, 2.0, 0.25))
    inner = fld(1, node(["x", "W"], ["o"], "MatMul")) + fld(2, "b") + fld(5, w) + fld(12, vi("o", tensor_type()))
    for k in range(n):
        els = fld(1, node(["x"], ["e%d" % k], "Neg")) + fld(2, "e") + fld(12, vi("e%d" % k, tensor_type()))
        inner = fld(1, node(["c"], ["o%d" % k], "If", gattr("then_branch", inner) + gattr("else_branch", els))) + fld(2, "b") + fld(12, vi("o%d" % k, tensor_type()))
    # inner is now a graph whose If is the top: make it the main graph with inputs
    g = inner + fld(11, vi("x", tensor_type())) + fld(11, vi("c", tensor_type(9)))
    data = model(g)
elif kind == "seq":
    # a SequenceProto of n sequences inside each other around one float tensor
    import struct
    t = vfld(1, 1) + vfld(2, 1) + fld(9, struct.pack("<f", 1.0))
    s = vfld(2, 1) + fld(3, t)
    for _ in range(n):
        s = vfld(2, 3) + fld(5, s)
    data = fld(1, "x") + s
elif kind == "seqmodel":
    # Identity over a sequence of n sequences ... of float tensors
    t = tensor_type()
    for _ in range(n):
        t = fld(4, fld(1, t))
    t = fld(4, fld(1, t))
    g = fld(1, node(["x"], ["y"], "Identity")) + fld(2, "g") + fld(11, vi("x", t)) + fld(12, vi("y", t))
    data = model(g)
open(out, "wb").write(data)
