#!/bin/sh
# The interpreter's OpenBLAS path for Conv, ConvTranspose, MatMul and Gemm
# (used on CPUs without AVX-512, where src/ops/fgemm.c is not), forced with
# QUANTMAKE_GEMM=openblas, against ONNX's reference outputs.
. "$(dirname "$0")/lib/common.sh"
QUANTMAKE_GEMM=openblas sh "$ROOT/tests/t_run_conformance.sh" 'test_conv*' 'test_convtranspose*' 'test_matmul*' \
	'test_gemm*' 'test_basic_conv*' 'test_Conv*' 'test_ConvTranspose*' 'test_Linear*' 'test_operator_conv*' \
	'test_operator_mm*' 'test_operator_addmm*' 'test_operator_lstm*' 'test_lstm*' 'test_gru*' 'test_rnn*' 2>&1 |
	sed -n 's/^\(PASS\|FAIL\|SKIP\): /\1: openblas: /p'
