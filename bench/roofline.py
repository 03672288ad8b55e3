"""The arithmetic floor of static calibration, per model of bench/quantize.py.

    .venv/bin/python bench/roofline.py [--quantmake ./quantmake] [--samples 100,1000] [--repeat 2]
                                       [--models digits,cnn,...] [--peak-runs 40]

Calibration runs the float model on every calibration sample, so its wall
time is bounded below by samples x multiply-adds per sample / what the
machine's cores can do. This prints, per model of bench/quantize.py (the
same models and calibration samples: its setup_models):

1. multiply-adds (MACs) per calibration sample, counted from the model
   after onnx shape inference with its inputs fixed at the shapes of one
   calibration sample (batch 1, as quantize.py generates them). Counted:
   Conv, ConvTranspose, MatMul, Gemm, LSTM, GRU, RNN, Einsum (the
   products; their element-wise gate and bias work and every other
   operator are not counted, so the floor is lower than the true cost).
   If: the branch that calibration sample 0 takes, found by running the
   model once in onnx's reference evaluator. Loop and Scan bodies that
   hold a counted operator are an error (not counted per iteration here).
2. the machine's measured float32 peak: one large MatMul (1024x1024 by
   1024x1024) and one large Conv (1x256x56x56, 256 3x3 filters, pads 1),
   each run by `quantmake run --bench` with -t 1 and -t 2 and by
   onnxruntime with 1 and 2 intra-op threads (bench/interp-ort.py bench),
   GFLOP/s = 2 x MACs / median latency (best of --repeat medians). The
   peak of 2 cores is the larger of the best 2-thread figure of any of
   them and twice the best 1-thread figure (perfect scaling: on a shared
   machine a 2-thread run often finds one core busy), so the floor is as
   low as anything measured here allows (the best anyone achieves, not
   quantmake's).
3. per model and sample count: floor s = samples x 2 x MACs / peak(2
   threads); onnxruntime's quantize_static wall time (QDQ uint8, run as
   quantize.py runs it: a fresh Python process); the goal of issue 6 (a
   tenth of it); quantmake's whole build wall time (export, infer-shapes,
   calibrate, quantize in a fresh project and cache at its default -j, as
   quantize.py runs it) and its calibrate stage's time from the build log.
   Each time is the best of --repeat runs (tools interleaved). Also the
   fixed part of both tools: a build / quantize_static with 1 sample.
Load average before and after is printed: the machine may be shared.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.dont_write_bytecode = True  # no bench/__pycache__ from importing quantize.py
import quantize as q  # noqa: E402

COUNTED = ("Conv", "ConvTranspose", "MatMul", "Gemm", "LSTM", "GRU", "RNN", "Einsum")
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


class CountError(Exception):
    pass


def if_choices(model, feeds):
    """{If node name: taken branch attribute name} when the model runs
    feeds in onnx's reference evaluator (nested Ifs too)"""
    from onnx.reference import ReferenceEvaluator
    from onnx.reference.ops.op_if import If
    taken = {}

    class RecordingIf(If):
        op_domain = ""

        def _run(self, cond, context=None, else_branch=None, then_branch=None, attributes=None, bindings=None):
            taken[self.onnx_node.name] = "then_branch" if np.asarray(cond).item() else "else_branch"
            return If._run(self, cond, context=context, else_branch=else_branch, then_branch=then_branch,
                           attributes=attributes, bindings=bindings)
    RecordingIf.__name__ = "If"
    ReferenceEvaluator(model, new_ops=[RecordingIf]).run(None, feeds)
    return taken


def has_op(g, ops):
    for n in g.node:
        if n.op_type in ops:
            return True
        if any(a.type == onnx.AttributeProto.GRAPH and has_op(a.g, ops) for a in n.attribute):
            return True
    return False


def count_op(g, op):
    """op nodes in g and its subgraphs"""
    return sum((n.op_type == op) + sum(count_op(a.g, op) for a in n.attribute if a.type == onnx.AttributeProto.GRAPH)
               for n in g.node)


