"""Write src/preprocess/opset-history.txt: for every operator of the default ONNX
domain, the opset versions at which its schema changed and, per version,
whether its signature (attribute names, required flags and defaults; input
and output names and options) differs from the version before, or the
version deprecates the operator. preprocess.opset (src/preprocess/opset.c)
converts only through versions that keep the signature, or that it has an
adapter for.

    .venv/bin/python tools/gen-opset-table.py > src/preprocess/opset-history.txt

It is data taken from ONNX's schemas (which the build cannot import: Debian's
onnx is older than the opsets we convert to); tools/gen-opset-table.sh makes
the C table from it at build time.
"""
import collections
import onnx
import onnx.defs as d


def sig(s):
    at = {k: (v.required, v.default_value.SerializeToString() if v.default_value.name else b"")
          for k, v in s.attributes.items()}
    return (at, [(i.name, int(i.option)) for i in s.inputs], [(o.name, int(o.option)) for o in s.outputs])


by = collections.defaultdict(list)
for s in d.get_all_schemas_with_history():
    if s.domain in ("", "ai.onnx"):
        by[s.name].append(s)
print(f"""# opset-history.txt: the schema versions of every default-domain ONNX operator,
# written by tools/gen-opset-table.py from the schemas of onnx {onnx.__version__} (opsets 1..{d.onnx_opset_version()});
# turned into C at build time by tools/gen-opset-table.sh. One line per operator:
# NAME then each version at which its schema changed, suffixed ":sig" when its
# attributes, inputs or outputs differ from the version before (names,
# required/optional, attribute defaults) and ":dep" when it deprecates the
# operator; a bare version changed only type constraints or wording.""")
for name in sorted(by):
    vs = sorted(by[name], key=lambda s: s.since_version)
    words = []
    prev = None
    for s in vs:
        w = str(s.since_version)
        if prev is not None and sig(prev) != sig(s):
            w += ":sig"
        if s.deprecated:
            w += ":dep"
        words.append(w)
        prev = s
    assert len(words) <= 16, name
    print(name, " ".join(words))
