"""Loaded by every Python the tests start (tests/run.sh puts tests/lib on
PYTHONPATH): onnxruntime sessions get "session.x64quantprecision" = "1".

Without it onnxruntime's u8*s8 integer kernels on x86-64 CPUs with AVX2
but no VNNI sum pairs of products in 16 bits, which saturates, so its
outputs for an integer model are not what the model computes (6 dB less
SQNR on the digits MLP). The tests compare quantmake's outputs, figures
and models against what the model computes; this setting makes
onnxruntime compute that on every CPU."""
import importlib.abc
import importlib.util
import sys


def _patch(ort):
    base = ort.InferenceSession

    class InferenceSession(base):
        def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None, **kw):
            so = sess_options if sess_options is not None else ort.SessionOptions()
            so.add_session_config_entry("session.x64quantprecision", "1")
            try:
                super().__init__(path_or_bytes, so, providers, provider_options, **kw)
            except Exception:  # onnxruntime raises its own classes (Fail, NotImplemented, RuntimeException)
                # the setting's graph rewrite has no kernel for some models
                # (QLinearConv on int8 activations, QOperator nodes inside
                # subgraphs): those run as onnxruntime runs them by default
                so = sess_options if sess_options is not None else ort.SessionOptions()
                so.add_session_config_entry("session.x64quantprecision", "0")
                super().__init__(path_or_bytes, so, providers, provider_options, **kw)

    ort.InferenceSession = InferenceSession


class _Hook(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "onnxruntime":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _patch(module)

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _Hook())