def name_ifs(g, k):
    """a unique name for every unnamed If (branches are told apart by name)"""
    for n in g.node:
        if n.op_type == "If" and not n.name:
            k[0] += 1
            n.name = "If#%d" % k[0]
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                name_ifs(a.g, k)


def fixed_inputs(model, feeds):
    """model with its graph inputs' shapes set to those of feeds"""
    for i in model.graph.input:
        if i.name not in feeds:
            continue
        dims = i.type.tensor_type.shape.dim
        while len(dims):
            dims.pop()
        for d in np.asarray(feeds[i.name]).shape:
            dims.add().dim_value = d
    return model


def shapes_of(g, outer):
    """{tensor name: dims (None where unknown)} visible in graph g"""
    s = dict(outer)
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        t = vi.type.tensor_type
        if t.HasField("shape"):
            s[vi.name] = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
    for init in g.initializer:
        s[init.name] = list(init.dims)
    for n in g.node:
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value":
                    s[n.output[0]] = list(a.t.dims)
    return s


def dims(shapes, node, name):
    d = shapes.get(name)
    if d is None or any(x is None for x in d):
        raise CountError("node '%s' (%s): shape of '%s' unknown after shape inference (%s)"
                         % (node.name, node.op_type, name, "no shape" if d is None else d))
    return d


def attr(node, name, default):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def einsum_macs(node, shapes):
    eq = attr(node, "equation", b"").decode().replace(" ", "")
    if "..." in eq:
        raise CountError("node '%s' (Einsum): equation '%s' with an ellipsis is not counted" % (node.name, eq))
    lhs = eq.split("->")[0].split(",")
    size = {}
    for term, name in zip(lhs, node.input):
        for c, d in zip(term, dims(shapes, node, name)):
            size[c] = max(size.get(c, 1), d)
    # one multiply-add per point of the space of every index
    return int(np.prod([size[c] for c in size], dtype=np.int64))


def node_macs(node, shapes):
    op = node.op_type
    if op == "Conv":
        w = dims(shapes, node, node.input[1])
        y = dims(shapes, node, node.output[0])
        return int(np.prod(y, dtype=np.int64)) * int(np.prod(w[1:], dtype=np.int64))
    if op == "ConvTranspose":
        x = dims(shapes, node, node.input[0])
        w = dims(shapes, node, node.input[1])
        # every input element times a Cout/group x kernel block
        return int(np.prod(x, dtype=np.int64)) * int(np.prod(w[1:], dtype=np.int64))
    if op == "MatMul":
        a = dims(shapes, node, node.input[0])
        y = dims(shapes, node, node.output[0])
        return int(np.prod(y, dtype=np.int64)) * a[-1]
    if op == "Gemm":
        a = dims(shapes, node, node.input[0])
        y = dims(shapes, node, node.output[0])
        k = a[0] if attr(node, "transA", 0) else a[1]
        return y[0] * y[1] * k
    if op in GATES:
        x = dims(shapes, node, node.input[0])
        w = dims(shapes, node, node.input[1])
        hidden = attr(node, "hidden_size", None) or w[1] // GATES[op]
        seq, batch = (x[1], x[0]) if attr(node, "layout", 0) else (x[0], x[1])
        # W x and R h of every step, every direction
        return w[0] * seq * batch * GATES[op] * hidden * (x[2] + hidden)
    if op == "Einsum":
        return einsum_macs(node, shapes)
    return 0


def graph_macs(g, outer, choices, per_op):
    shapes = shapes_of(g, outer)
    total = 0
    for n in g.node:
        m = node_macs(n, shapes)
        if m:
            per_op[n.op_type] = per_op.get(n.op_type, 0) + m
            total += m
        if n.op_type == "If":
            branch = choices.get(n.name)
            for a in n.attribute:
                if a.name == branch:
                    total += graph_macs(a.g, shapes, choices, per_op)
            if branch is None and any(has_op(a.g, COUNTED) for a in n.attribute if a.type == onnx.AttributeProto.GRAPH):
                raise CountError("node '%s' (If): not run by the reference evaluator, branch unknown" % n.name)
        elif n.op_type in ("Loop", "Scan") and any(has_op(a.g, COUNTED) for a in n.attribute
                                                     if a.type == onnx.AttributeProto.GRAPH):
            raise CountError("node '%s' (%s): a body with counted operators is not counted per iteration"
                             % (n.name, n.op_type))
    return total


