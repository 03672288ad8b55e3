/* verify.h — comparing a quantized model against its float reference.
 *
 * verify_models() plans both models once and streams the samples through
 * them one at a time (nothing is kept across samples): every output of the
 * quantized model is compared with the reference's output of the same name,
 * accumulating over all samples the sums behind
 *
 *   SQNR   = 10 log10(sum x^2 / sum (x - y)^2)   (= 20 log10(|x| / |x - y|))
 *   cosine = sum xy / sqrt(sum x^2 sum y^2)
 *   max and mean absolute error
 *
 * where x is the reference and y the quantized value. With labels, output 0
 * is read as class scores (last axis) and top-1 accuracy of both models, the
 * drop in points and per-class accuracy are counted.
 *
 * Per layer: taps on both interpreters compare every float tensor the two
 * models share: a reference tensor T matches the output of the
 * DequantizeLinear that reads T's QuantizeLinear in the quantized model
 * (what T's consumers see after a QDQ pair; found by structure, whatever
 * the names: T_DequantizeLinear_Output, or T_dq with quantize.names =
 * compact) or else its own T. "local" SQNR compares T with that output
 * inside the quantized model (the error of that one quantization step).
 * Weights: every DequantizeLinear of an initializer whose output or input
 * names a reference initializer W (W itself, W_DequantizeLinear_Output,
 * W_quantized..., W_q, W_dq) is compared with it once.
 *
 * Library code: knows no rule files; returns 0 or -1 after error(). */
#ifndef QM_VERIFY_VERIFY_H
#define QM_VERIFY_VERIFY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "onnx/model.h"
#include "util.h"

typedef struct VerifyOpts {
	const char *const *specs;  /* samples (see samples_open) */
	size_t nspecs;
	int random;                /* instead of specs: seeded random inputs */
	size_t nrandom;            /* number of random samples */
	uint64_t seed;
	const char *labels_name;   /* tensor in every sample holding its labels */
	const char *labels_file;   /* or one file with the labels of all samples */
	int threads;
} VerifyOpts;

/* sums over every element compared */
typedef struct ErrStats {
	char *name;                /* reference tensor / output name */
	char *qname;               /* matching quantized-model tensor (layers) */
	uint64_t n;                /* elements compared */
	uint64_t nonfinite;        /* pairs with a NaN or infinity (left out) */
	double sx2, sy2, sxy, sd2, sum_abs, max_abs;
	/* layers: the quantized model's own T against T_DequantizeLinear_Output */
	uint64_t local_n;
	double local_sx2, local_sd2;
	/* activations (blame.c): the reference nodes that compute this tensor
	 * from the nearest compared tensors, '\n'-separated; those the quantized
	 * model runs on dequantized inputs (candidates for
	 * quantize.exclude-nodes); and the noise-to-signal power ratio of the
	 * worst compared input (0: inputs exact or only weights) */
	char *nodes, *qnodes;
	double in_nsr;
} ErrStats;

typedef struct VerifyReport {
	uint64_t nsamples;
	int random;
	uint64_t seed;
	uint64_t nrows_run;        /* rows compared: a stacked sample's rows, 1
				      for any other sample */
	char *random_ones;         /* random: the symbolic dimensions past the
				      first that random inputs set to 1
				      ("dimensions 2, 3 of input 'x'"), or NULL */
	ErrStats *outs;            /* one per output, in graph order */
	size_t nouts;
	/* labels (output 0) */
	int labeled;
	uint64_t nrows, ref_correct, q_correct;
	int64_t nclasses;
	uint64_t *class_n, *class_ref, *class_q;
	/* per layer: activations and weights with n > 0 */
	ErrStats *acts, *weights;
	size_t nacts, nweights;
} VerifyReport;

/* Compare q against ref on o's samples into *rep (zeroed first; freed on
 * error). Errors name the sample and what was expected: a sample that does
 * not feed the models' inputs, labels of the wrong type or length, outputs
 * whose names or shapes differ, an empty data set. */
int verify_models(Model *ref, Model *q, const VerifyOpts *o, VerifyReport *rep);
/* free everything rep holds and zero it */
/* Attribute the error of every compared activation to the reference nodes
 * between it and the compared tensors feeding it (fills nodes, qnodes and
 * in_nsr). The noise a segment adds is nsr(out) - nsr(worst input), with
 * nsr = 10^(-SQNR/10): noise powers of independent sources add; verify.json
 * gives it as step_sqnr_db, the SQNR that step's noise alone would give. */
void verify_blame(VerifyReport *rep, const Model *ref, const Model *q);

/* g with the nodes and initializers of its If branches (recursively) laid
 * out flat, each If node reading its branches' outputs (flat.c); free with
 * verify_flat_free */
