/* rnn.h — the LSTM of rnn.c with its two matrix products supplied by the
 * caller: com.microsoft DynamicQuantizeLSTM (dqlstm.c) computes them on
 * 8-bit integers and shares everything else (attributes, gates, states,
 * sequence lengths, directions) with the float operator. */
#ifndef QM_OPS_RNN_H
#define QM_OPS_RNN_H

#include <stdint.h>

#include "ops/op.h"

typedef struct RnnGemm RnnGemm;
struct RnnGemm {
	/* out[rows, n] = x[rows, k] * W^T of direction dir (the input
	 * projection of the whole sequence, rows = time x batch) */
	void (*input)(const RnnGemm *g, int dir, int64_t rows, int64_t n, int64_t k, const float *x,
		      float *out);
	/* out[batch, n] (row stride ldo) = h[batch, k] * R^T of direction dir */
	void (*recur)(const RnnGemm *g, int dir, int64_t batch, int64_t n, int64_t k, const float *h,
		      float *out, int64_t ldo);
	void *p;
};

/* Run c as an LSTM whose inputs 1 (W) and 2 (R) are read only by g (their
 * shapes and types are the caller's to check); hidden_size must be set.
 * The input projection covers the time steps up to the longest sequence
 * length only (later ones are never read). 0 or -1 after op_error(). */
int rnn_lstm_run_gemm(RunCtx *c, const RnnGemm *g);

#endif