def inline_ifs(g, choices):
    """replaces every If of g whose branch is known by that branch's nodes
    (its outputs renamed by Identity nodes, its initializers moved to g's):
    onnx's shape inference does not see the values of a branch's
    initializers (a Pad's pads, a Reshape's shape), in g it does. ONNX
    names are unique across a model's graphs, so nothing clashes."""
    nodes = []
    for n in g.node:
        branch = choices.get(n.name) if n.op_type == "If" else None
        b = next((a.g for a in n.attribute if a.name == branch), None)
        if b is None:
            nodes.append(n)
            continue
        inline_ifs(b, choices)
        g.initializer.extend(b.initializer)
        nodes.extend(b.node)
        nodes.extend(helper.make_node("Identity", [o.name], [y], name="%s/%s" % (n.name, y))
                     for o, y in zip(b.output, n.output))
    del g.node[:]
    g.node.extend(nodes)


def fold_constants(model):
    """replaces the nodes of the main graph that compute from constants
    only (a Pad's pads made by ConstantOfShape, Concat, Reshape, Transpose:
    more than onnx's data propagation follows) by initializers holding
    their values, computed by onnx's reference evaluator"""
    g = model.graph
    inputs = {i.name for i in g.input}
    const = {i.name for i in g.initializer if i.name not in inputs}
    folded = []
    for n in g.node:
        if n.op_type in ("If", "Loop", "Scan") or n.op_type.startswith("Random") or n.domain not in ("", "ai.onnx"):
            continue
        if all(i == "" or i in const for i in n.input):
            folded.append(n)
            const.update(o for o in n.output if o)
    if not folded:
        return
    from onnx.reference import ReferenceEvaluator
    used = {i for n in folded for i in n.input}
    outs = [o for n in folded for o in n.output if o]
    sub = helper.make_graph(folded, "fold", [], [helper.make_empty_tensor_value_info(o) for o in outs],
                            [i for i in g.initializer if i.name in used])
    values = ReferenceEvaluator(helper.make_model(sub, opset_imports=model.opset_import)).run(None, {})
    keep = [n for n in g.node if n not in folded]
    del g.node[:]
    g.node.extend(keep)
    g.initializer.extend(numpy_helper.from_array(np.asarray(v), o) for o, v in zip(outs, values))


def count_macs(path, feeds):
    """(MACs of one run on feeds, {op: MACs}, {If name: branch})"""
    model = fixed_inputs(onnx.load(path), feeds)
    choices = {}
    if has_op(model.graph, ("If",)):
        name_ifs(model.graph, [0])
        choices = if_choices(model, feeds)
        inline_ifs(model.graph, choices)
    fold_constants(model)
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    per_op = {}
    return graph_macs(model.graph, {}, choices, per_op), per_op, choices


# ---- the machine's peak: products big enough that any good kernel runs
# at its compute bound

def peak_models(work):
    """[(label, path, feeds .npz, MACs)]"""
    r = np.random.default_rng(7)
    out = []
    a = r.standard_normal((1024, 1024)).astype(np.float32)
    w = r.standard_normal((1024, 1024)).astype(np.float32)
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "mm",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1024, 1024])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1024, 1024])],
                          [numpy_helper.from_array(w, "w")])
    out.append(("MatMul 1024x1024 by 1024x1024", g, {"x": a}))
    x = r.standard_normal((1, 256, 56, 56)).astype(np.float32)
    w = (r.standard_normal((256, 256, 3, 3)) * 0.02).astype(np.float32)
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], name="conv", kernel_shape=[3, 3],
                                            pads=[1, 1, 1, 1])], "conv",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 256, 56, 56])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 256, 56, 56])],
                          [numpy_helper.from_array(w, "w")])
    out.append(("Conv 1x256x56x56, 256 3x3, pads 1", g, {"x": x}))
    res = []
    for i, (label, g, feeds) in enumerate(out):
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
        m.ir_version = 7
        path = os.path.join(work, "peak%d.onnx" % i)
        onnx.save(m, path)
        np.savez(path + ".npz", **feeds)
        macs, _, _ = count_macs(path, feeds)
        res.append((label, path, path + ".npz", macs))
    return res