const Onnx__GraphProto *verify_flat_graph(const Onnx__GraphProto *g);
void verify_flat_free(const Onnx__GraphProto *view);
/* the noise-to-signal power ratio a segment adds (see verify_blame) */
double err_added_nsr(const ErrStats *e);
void verify_report_free(VerifyReport *rep);

/* figures of one ErrStats: SQNR in dB (+inf when equal), cosine, mean abs */
double err_sqnr(const ErrStats *e);
double err_local_sqnr(const ErrStats *e);
double err_cosine(const ErrStats *e);
double err_mean_abs(const ErrStats *e);
/* accumulate the elementwise comparison of x (reference) and y */
void err_add(ErrStats *e, const double *x, const double *y, size_t n);

typedef struct VerifyGates {
	/* NaN: not set, or off */
	double max_top1_drop, min_sqnr, min_cosine, max_abs;
	int defaults;              /* these are the default gates (none was set) */
} VerifyGates;

/* One round of auto-exclusion: the figures of the model quantized with the
 * nodes excluded so far (round 0: none); worst over the outputs */
typedef struct VerifyRound {
	char *tensor;              /* the activation whose step this round removes, or NULL */
	char *added;               /* the nodes left in float this round, ' '-separated, or NULL */
	double min_sqnr, min_cosine, max_abs;
	double top1_drop;          /* NaN without labels */
	int nfailed;               /* gates failed */
	int reverted;              /* no better than before: the nodes stay quantized */
	size_t from;               /* the round whose model it changed (the last kept) */
} VerifyRound;

typedef struct VerifyAuto {
	int max_nodes;             /* verify.auto-exclude */
	VerifyRound *rounds;
	size_t nrounds;
	PtrVec excluded;           /* every node left in float (the user's first), malloc'd */
	size_t nuser;              /* how many of them the user's quantize.exclude-nodes named */
	struct VerifySame {        /* candidates not measured: leaving nodes (' '-separated) */
		char *tensor, *nodes;  /* in float as well quantized the model as round */
		size_t round;          /* (the last kept one) did; malloc'd */
	} *same;
	size_t nsame;
} VerifyAuto;

/* One way auto-exclusion can take the noise of activation T's step out
 * (exclude.c): opts[0] the quantized nodes of T's segment, and when T
 * itself is quantized, opts[1] those with T's quantized consumers
 * (followed through nodes that only move values), whose exclusion leaves T
 * unquantized; when T's own quantization is at least half its step's
 * noise, or T's step has no quantized node, that larger set is the only
 * option. Names malloc'd. */
typedef struct VerifyCand {
	char *tensor;
	PtrVec opts[2];
	size_t nopts;
	double step_nsr;           /* the noise T's step adds */
	double local_nsr;          /* that of T's own Q/DQ pair (-1: not measured) */
} VerifyCand;

/* the candidates of rep (measured on the quantized model q), in the order
 * auto-exclusion tries them: steps that add noise, most first, then the
 * others, lowest SQNR first; free with verify_cands_free */
void verify_exclusions(const VerifyReport *rep, const Model *q, VerifyCand **out, size_t *count);
void verify_cands_free(VerifyCand *v, size_t n);
/* A canonical text of what quantized model q computes, Q/DQ pairs moved
 * past the nodes that only move values and repeated quantizations with the
 * same parameters dropped: two models with the same text compute the same
 * values (exclude.c). Malloc'd; NULL when the graph is too deep to tell. */
char *verify_qsig(const Model *q);

/* Every gate that fails is one line "verify: MODEL: GATE: measured X,
 * threshold Y" on err (NULL: count only); returns the number of failed
 * gates, or -1 after error() when a gate cannot be measured (top-1 without
 * labels). */
int verify_gates(const VerifyReport *rep, const VerifyGates *g, const char *model, FILE *err);
/* one line on log saying which gates apply (and whether they are the defaults) */
void verify_gates_line(const VerifyGates *g, FILE *log);
/* append a round with rep's figures (tensor: the activation, nodes: those
 * left in float for it; both NULL for the plain quantization) */
void verify_round_add(VerifyAuto *ax, const VerifyReport *rep, const VerifyGates *g, const char *tensor,
		      const PtrVec *nodes);
/* the summary line of round i */
void verify_round_line(const VerifyAuto *ax, size_t i, const char *model, FILE *log);
void verify_auto_free(VerifyAuto *ax);
/* verify.json: every figure, the gates and those that failed, layers ranked
 * worst first, and the rounds of auto-exclusion (ax may be NULL) */
void verify_json(const VerifyReport *rep, const VerifyGates *g, const VerifyAuto *ax, const char *model,
		 const char *inputs, StrBuf *sb);
/* one screen of figures for the build log */
void verify_summary(const VerifyReport *rep, const char *model, FILE *log);

#endif