def qm_p50(qm, path, inp, runs, threads):
    out = subprocess.run([qm, "run", path, "-i", inp, "--bench", str(runs), "-t", str(threads), "-q"],
                         capture_output=True, text=True)
    m = re.search(r"p50 ([0-9.]+) ms", out.stdout)
    if out.returncode != 0 or not m:
        sys.exit("roofline.py: quantmake run %s: %s" % (path, (out.stderr or out.stdout).strip()[-200:]))
    return float(m.group(1)) / 1e3


def ort_p50(path, inp, runs, threads):
    out = subprocess.run([q.PY, os.path.join(q.ROOT, "bench/interp-ort.py"), "bench", path, inp, str(runs),
                          str(threads)], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("roofline.py: onnxruntime on %s: %s" % (path, out.stderr.strip()[-200:]))
    return float(out.stdout.split()[1]) / 1e3


def measure_peak(qm, work, runs, repeat):
    """{threads: best GFLOP/s}, after printing every measurement"""
    print("| product | MMACs | quantmake -t 1 GFLOP/s | quantmake -t 2 | onnxruntime 1 thread | onnxruntime 2 threads |")
    print("|---|---|---|---|---|---|")
    best = {1: 0.0, 2: 0.0}
    for label, path, inp, macs in peak_models(work):
        cells = []
        for who in ("quantmake", "ort"):
            for t in (1, 2):
                lat = min(qm_p50(qm, path, inp, runs, t) if who == "quantmake" else ort_p50(path, inp, runs, t)
                          for _ in range(repeat))
                gf = 2 * macs / lat / 1e9
                best[t] = max(best[t], gf)
                cells.append("%.0f" % gf)
        print("| %s | %.0f | %s |" % (label, macs / 1e6, " | ".join(cells)))
        sys.stdout.flush()
    return best


# ---- the tools' times

STAGE = re.compile(r"^\[\d+/\d+\] calibrate m \(([0-9.]+)s\)", re.M)


def qm_build(qm, work, model, data, tag):
    """(wall s, calibrate stage s) of a whole static build as quantize.py runs it"""
    log = []
    t, _, err, _ = q.quantmake(qm, 0, False, work, model, "static", "uint8", data, tag, log=log)
    if err:
        sys.exit("roofline.py: quantmake on %s: %s" % (tag, err))
    m = STAGE.search(log[0])
    if not m:
        sys.exit("roofline.py: quantmake on %s: no '[i/n] calibrate m (Ns)' line in its log" % tag)
    return t[0], float(m.group(1))


def ort_quant(work, model, data, tag):
    t, _, err, _ = q.peer(work, False, model, "static", "uint8", data, tag)
    if err:
        sys.exit("roofline.py: onnxruntime quantize_static on %s: %s" % (tag, err))
    return t[0]


def best_times(qm, work, model, data, tag, repeat):
    """best of repeat runs, the tools interleaved: (ORT s, quantmake s,
    quantmake's calibrate s of its best run)"""
    ort_s, qm_runs = [], []
    for k in range(repeat):
        ort_s.append(ort_quant(work, model, data, "%s-%d" % (tag, k)))
        qm_runs.append(qm_build(qm, work, model, data, "%s-%d" % (tag, k)))
    w, c = min(qm_runs)
    return min(ort_s), w, c


def loadavg():
    return "%.2f %.2f %.2f" % os.getloadavg()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quantmake", default=os.path.join(q.ROOT, "quantmake"))
    ap.add_argument("--samples", default="100,1000", help="comma-separated calibration set sizes")
    ap.add_argument("--repeat", type=int, default=2, help="runs of each timing; the best is kept")
    ap.add_argument("--peak-runs", type=int, default=40, help="--bench runs of each peak product")
    ap.add_argument("--models", default=q.MODELS, help="comma-separated, from bench/quantize.py's list")
    a = ap.parse_args()
    names = a.models.split(",")
    for name in names:
        if name not in q.MODELS.split(","):
            sys.exit("roofline.py: --models: unknown model '%s' (expected some of %s)" % (name, q.MODELS))
    try:
        counts = sorted({int(s) for s in a.samples.split(",")})
    except ValueError:
        sys.exit("roofline.py: --samples: expected comma-separated counts, got '%s'" % a.samples)
    if not counts or counts[0] < 1 or a.repeat < 1 or a.peak_runs < 1:
        sys.exit("roofline.py: --samples, --repeat and --peak-runs must be positive")
    qm = os.path.abspath(a.quantmake)
    if not os.access(qm, os.X_OK):
        sys.exit("roofline.py: --quantmake: %s is not an executable" % qm)
    q.ort.set_default_logger_severity(3)
    work = tempfile.mkdtemp(prefix="qmroofline-")
    try:
        print("roofline.py: %s, onnxruntime %s, load average %s" % (
            time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), q.ort.__version__, loadavg()))
        models = q.setup_models(work, names, max(counts))
        macs = {}
        print("\nMultiply-adds per calibration sample (batch 1; counted: %s):\n" % ", ".join(COUNTED))
        print("| model | sample shapes | MMACs/sample | by operator | If branches taken |")
        print("|---|---|---|---|---|")
        for name in names:
            if name not in models:
                continue
            path, gen, _ = models[name]
            feeds = gen(0)
            try:
                macs[name], per_op, choices = count_macs(path, feeds)
            except CountError as e:
                sys.exit("roofline.py: %s: %s" % (name, e))
            print("| %s | %s | %.4f | %s | %s |" % (
                name, ", ".join("%s %s" % (k, "x".join(map(str, np.shape(v))) or "scalar") for k, v in feeds.items()),
                macs[name] / 1e6, ", ".join("%s %.4f" % kv for kv in sorted((k, v / 1e6) for k, v in per_op.items())),
                "%d run of %d" % (len(choices), count_op(onnx.load(path).graph, "If")) if choices else "-"))
        sys.stdout.flush()

        print("\nfloat32 peak (2 x MACs / median latency; best of %d medians of %d runs):\n" % (a.repeat, a.peak_runs))
        peak = measure_peak(qm, work, a.peak_runs, a.repeat)
        p2 = max(peak[2], 2 * peak[1])
        print("\npeak: 1 thread %.0f GFLOP/s, 2 threads %.0f GFLOP/s measured; 2 cores at peak = max(%.0f, 2 x %.0f) "
              "= %.0f GFLOP/s (load average %s)\n" % (peak[1], peak[2], peak[2], peak[1], p2, loadavg()))
        p2 *= 1e9

        fixed = {}
        rows = []
        loads = []
        for name in names:
            if name not in macs:
                continue
            loads.append("%s %.1f" % (name, os.getloadavg()[0]))
            path, gen, _ = models[name]
            for n in [1] + counts:
                data = q.write_calib(os.path.join(work, "calib-%s-%d" % (name, n)), gen, n)
                o, w, c = best_times(qm, work, path, data, "%s-%d" % (name, n), a.repeat)
                if n == 1:
                    fixed[name] = (o, w, c)
                else:
                    rows.append((name, n, o, w, c))
                shutil.rmtree(data)
        print("Fixed part (1 calibration sample, best of %d): " % a.repeat + "; ".join(
            "%s quantmake %.2f s (calibrate %.2f), ORT %.2f s" % (k, v[1], v[2], v[0]) for k, v in fixed.items()))
        print("\n| model | samples | MMACs/sample | floor s (2 cores at peak) | ORT s | goal s (ORT/10) | goal/floor "
              "| quantmake s | quantmake calibrate s | quantmake / floor | calibrate / floor |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for name, n, o, w, c in rows:
            floor = n * 2 * macs[name] / p2
            print("| %s | %d | %.4g | %.3g | %.2f | %.3f | %.3g | %.2f | %.2f | %.3gx | %.3gx |" % (
                name, n, macs[name] / 1e6, floor, o, o / 10, o / 10 / floor, w, c, w / floor, c / floor))
        print("\nload average (1 min) as each model's timings began: %s; at the end: %s" % (", ".join(loads), loadavg()))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
