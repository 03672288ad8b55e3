/* interp.c — planning and running ONNX graphs (see interp.h).
 *
 * A Plan describes one graph (the main graph or a subgraph): every name it
 * sees gets a slot; a slot is a graph input, an initializer, a node output or
 * an outer-scope value (a slot of the enclosing plan). Steps are the nodes in
 * topological order; each lists the node-output slots that die after it.
 *
 * A Frame is one execution of a plan: ref[s] points at the tensor of slot s
 * (frame storage for node outputs, the plan's loaded initializers, the
 * caller's inputs, or the enclosing frame's ref for outer values).
 *
 * Node outputs and kernel scratch (op_scratch) take their buffers from a
 * pool of malloc'd blocks: a dead tensor's block goes back to the pool and
 * the next op_output() of a fitting size reuses it. Once runs repeat the
 * same shapes, they come from one arena instead, at offsets planned from a
 * recorded run (see Pattern). Kernels give outputs back only through the
 * interpreter (op_output() again, or their release): an arena block
 * cannot be free()d, so outputs leaving the interpreter are moved only
 * when they are ordinary blocks, copied otherwise (take_outputs).
 *
 * Each step keeps an OpCache for its kernel (packed constant weights, say)
 * until the plan is freed, and tells the kernel which inputs are constants
 * of the plan. A Conv feeding only a BatchNormalization of constant
 * statistics gets the normalization folded into its weights at plan time
 * (see Fold), and a Relu or Clip reading only a Conv's result (or its
 * folded normalization's) is applied by the Conv as it stores its results
 * (see Clamp); torch's decomposition of Gelu runs as one pass (see Gelu).
 * All three run only while no tap watches, so taps still see every tensor
 * of the model.
 *
 * Reshape, Squeeze, Unsqueeze, Flatten and Identity only relabel their
 * input's bytes: when input 0 is a node output that dies at that step, the
 * step takes over its block (see Step.steal; up to STEAL_MAX bytes) and the
 * kernel copies nothing.
 * The input keeps pointing at the same bytes until it is released, so taps
 * and the kernel still read it; only ownership moves.
 *
 * Constant folding gives those operators' results, and Slice's or
 * Expand's when they are a contiguous range of the input's bytes, as views
 * of their constant input (op_output_view): nothing is copied (see Alias).
 * A subgraph is folded and fused when it first runs (see plan_finish).
 *
 * Release (InterpOpts.release_consts): each constant of a plan counts the
 * reads of the steps that run (after folds and fused activations, as no
 * tap may watch). A constant nobody reads is freed once planned; a step
 * whose kernel reports an input packed for good (OpCache.packed) takes its
 * read off, and the last one frees the constant's bytes: a folded
 * normalization's weights, a loaded copy, or the model's own raw_data and
 * typed fields (not while model-local functions are expanded: the
 * expanded graph shares those arrays with the model). Graph outputs and
 * values that subgraphs read when they run are kept (not those they read
 * only through steps folded at plan time: see sub_reads). External data
 * is copied at load and its mapped pages given back at once, flag or not. */
#include "exec/interp.h"

#include <float.h>
#include <limits.h>
#include <stdint.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <cblas.h>

#include "exec/dataio.h"
#include "exec/inline.h"
#include "onnx/extdata.h"
#include "onnx/node.h"
#include "ops/gelu.h"
#include "strmap.h"
#include "util.h"

enum { V_INPUT, V_INIT, V_NODE, V_OUTER };

typedef struct Value {
	const char *name;
	int kind;         /* V_* */
	int producer;     /* V_NODE: node index in the graph */
	int outer;        /* V_OUTER: slot in the parent plan */
	int init;         /* initializer index, or -1 (an input may have one) */
	int output;       /* is a graph output: never released */
} Value;

typedef struct Plan Plan;

typedef struct Step {
	const Onnx__NodeProto *node;
	const OpDef *def;
	int64_t opset;
	int *in, *out;            /* slots, -1 when absent */
	int *implicit;            /* slots read by the node's subgraphs */
	size_t nimplicit;
	int *release;             /* node-output slots dead after this step */
	size_t nrelease;
	int folded;               /* computed once at plan time (constant inputs) */
	OpCache cache;            /* the kernel's memory between runs */
	struct Fold *fold;        /* Conv: a BatchNormalization folded in, or NULL */
	struct Clamp *clamp;      /* Conv: a Relu or Clip fused in, or NULL */
	struct Sum *sum;          /* Conv: an Add fused in, or NULL */
	struct Gelu *gelu;        /* Div or Mul: the Gelu decomposition it starts, or NULL */
	int absorbed;             /* computed by another step (Fold, Clamp, Gelu, Sum) */
	int steal;                /* output 0 may take input 0's block (see interp.c's header) */
	uint64_t counted;         /* bits of cache.packed already counted (see Release) */
} Step;

/* A Conv whose output only feeds a BatchNormalization of constant
 * statistics runs, when no tap watches, with the normalization folded into
 * its weights and bias and writes the normalization's output directly: one
 * pass over the activations instead of two (as onnxruntime does). */
typedef struct Fold {
	Tensor w, b;              /* folded weights and bias (float) */
	int out;                  /* the BatchNormalization's output slot */
} Fold;

/* A Relu or Clip (constant bounds) whose input is only read by it and is a
 * Conv's output (or the output of the normalization folded into it): when
 * no tap watches, the Conv clamps its results as it stores them (RunCtx.clamp)
 * and writes the activation's output directly. */
typedef struct Clamp {
	float v[2];               /* lo, hi */
	int out;                  /* the activation's output slot */
} Clamp;

/* An Add (opset 7 or later) that alone reads a Conv's output (or the
 * output of the normalization folded into it), whose other input exists
 * when the Conv runs (a residual connection): when no tap watches, the
 * Conv adds it as it stores its results (RunCtx.sum) and writes the Add's
 * output, or that of a Relu or Clip after it (Clamp): one pass over the
 * activations instead of three, as onnxruntime's fused Conv does. The
 * same float additions: the unfused result's bits. */
typedef struct Sum {
	int in;                   /* the Add's other input slot */
	int out;                  /* the Add's output slot */
} Sum;

/* torch's Gelu, x * 0.5 * (1 + erf(x / sqrt 2)): Div (or Mul) by a
 * constant, Erf, Add of a constant, and two Muls (by x and by a constant,
 * either first), whose intermediate values nothing else reads. When no tap
 * watches, the first step computes the last one's output in one pass
 * (gelu_erf_run) from x, which is alive there since that step reads it; the
 * others are absorbed. The same float operations in the same order: the
 * unfused result's bits. */
typedef struct Gelu {
	GeluErf g;
	size_t xin;               /* the first step's input that is x */
	int rank;                 /* highest rank of the constants */
	int out;                  /* the last Mul's output slot */
} Gelu;

/* Views: a constant folded at plan time that reads the bytes of another
 * in place (the output of Unsqueeze, Reshape, Slice... of a constant, see
 * op_output_view) instead of a copy of them. silero-vad's If bodies
 * slice, concatenate and unsqueeze 2 MiB of LSTM weights, and the page
 * faults of those fresh copies, per interpreter, were most of planning it.
 * A view holds no bytes: it names the constant that holds them (never a
 * view itself: a view of a view names the first one's owner), which counts
 * its views. An owner released (release_const) while views remain keeps
 * its bytes until the last of them is released too. */
typedef struct Alias {
	struct Plan *of;          /* a view: the plan of the owner, else NULL */
	int slot;                 /* a view: the owner's slot */
	int views;                /* an owner: views not released */
	int held;                 /* an owner: released, its bytes kept for its views */
} Alias;

struct Plan {
	const Onnx__GraphProto *g;
	Plan *parent;
	Value *vals;
	size_t nvals, capvals;
	StrMap map;               /* value name -> slot */
	Step *steps;              /* in topological order */
	size_t nsteps;
	int *inputs, *outputs;    /* slots of the graph's inputs / outputs */
	size_t ninputs, noutputs;
	Tensor *consts;           /* per slot: loaded initializer (or empty) */
	Alias *alias;             /* per slot: views and their owners */
	int *readers;             /* release_consts: per slot, reads left (see Release) */
	int finished;             /* constants folded, steps fused (see plan_finish) */
};

typedef struct Frame {
	Plan *plan;
	Tensor *t;                /* storage of node outputs */
	const Tensor **ref;
	struct Frame *parent;
} Frame;

typedef struct Block {
	void *p;
	size_t cap;
} Block;

/* One block a run takes (see Pattern): its size, the events at which it
 * was taken and given back, its offset in the arena. */
typedef struct PatBlock {
	size_t size;
	size_t start, end;
	size_t off;               /* PAT_ESCAPES: never given back (an output) */
} PatBlock;

#define PAT_ESCAPES SIZE_MAX

enum { PAT_RECORD, PAT_REPLAY, PAT_OFF };

typedef struct Pattern {
	int state;                /* PAT_* for the next run */
	int replaying;            /* this run: blocks come from the arena */
	int recording;            /* this run: blocks are recorded */
	int misses;               /* runs that did not follow the pattern */
	PatBlock *b;              /* the recorded run's blocks, in order taken */
	size_t nb, capb;
	size_t *ev;               /* events: PAT_TAKE (the next block) or a block given back */
	size_t nev, capev;
	Block *live;              /* recording: blocks out now (p, id in cap) */
	size_t nlive, caplive;
	size_t cur, next;         /* replaying: next event, next block */
	unsigned char *arena, *raw;
	size_t arena_bytes;
} Pattern;

#define PAT_TAKE SIZE_MAX

/* What a step's kernel asked op_scratch() for (thread-local while it runs). */
typedef struct Scratch {
	Interp *ip;
	void *p[OP_SCRATCH_SLOTS];
	size_t n[OP_SCRATCH_SLOTS];
	struct Scratch *prev;
} Scratch;

struct Interp {
	Model *m;
	Inlined *inl;             /* the graph with model-local functions expanded */
	InterpOpts o;
	Plan *main;
	PtrVec plans;             /* every plan, for run_subgraph lookups */
	Frame mainf;
	Frame *cur;               /* frame whose node is running */
	Block *pool;
	size_t npool, cappool;
	size_t pool_bytes;        /* capacity of the blocks in the pool */
	Pattern pat;              /* the blocks runs take, served from one arena */
	Block *shared;            /* bytes of equal folded constants (p) and their holders (cap) */
	size_t nshared, capshared;
	int *real_inputs;         /* indexes into main->inputs without initializer */
	size_t nreal;
	size_t weights;           /* bytes of constants held (not the kernels' caches) */
	size_t live, peak;        /* bytes of live node outputs: now, highest */
	Tensor *steal;            /* while a steal step runs: its input 0 */
	StrMap folds;             /* planning: steps folded so far, by what they compute (fold_key) */
	PtrVec foldrecs;          /* their FoldRecs */
	int trim;                 /* constants were freed: give the heap's free pages back */
};

/* ---- names ---- */

static int map_get(const StrMap *m, const char *k)
{
	const StrMapEnt *e = strmap_find(m, k);
	return e ? (int)e->v.i : -1;
}

/* k (borrowed, as every name the plan keeps) -> v */
static void map_put(StrMap *m, const char *k, int v)
{
	StrMapEnt *e = strmap_add(m, k, NULL);
	e->key = k;
	e->v.i = v;
}

/* Blocks up to this size move from a relabelling step's input to its
 * output; larger ones are copied: handing over magika's 16 MiB activations
 * at batch 32 kept 97 MB more resident (glibc returned other blocks
 * later), while their copies cost under 1% of its time. */
#define STEAL_MAX ((size_t)1 << 20)

/* ---- buffer pool ---- */

/* Large blocks are mapped afresh by malloc and faulted in page by page on
 * first use; blocks the pool drops (sizes vary more than its bound allows
 * to keep) come back on the next run, and 4 KiB faults were 8-14% of
 * magika's time at batch 32. Transparent huge pages (where the system
 * gives them on request) fault the aligned middle of such a block in 2 MiB
 * at a time. The block stays an ordinary malloc'd one for free().
 * interp_new() fixes glibc's mmap threshold at HUGE_BLOCK (and the heap
 * top it keeps at twice that, as glibc's own adjustment would): its default
 * rises after the first large free, after which such blocks came from the
 * heap, where a dropped block below a live one stays resident (4 MB more
 * RSS for the CNN at batch 32). */
#define HUGE_BLOCK ((size_t)4 << 20)

static void *block_new(size_t need)
{
	void *p = xmalloc(need);
#ifdef MADV_HUGEPAGE
	if (need >= HUGE_BLOCK) {
		uintptr_t a = ((uintptr_t)p + (2u << 20) - 1) & ~(uintptr_t)((2u << 20) - 1);
		uintptr_t e = ((uintptr_t)p + need) & ~(uintptr_t)((2u << 20) - 1);
		if (e > a)
			(void)madvise((void *)a, e - a, MADV_HUGEPAGE); /* a hint: failure changes nothing */
	}
#endif
	return p;
}

static void *pool_get(Interp *ip, size_t need)
{
	size_t best = SIZE_MAX;
	if (need == 0)
		need = 1;
	for (size_t i = 0; i < ip->npool; i++) {
		size_t c = ip->pool[i].cap;
		/* best fit, but never park a small tensor in a much larger block;
		 * from 1 MiB, blocks serve tensors down to half their size (the
		 * CNN's 2 MB activations reuse its 4 MB blocks at batch 32 rather
		 * than hold blocks of their own: no block is dropped and faulted
		 * in again per run, and 6 MB less RSS) */
		if (c >= need && c <= (need >= (1u << 20) ? 2 * need : need + need / 2) + 4096 &&
		    (best == SIZE_MAX || c < ip->pool[best].cap))
			best = i;
	}
	if (best == SIZE_MAX)
		return block_new(need);
	void *p = ip->pool[best].p;
	ip->pool_bytes -= ip->pool[best].cap;
	ip->pool[best] = ip->pool[--ip->npool];
	return p;
}

/* free pool block i */
static void pool_drop(Interp *ip, size_t i)
{
	free(ip->pool[i].p);
	ip->pool_bytes -= ip->pool[i].cap;
	ip->pool[i] = ip->pool[--ip->npool];
}

static void pool_put(Interp *ip, void *p)
{
	if (!p)
		return;
	if (ip->npool == 256) { /* bound the pool: drop the smallest block */
		size_t s = 0;
		for (size_t i = 1; i < ip->npool; i++)
			if (ip->pool[i].cap < ip->pool[s].cap)
				s = i;
		pool_drop(ip, s);
	}
	if (ip->npool == ip->cappool) {
		ip->cappool = ip->cappool ? 2 * ip->cappool : 32;
		ip->pool = xreallocarray(ip->pool, ip->cappool, sizeof *ip->pool);
	}
	ip->pool[ip->npool].p = p;
	ip->pool[ip->npool].cap = malloc_usable_size(p);
	ip->pool_bytes += ip->pool[ip->npool].cap;
	ip->npool++;
	/* Live tensors plus free blocks stay within (3 * peak + live) / 2, at
	 * most twice the largest live set seen (the pool at least 1 MiB):
	 * drop the largest blocks first. Free blocks held to the peak alone
	 * kept the CNN's smaller blocks and dropped and faulted in afresh
	 * 20 MB of its largest per run at batch 32; up to twice the peak less
	 * what is live kept magika's too, which made it exceed the memory
	 * goal (bench/interp.sh) once the kernels' own buffers are added. */
	size_t limit = 3 * ip->peak > ip->live + (2u << 20) ? (3 * ip->peak - ip->live) / 2 : (1u << 20);
	while (ip->pool_bytes > limit && ip->npool) {
		size_t b = 0;
		for (size_t i = 1; i < ip->npool; i++)
			if (ip->pool[i].cap > ip->pool[b].cap)
				b = i;
		pool_drop(ip, b);
	}
}

/* ---- memory pattern ----
 *
 * Runs of the same shapes take and give back blocks of the same sizes in
 * the same order. The first run records that order (its blocks come from
 * the pool); its blocks are then placed in one arena, blocks never out at
 * the same time sharing bytes (the largest first, each at the lowest
 * offset that no block out during its lifetime covers), and the next runs
 * take them from there as long as they follow the record: live tensors
 * and free bytes together take about the peak live set, where the pool's
 * blocks of sizes the next tensors could not use let them reach twice
 * that, and nothing is dropped and faulted in again between runs (as
 * onnxruntime's memory patterns). A run that departs from the record
 * (other shapes, an If taking a branch of other sizes) finishes on the
 * pool; the arena is freed at its end and the next run records anew, up
 * to PAT_MISSES times, after which the pool alone serves. Blocks still out
 * when the recorded run ended leave by free() (outputs moved to the
 * caller, a body's results that If and Loop copy and free): replays
 * malloc those. */
#define PAT_MISSES 3
#define PAT_MAX_BLOCKS 16384      /* more: recording and placing them (quadratic) cost too much */

static size_t pat_round(size_t n)
{
	return n ? (n + 63) & ~(size_t)63 : 64;
}

static void pat_event(Pattern *pt, size_t e)
{
	if (pt->nev == pt->capev) {
		pt->capev = pt->capev ? 2 * pt->capev : 256;
		pt->ev = xreallocarray(pt->ev, pt->capev, sizeof *pt->ev);
	}
	pt->ev[pt->nev++] = e;
}

static int pat_in_arena(const Pattern *pt, const void *p)
{
	return pt->arena && (const unsigned char *)p >= pt->arena &&
	       (const unsigned char *)p < pt->arena + pt->arena_bytes;
}

static void pat_record_take(Pattern *pt, void *p, size_t need)
{
	if (pt->nb == pt->capb) {
		pt->capb = pt->capb ? 2 * pt->capb : 64;
		pt->b = xreallocarray(pt->b, pt->capb, sizeof *pt->b);
	}
	if (pt->nlive == pt->caplive) {
		pt->caplive = pt->caplive ? 2 * pt->caplive : 32;
		pt->live = xreallocarray(pt->live, pt->caplive, sizeof *pt->live);
	}
	pt->b[pt->nb] = (PatBlock){.size = need, .start = pt->nev};
	pt->live[pt->nlive++] = (Block){p, pt->nb++};
	pat_event(pt, PAT_TAKE);
}

/* p given back while recording: the latest block out at p (an earlier
 * one there left by free() and malloc gave its bytes again) */
static void pat_record_give(Pattern *pt, void *p)
{
	for (size_t i = pt->nlive; i-- > 0;)
		if (pt->live[i].p == p) {
			pt->b[pt->live[i].cap].end = pt->nev;
			pat_event(pt, pt->live[i].cap);
			memmove(&pt->live[i], &pt->live[i + 1], (pt->nlive - i - 1) * sizeof *pt->live);
			pt->nlive--;
			return;
		}
}

/* no pattern from now on: the pool alone serves */
static void pat_off(Interp *ip)
{
	Pattern *pt = &ip->pat;
	/* no trim: the freed record is reused by malloc, and a trim splits the heap's huge pages (see src/heap.c) */
	pt->state = PAT_OFF;
	pt->recording = pt->replaying = 0;
	free(pt->b);
	free(pt->ev);
	free(pt->live);
	pt->b = NULL;
	pt->ev = NULL;
	pt->live = NULL;
	pt->nb = pt->capb = pt->nev = pt->capev = pt->nlive = pt->caplive = 0;
}

static void *buf_get(Interp *ip, size_t need)
{
	Pattern *pt = &ip->pat;
	if (pt->replaying) {
		if (pt->cur < pt->nev && pt->ev[pt->cur] == PAT_TAKE && pt->b[pt->next].size == need) {
			const PatBlock *b = &pt->b[pt->next++];
			pt->cur++;
			return b->off == PAT_ESCAPES ? block_new(need ? need : 1) : pt->arena + b->off;
		}
		pt->replaying = 0; /* departs from the record */
	}
	void *p = pool_get(ip, need);
	if (pt->recording && pt->nb == PAT_MAX_BLOCKS)
		pat_off(ip); /* too many blocks */
	if (pt->recording)
		pat_record_take(pt, p, need);
	return p;
}

static void buf_put(Interp *ip, void *p)
{
	Pattern *pt = &ip->pat;
	if (!p)
		return;
	if (pat_in_arena(pt, p)) { /* the arena's bytes never go to the pool */
		if (pt->replaying && pt->cur < pt->nev && pt->ev[pt->cur] != PAT_TAKE &&
		    pt->arena + pt->b[pt->ev[pt->cur]].off == p)
			pt->cur++;
		else
			pt->replaying = 0;
		return;
	}
	pt->replaying = 0; /* a block the record never gave back */
	if (pt->recording)
		pat_record_give(pt, p);
	pool_put(ip, p);
}

static int cmp_block(const void *x, const void *y)
{
	const PatBlock *a = *(const PatBlock *const *)x, *b = *(const PatBlock *const *)y;
	if (a->size != b->size)
		return a->size > b->size ? -1 : 1;
	return a->start < b->start ? -1 : a->start > b->start;
}

static int cmp_off(const void *x, const void *y)
{
	const PatBlock *a = *(const PatBlock *const *)x, *b = *(const PatBlock *const *)y;
	return a->off < b->off ? -1 : a->off > b->off;
}

/* place the recorded blocks (see above); the arena's size */
static size_t pat_place(Pattern *pt)
{
	PatBlock **order = xcalloc(pt->nb ? pt->nb : 1, sizeof *order);
	PatBlock **near = xcalloc(pt->nb ? pt->nb : 1, sizeof *near);
	size_t n = 0, top = 0;
	for (size_t i = 0; i < pt->nb; i++)
		if (pt->b[i].off != PAT_ESCAPES)
			order[n++] = &pt->b[i];
	qsort(order, n, sizeof *order, cmp_block);
	for (size_t i = 0; i < n; i++) {
		PatBlock *x = order[i];
		size_t nn = 0, off = 0, size = pat_round(x->size);
		for (size_t j = 0; j < i; j++) /* placed blocks out at the same time */
			if (order[j]->start < x->end && x->start < order[j]->end)
				near[nn++] = order[j];
		qsort(near, nn, sizeof *near, cmp_off);
		for (size_t j = 0; j < nn && near[j]->off < off + size; j++) {
			size_t e = near[j]->off + pat_round(near[j]->size);
			if (e > off)
				off = e;
		}
		x->off = off;
		if (off + size > top)
			top = off + size;
	}
	free(near);
	free(order);
	return top;
}

static void pat_begin(Interp *ip)
{
	Pattern *pt = &ip->pat;
	pt->recording = pt->state == PAT_RECORD;
	pt->replaying = pt->state == PAT_REPLAY;
	if (pt->recording)
		pt->nb = pt->nev = pt->nlive = 0;
	pt->cur = pt->next = 0;
}

static void pat_free_arena(Pattern *pt)
{
	free(pt->raw);
	pt->raw = pt->arena = NULL;
	pt->arena_bytes = 0;
}

/* after a run (ok: it succeeded), when every block it took from the arena
 * is back */
static void pat_end(Interp *ip, int ok)
{
	Pattern *pt = &ip->pat;
	if (pt->recording) {
		pt->recording = 0;
		if (!ok)
			return; /* record the next one */
		for (size_t i = 0; i < pt->nlive; i++) {
			pt->b[pt->live[i].cap].off = PAT_ESCAPES;
			pt->b[pt->live[i].cap].end = pt->nev;
		}
		free(pt->live); /* replays need only the blocks and events */
		pt->live = NULL;
		pt->nlive = pt->caplive = 0;
		if (!pt->nb) {
			pat_off(ip);
			return;
		}
		size_t bytes = pat_place(pt);
		pt->b = xreallocarray(pt->b, pt->nb, sizeof *pt->b); /* kept while replays follow it */
		pt->ev = xreallocarray(pt->ev, pt->nev, sizeof *pt->ev);
		pt->capb = pt->nb;
		pt->capev = pt->nev;
		while (ip->npool) /* the arena takes the pool's place */
			pool_drop(ip, ip->npool - 1);
		/* no trim: the arena below reuses those blocks' pages */
		if (bytes) {
			pt->raw = block_new(bytes + 64);
			pt->arena = (unsigned char *)(((uintptr_t)pt->raw + 63) & ~(uintptr_t)63);
			pt->arena_bytes = bytes;
		}
		pt->state = PAT_REPLAY;
		return;
	}
	if (pt->state != PAT_REPLAY)
		return;
	if (pt->replaying && pt->cur == pt->nev) {
		pt->replaying = 0;
		return;
	}
	pt->replaying = 0;
	pat_free_arena(pt);
	pt->state = PAT_RECORD;
	if (++pt->misses >= PAT_MISSES)
		pat_off(ip);
}

/* ---- kernel scratch (op_scratch) ---- */

static _Thread_local Scratch *tl_scratch;

void *op_scratch(int slot, size_t bytes)
{
	Scratch *sc = tl_scratch;
	if (!sc || slot < 0 || slot >= OP_SCRATCH_SLOTS)
		return NULL;
	if (sc->p[slot] && sc->n[slot] >= bytes)
		return sc->p[slot];
	Interp *ip = sc->ip;
	if (sc->p[slot]) {
		buf_put(ip, sc->p[slot]);
		ip->live -= ip->live >= sc->n[slot] ? sc->n[slot] : ip->live;
	}
	sc->p[slot] = buf_get(ip, bytes);
	sc->n[slot] = bytes;
	ip->live += bytes;
	if (ip->live > ip->peak)
		ip->peak = ip->live;
	return sc->p[slot];
}

/* give back what the step's kernel took with op_scratch */
static void scratch_end(Interp *ip, Scratch *sc)
{
	for (int i = 0; i < OP_SCRATCH_SLOTS; i++)
		if (sc->p[i]) {
			buf_put(ip, sc->p[i]);
			ip->live -= ip->live >= sc->n[i] ? sc->n[i] : ip->live;
		}
}

/* The constant folding running on this thread (see Alias): the step's
 * inputs and outputs, and per output the input it is a view of, or -1. */
typedef struct FoldCtx {
	const Tensor *const *in;
	size_t nin;
	Tensor *const *out;
	size_t nout;
	int *src;
} FoldCtx;

static _Thread_local FoldCtx *tl_fold;

/* a folded step's output t: malloc'd, not zeroed (kernels write every
 * element; zeroing fresh pages first was a third of folding silero-vad's
 * Concats) */
static int fold_output(Tensor *t, int dtype, int rank, const int64_t *dims)
{
	if (tensor_borrow(t, dtype, rank, dims, NULL) < 0)
		return -1;
	t->data = xmalloc(t->nbytes ? t->nbytes : 1);
	t->owned = 1;
#ifdef __SANITIZE_ADDRESS__
	memset(t->data, 0xff, t->nbytes ? t->nbytes : 1); /* as op_output's */
#endif
	return 0;
}

/* give a node-output tensor's storage back to the pool */
static void release_tensor(Interp *ip, Tensor *t)
{
	if (t->owned && t->data) {
		buf_put(ip, t->data);
		t->owned = 0;
		t->data = NULL;
	}
	tensor_free(t);
}

int op_output(RunCtx *c, size_t i, int dtype, int rank, const int64_t *dims)
{
	if (i >= c->nout)
		return op_error(c->node, "output %zu requested but the node has %zu outputs", i, c->nout);
	Tensor *t = c->out[i];
	if (!c->interp && c->out_limit) {
		int64_t n = 1;
		for (int d = 0; d < rank && n > 0; d++)
			n = dims[d] > 0 && n > INT64_MAX / dims[d] ? -1 : n * dims[d];
		if (n < 0 || (dtype != DT_STRING && dtype_nbytes(dtype, n) > c->out_limit) ||
		    (dtype == DT_STRING && (uint64_t)n > c->out_limit / sizeof(char *)))
			return op_error(c->node, "output %zu is over the constant folding limit of %zu bytes", i,
					c->out_limit);
	}
	if (!c->interp && (!tl_fold || dtype == DT_STRING))
		return tensor_alloc(t, dtype, rank, dims);
	if (!c->interp) /* folding: uncleared, as the kernel writes it all (see below) */
		return fold_output(t, dtype, rank, dims);
	if (t->owned && t->data)
		release_tensor(c->interp, t);
	Tensor s = {0};
	if (tensor_borrow(&s, dtype, rank, dims, NULL) < 0) {
		char lb[256];
		return error_prefix("node '%s' (%s): output %zu", node_label(c->node, lb, sizeof lb),
				    c->node->op_type ? c->node->op_type : "?", i);
	}
	char *name = t->name;
	*t = s;
	t->name = name;
	Tensor *in = c->interp->steal;
	if (i == 0 && in && in->owned && in->data && in->nbytes == t->nbytes && in->nbytes <= STEAL_MAX) {
		/* the dying input's block becomes the output's; the input keeps
		 * reading the same bytes until it is released */
		Interp *ip = c->interp;
		t->data = in->data;
		t->owned = 1;
		in->owned = 0; /* its bytes are counted as the output's from now on */
		ip->live -= ip->live >= in->nbytes ? in->nbytes : ip->live;
		ip->steal = NULL;
		return 0;
	}
	t->data = buf_get(c->interp, t->nbytes);
#ifdef __SANITIZE_ADDRESS__
	/* sanitizer builds fill outputs with 0xff (NaN, -1) so the conformance
	 * suite catches a kernel that leaves elements unwritten */
	memset(t->data, 0xff, t->nbytes ? t->nbytes : 1);
#endif
	t->owned = 1;
	return 0;
}

int op_output_view(RunCtx *c, size_t i, const Tensor *src, size_t off, int dtype, int rank,
		   const int64_t *dims)
{
	const FoldCtx *fc = tl_fold;
	size_t j = 0, k = 0;
	Tensor v = {0};
	if (!fc || c->interp || i >= c->nout || !src || src->kind != TK_TENSOR || src->dtype == DT_STRING ||
	    !src->data || dtype == DT_STRING)
		return op_output(c, i, dtype, rank, dims);
	while (j < fc->nin && fc->in[j] != src)
		j++;
	while (k < fc->nout && fc->out[k] != c->out[i])
		k++;
	/* a range of a folded step's own input, into its own output, aligned
	 * as borrowed initializers are */
	if (j == fc->nin || k == fc->nout || tensor_borrow(&v, dtype, rank, dims, NULL) < 0 || !v.nbytes ||
	    off > src->nbytes || v.nbytes > src->nbytes - off || ((uintptr_t)src->data + off) % 16)
		return op_output(c, i, dtype, rank, dims);
	if (tensor_borrow(c->out[i], dtype, rank, dims, (char *)src->data + off) < 0)
		return -1;
	fc->src[k] = (int)j;
	return 1;
}

/* ---- planning ---- */

static const char *vname(const Value *v)
{
	return v->name;
}

static int add_value(Plan *p, const char *name, int kind)
{
	if (p->nvals == p->capvals) {
		p->capvals = p->capvals ? 2 * p->capvals : 64;
		p->vals = xreallocarray(p->vals, p->capvals, sizeof *p->vals);
	}
	int s = (int)p->nvals++;
	p->vals[s] = (Value){.name = name, .kind = kind, .producer = -1, .outer = -1, .init = -1};
	map_put(&p->map, name, s);
	return s;
}

/* slot of name in p, adding an outer value when an enclosing plan has it;
 * -1 if no enclosing scope defines it */
static int resolve(Plan *p, const char *name)
{
	int s = map_get(&p->map, name);
	if (s >= 0 || !p->parent)
		return s;
	int o = resolve(p->parent, name);
	if (o < 0)
		return -1;
	s = add_value(p, name, V_OUTER);
	p->vals[s].outer = o;
	return s;
}

static void plan_free(Plan *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->nsteps; i++) {
		free(p->steps[i].in);
		free(p->steps[i].implicit);
		free(p->steps[i].release);
		if (p->steps[i].cache.release)
			p->steps[i].cache.release(p->steps[i].cache.p);
		if (p->steps[i].fold) {
			tensor_free(&p->steps[i].fold->w);
			tensor_free(&p->steps[i].fold->b);
			free(p->steps[i].fold);
		}
		free(p->steps[i].clamp);
		free(p->steps[i].sum);
		free(p->steps[i].gelu);
	}
	free(p->steps);
	if (p->consts)
		for (size_t i = 0; i < p->nvals; i++)
			tensor_free(&p->consts[i]);
	free(p->consts);
	free(p->alias);
	free(p->readers);
	free(p->vals);
	strmap_free(&p->map);
	free(p->inputs);
	free(p->outputs);
	free(p);
}

static const char *gname(const Onnx__GraphProto *g)
{
	return g->name && *g->name ? g->name : "(unnamed)";
}

static int plan_graph(Interp *ip, const Onnx__GraphProto *g, Plan *parent, Plan **out);

static void push_int(int **v, size_t *n, int x)
{
	for (size_t i = 0; i < *n; i++)
		if ((*v)[i] == x)
			return;
	*v = xreallocarray(*v, *n + 1, sizeof **v);
	(*v)[(*n)++] = x;
}

/* resolve the node's operator; error names it as "Op-N" */
static int find_def(Interp *ip, const Onnx__NodeProto *n, Step *st)
{
	char lb[256];
	const char *dom = n->domain ? n->domain : "";
	const char *op = n->op_type ? n->op_type : "";
	int64_t opset = inlined_opset(ip->inl, ip->m->proto, n, dom);
	if (opset <= 0)
		return error("node '%s' (%s): the model imports no opset for domain '%s'",
			     node_label(n, lb, sizeof lb), op, dom);
	const OpDef *d = ops_find(dom, op, opset);
	int dflt = !*dom || !strcmp(dom, "ai.onnx");
	if (!d || !d->run)
		return error("%s%s%s-%lld is not supported (node '%s')", dflt ? "" : dom,
			     dflt ? "" : ".", op, (long long)opset, node_label(n, lb, sizeof lb));
	st->def = d;
	st->opset = opset;
	return 0;
}

/* order the nodes: keep the graph's order when it is already topological */
static int toposort(Plan *p, size_t nn, int **deps, size_t *ndeps, int *order)
{
	const Onnx__GraphProto *g = p->g;
	int sorted = 1;
	for (size_t i = 0; i < nn && sorted; i++)
		for (size_t k = 0; k < ndeps[i]; k++)
			if (deps[i][k] >= (int)i)
				sorted = 0;
	if (sorted) {
		for (size_t i = 0; i < nn; i++)
			order[i] = (int)i;
		return 0;
	}
	/* depth-first: each node after its producers, otherwise in graph order;
	 * a producer met again while still on the stack closes a cycle */
	char *state = xcalloc(nn, 1); /* 0 new, 1 on the stack, 2 emitted */
	int *stack = xmalloc(sizeof *stack * nn);
	size_t *next = xcalloc(nn, sizeof *next);
	size_t k = 0;
	int r = 0;
	for (size_t root = 0; root < nn && r == 0; root++) {
		if (state[root])
			continue;
		size_t sp = 0;
		stack[sp++] = (int)root;
		state[root] = 1;
		while (sp && r == 0) {
			int v = stack[sp - 1];
			if (next[v] < ndeps[v]) {
				int d = deps[v][next[v]++];
				if (state[d] == 1) {
					char lb[256];
					r = error("graph '%s' has a cycle through node '%s' (%s)", gname(g),
						  node_label(g->node[d], lb, sizeof lb),
						  g->node[d]->op_type ? g->node[d]->op_type : "?");
				} else if (state[d] == 0) {
					state[d] = 1;
					stack[sp++] = d;
				}
			} else {
				state[v] = 2;
				order[k++] = v;
				sp--;
			}
		}
	}
	free(state);
	free(stack);
	free(next);
	return r;
}

/* the value kind (TK_*) a type declares: tensors, and sequences and
 * optionals of tensors (or of each other) flow through the interpreter; -1
 * with *what naming anything else */
static int type_kind(const Onnx__TypeProto *tp, const char **what)
{
	if (!tp || tp->value_case == ONNX__TYPE_PROTO__VALUE__NOT_SET)
		return TK_TENSOR;
	switch (tp->value_case) {
	case ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE:
		return TK_TENSOR;
	case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE:
		if (tp->sequence_type && type_kind(tp->sequence_type->elem_type, what) < 0)
			return -1;
		return TK_SEQUENCE;
	case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE:
		if (tp->optional_type && type_kind(tp->optional_type->elem_type, what) < 0)
			return -1;
		return TK_OPTIONAL;
	case ONNX__TYPE_PROTO__VALUE_MAP_TYPE:
		*what = "map values are";
		return -1;
	case ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE:
		*what = "sparse tensor values are";
		return -1;
	default:
		*what = "non-tensor values are";
		return -1;
	}
}

static int check_vi(const Onnx__GraphProto *g, const Onnx__ValueInfoProto *vi, const char *what)
{
	const char *k = "";
	if (type_kind(vi->type, &k) < 0)
		return error("graph '%s': %s '%s': %s not supported", gname(g), what, vi->name ? vi->name : "", k);
	return 0;
}

static int plan_graph(Interp *ip, const Onnx__GraphProto *g, Plan *parent, Plan **out)
{
	char lb[256];
	Plan *p = xcalloc(1, sizeof *p);
	p->g = g;
	p->parent = parent;
	pv_push(&ip->plans, p);
	*out = p;
	size_t nn = g->n_node;
	/* room for every name the graph defines (outer values come on top):
	 * no table grown and rehashed as they arrive */
	size_t names = g->n_initializer + g->n_input;
	for (size_t i = 0; i < nn; i++)
		names += g->node[i]->n_output;
	p->capvals = names + 8;
	p->vals = xreallocarray(NULL, p->capvals, sizeof *p->vals);
	strmap_reserve(&p->map, p->capvals);
	int **deps = xcalloc(nn ? nn : 1, sizeof *deps);
	size_t *ndeps = xcalloc(nn ? nn : 1, sizeof *ndeps);
	int *order = xcalloc(nn ? nn : 1, sizeof *order);
	Step *steps = xcalloc(nn ? nn : 1, sizeof *steps);
	int r = -1;

	if (g->n_sparse_initializer) {
		error("graph '%s': sparse initializers are not supported", gname(g));
		goto out;
	}
	for (size_t i = 0; i < g->n_input; i++)
		if (check_vi(g, g->input[i], "input") < 0)
			goto out;
	for (size_t i = 0; i < g->n_output; i++)
		if (check_vi(g, g->output[i], "output") < 0)
			goto out;
	for (size_t i = 0; i < g->n_initializer; i++) {
		const char *nm = g->initializer[i]->name ? g->initializer[i]->name : "";
		if (map_get(&p->map, nm) >= 0) {
			error("graph '%s': initializer '%s' is defined twice", gname(g), nm);
			goto out;
		}
		int s = add_value(p, nm, V_INIT);
		p->vals[s].init = (int)i;
	}
	p->inputs = xcalloc(g->n_input ? g->n_input : 1, sizeof *p->inputs);
	for (size_t i = 0; i < g->n_input; i++) {
		const char *nm = g->input[i]->name ? g->input[i]->name : "";
		int s = map_get(&p->map, nm);
		if (s >= 0 && p->vals[s].kind == V_INIT) {
			p->vals[s].kind = V_INPUT; /* an input with a default */
		} else if (s >= 0) {
			error("graph '%s': input '%s' is declared twice", gname(g), nm);
			goto out;
		} else {
			s = add_value(p, nm, V_INPUT);
		}
		p->inputs[p->ninputs++] = s;
	}
	for (size_t i = 0; i < nn; i++) {
		const Onnx__NodeProto *n = g->node[i];
		for (size_t k = 0; k < n->n_output; k++) {
			const char *nm = n->output[k];
			if (!nm || !*nm)
				continue;
			int s = map_get(&p->map, nm);
			if (s >= 0) {
				error("graph '%s': value '%s' is produced by node '%s' (%s) but already defined",
				      gname(g), nm, node_label(n, lb, sizeof lb), n->op_type ? n->op_type : "?");
				goto out;
			}
			s = add_value(p, nm, V_NODE);
			p->vals[s].producer = (int)i;
		}
	}

	for (size_t i = 0; i < nn; i++) {
		const Onnx__NodeProto *n = g->node[i];
		Step *st = &steps[i];
		st->node = n;
		if (find_def(ip, n, st) < 0)
			goto out;
		/* one block: out follows in (freed with it) */
		st->in = xcalloc(n->n_input + n->n_output ? n->n_input + n->n_output : 1, sizeof *st->in);
		st->out = st->in + n->n_input;
		for (size_t k = 0; k < n->n_input; k++) {
			const char *nm = n->input[k];
			st->in[k] = -1;
			if (!nm || !*nm)
				continue;
			int s = resolve(p, nm);
			if (s < 0) {
				error("node '%s' (%s): input '%s' is neither a graph input, an initializer nor an output of a node",
				      node_label(n, lb, sizeof lb), n->op_type ? n->op_type : "?", nm);
				goto out;
			}
			st->in[k] = s;
		}
		for (size_t k = 0; k < n->n_output; k++)
			st->out[k] = n->output[k] && *n->output[k] ? map_get(&p->map, n->output[k]) : -1;
		/* subgraphs: what they read from this scope is an implicit input */
		for (size_t a = 0; a < n->n_attribute; a++) {
			const Onnx__AttributeProto *at = n->attribute[a];
			size_t ng = 0;
			Onnx__GraphProto *const *gs = NULL;
			Onnx__GraphProto *one = at->g;
			if (at->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH && at->g) {
				gs = &one;
				ng = 1;
			} else if (at->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS) {
				gs = at->graphs;
				ng = at->n_graphs;
			}
			for (size_t j = 0; j < ng; j++) {
				Plan *sub;
				if (plan_graph(ip, gs[j], p, &sub) < 0) {
					error_prefix("node '%s' (%s), attribute '%s'", node_label(n, lb, sizeof lb),
						     n->op_type ? n->op_type : "?", at->name ? at->name : "");
					goto out;
				}
				for (size_t v = 0; v < sub->nvals; v++)
					if (sub->vals[v].kind == V_OUTER)
						push_int(&st->implicit, &st->nimplicit, sub->vals[v].outer);
			}
		}
		deps[i] = xmalloc(sizeof *deps[i] * (n->n_input + st->nimplicit ? n->n_input + st->nimplicit : 1));
		for (size_t k = 0; k < n->n_input + st->nimplicit; k++) {
			int s = k < n->n_input ? st->in[k] : st->implicit[k - n->n_input];
			size_t d = 0;
			if (s < 0 || p->vals[s].kind != V_NODE)
				continue;
			while (d < ndeps[i] && deps[i][d] != p->vals[s].producer)
				d++;
			if (d == ndeps[i]) /* push_int's, in a block sized once */
				deps[i][ndeps[i]++] = p->vals[s].producer;
		}
	}

	p->outputs = xcalloc(g->n_output ? g->n_output : 1, sizeof *p->outputs);
	for (size_t i = 0; i < g->n_output; i++) {
		const char *nm = g->output[i]->name ? g->output[i]->name : "";
		int s = resolve(p, nm);
		if (s < 0) {
			error("graph '%s': output '%s' is not produced by any node", gname(g), nm);
			goto out;
		}
		p->vals[s].output = 1;
		p->outputs[p->noutputs++] = s;
	}

	if (toposort(p, nn, deps, ndeps, order) < 0)
		goto out;
	p->steps = xcalloc(nn ? nn : 1, sizeof *p->steps);
	for (size_t i = 0; i < nn; i++)
		p->steps[i] = steps[order[i]];
	memset(steps, 0, sizeof *steps * nn);
	p->nsteps = nn;

	/* lifetimes: a node output dies after its last consumer (or at once) */
	{
		int *last = xmalloc(sizeof *last * (p->nvals ? p->nvals : 1));
		for (size_t s = 0; s < p->nvals; s++)
			last[s] = -1;
		for (size_t i = 0; i < nn; i++) {
			Step *st = &p->steps[i];
			for (size_t k = 0; k < st->node->n_output; k++)
				if (st->out[k] >= 0)
					last[st->out[k]] = (int)i;
			for (size_t k = 0; k < st->node->n_input; k++)
				if (st->in[k] >= 0)
					last[st->in[k]] = (int)i;
			for (size_t k = 0; k < st->nimplicit; k++)
				last[st->implicit[k]] = (int)i;
		}
		for (size_t s = 0; s < p->nvals; s++) {
			if (p->vals[s].kind != V_NODE || p->vals[s].output || last[s] < 0)
				continue;
			Step *st = &p->steps[last[s]];
			push_int(&st->release, &st->nrelease, (int)s);
		}
		free(last);
	}
	r = 0;
out:
	for (size_t i = 0; i < nn; i++) {
		free(deps[i]);
		free(steps[i].in);
		free(steps[i].implicit);
		free(steps[i].release);
	}
	free(deps);
	free(ndeps);
	free(order);
	free(steps);
	return r;
}

/* operators whose result is not a function of their inputs */
static int nondeterministic(const Onnx__NodeProto *n)
{
	static const char *const ops[] = {
		"Bernoulli", "Dropout", "Multinomial", "RandomNormal", "RandomNormalLike",
		"RandomUniform", "RandomUniformLike",
	};
	for (size_t i = 0; i < ARRAY_LEN(ops); i++)
		if (n->op_type && !strcmp(n->op_type, ops[i]))
			return 1;
	return 0;
}

/* the constant (initializer or folded value) slot s of p stands for,
 * following outer-scope values into enclosing plans; NULL if it is not one
 * (an input with a default is not: the caller may override it) */
static const Tensor *plan_const(const Plan *p, int s)
{
	while (s >= 0 && p->vals[s].kind == V_OUTER) {
		s = p->vals[s].outer;
		p = p->parent;
	}
	if (s < 0 || p->vals[s].kind != V_INIT || !p->consts || !p->consts[s].dtype)
		return NULL;
	return &p->consts[s];
}

/* Equal folded constants share their bytes (silero-vad's two LSTM
 * branches reorder the same weights alike: 0.5 MiB held twice). The
 * bytes are then the Interp's (shared), counting their holders; each
 * holder only borrows them, and release_const frees them with the last. */
static Block *shared_find(Interp *ip, const void *p)
{
	for (size_t i = 0; p && i < ip->nshared; i++)
		if (ip->shared[i].p == p)
			return &ip->shared[i];
	return NULL;
}

/* a constant folded before (in any plan) of t's type, shape and bytes,
 * now shared with one more holder, or NULL; small ones are not looked
 * for */
static const Tensor *same_folded(Interp *ip, const Tensor *t)
{
	if (t->nbytes < 4096 || t->kind != TK_TENSOR || t->dtype == DT_STRING)
		return NULL;
	for (size_t i = 0; i < ip->plans.n; i++) {
		Plan *q = ip->plans.v[i];
		for (size_t s = 0; q->consts && s < q->nvals; s++) {
			const Tensor *c = &q->consts[s];
			if (q->vals[s].kind == V_INIT && q->vals[s].init < 0 && c->data && !q->alias[s].of &&
			    (c->owned || shared_find(ip, c->data)) &&
			    c->kind == TK_TENSOR && c->dtype == t->dtype && c->nbytes == t->nbytes &&
			    c->rank == t->rank && !memcmp(c->dims, t->dims, sizeof *t->dims * (size_t)t->rank) &&
			    !memcmp(c->data, t->data, t->nbytes)) {
				Block *b = shared_find(ip, c->data);
				if (!b) {
					if (ip->nshared == ip->capshared) {
						ip->capshared = ip->capshared ? 2 * ip->capshared : 8;
						ip->shared = xreallocarray(ip->shared, ip->capshared, sizeof *ip->shared);
					}
					b = &ip->shared[ip->nshared++];
					*b = (Block){c->data, 1};
					q->consts[s].owned = 0;
				}
				b->cap++;
				return c;
			}
		}
	}
	return NULL;
}

/* t borrows tp's bytes where they can be read in place: raw_data (which
 * protobuf-c allocated, aligned), of a fixed-size type and its shape's
 * length. 1 when borrowed, 0 when not borrowable, -1 after error(). */
static int borrow_proto(const Onnx__TensorProto *tp, Tensor *t)
{
	int dt = tp->has_data_type ? tp->data_type : 0;
	int64_t num = tensor_proto_numel(tp);
	if ((tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) ||
	    !tp->has_raw_data || num <= 0 || dt <= 0 || dt == DT_STRING || !dtype_bits(dt) ||
	    tp->n_dims > QM_MAX_RANK || tp->raw_data.len != dtype_nbytes(dt, num) ||
	    (uintptr_t)tp->raw_data.data % 16)
		return 0;
	return tensor_borrow(t, dt, (int)tp->n_dims, tp->dims, tp->raw_data.data) < 0 ? -1 : 1;
}

/* A Constant node's value as t, borrowing the attribute's bytes as
 * load_consts borrows an initializer's: silero-vad's 2 MiB of Constant
 * weights were copied into fresh pages, twice per calibration (an
 * interpreter per worker), and the page faults were most of planning it.
 * 1 when borrowed, else 0. */
static int borrow_constant(const Onnx__NodeProto *n, Tensor *t)
{
	if (strcmp(n->op_type, "Constant") || (n->domain && n->domain[0]) || n->n_attribute != 1 ||
	    strcmp(n->attribute[0]->name, "value") || !n->attribute[0]->t)
		return 0;
	return borrow_proto(n->attribute[0]->t, t) == 1;
}

/* slot s of p as the constant that holds its bytes: outer values
 * followed into enclosing plans, views to their owners (see Alias) */
static void const_owner(Plan *p, int s, Plan **op, int *os)
{
	while (p->vals[s].kind == V_OUTER) {
		s = p->vals[s].outer;
		p = p->parent;
	}
	if (p->alias[s].of) {
		*op = p->alias[s].of;
		*os = p->alias[s].slot;
	} else {
		*op = p;
		*os = s;
	}
}

/* A step folded at plan time (see fold_key). */
typedef struct FoldRec {
	Plan *p;
	const Step *st;
} FoldRec;

/* Into k, what step st of p computes: its operator, opset, attributes and
 * outputs, and its inputs as the constants holding their bytes (with the
 * offset of a view into them), so that a step of the same key gives the
 * same outputs (constants never change at plan time). silero-vad's two
 * branches of an If each slice and concatenate the same LSTM weights of
 * the enclosing graph: the second Concat becomes a view of the first's
 * result instead of 0.5 MiB more of fresh pages. 0 when the step has no
 * inputs (a Constant borrows its bytes anyway) or reads a constant whose
 * bytes are gone. */
static int fold_key(Plan *p, const Step *st, StrBuf *k)
{
	const Onnx__NodeProto *n = st->node;
	if (!n->n_input)
		return 0;
	sb_reset(k);
	sb_add(k, n->op_type, strlen(n->op_type) + 1);
	sb_add(k, n->domain ? n->domain : "", strlen(n->domain ? n->domain : "") + 1);
	sb_add(k, &st->opset, sizeof st->opset);
	sb_add(k, &n->n_input, sizeof n->n_input);
	sb_add(k, &n->n_output, sizeof n->n_output);
	for (size_t i = 0; i < n->n_output; i++)
		sb_putc(k, st->out[i] >= 0);
	for (size_t i = 0; i < n->n_input; i++) {
		struct {
			Plan *p;
			int64_t slot, off, dtype, rank, dims[QM_MAX_RANK];
		} in;
		memset(&in, 0, sizeof in); /* padding too: the key is bytes */
		if (st->in[i] >= 0) {
			const Tensor *t = plan_const(p, st->in[i]);
			int os;
			const_owner(p, st->in[i], &in.p, &os);
			const Tensor *o = &in.p->consts[os];
			if (!t->data || !o->data || t->kind != TK_TENSOR)
				return 0;
			in.slot = os;
			in.off = (const char *)t->data - (const char *)o->data;
			in.dtype = t->dtype;
			in.rank = t->rank;
			memcpy(in.dims, t->dims, sizeof *t->dims * (size_t)t->rank);
		}
		sb_add(k, &in, sizeof in);
	}
	for (size_t i = 0; i < n->n_attribute; i++) {
		size_t len = onnx__attribute_proto__get_packed_size(n->attribute[i]);
		sb_add(k, &len, sizeof len);
		sb_grow(k, len);
		k->len += onnx__attribute_proto__pack(n->attribute[i], (uint8_t *)k->buf + k->len);
	}
	return 1;
}

/* the outputs of an earlier step folded with the key k, into res as
 * views of its results with their owners in view (see Alias); 1 if so */
static int fold_again(Interp *ip, const StrBuf *k, const Step *st, Tensor *res, Alias *view)
{
	StrMapEnt *e = strmap_findb(&ip->folds, k->buf, k->len);
	if (!e)
		return 0;
	const FoldRec *r = e->v.p;
	for (size_t i = 0; i < st->node->n_output; i++) {
		int s = r->st->out[i];
		if (st->out[i] >= 0 && (r->p->vals[s].kind != V_INIT || !r->p->consts[s].data ||
					r->p->consts[s].kind != TK_TENSOR || r->p->consts[s].dtype == DT_STRING))
			return 0; /* gone, or not bytes a view can read */
	}
	for (size_t i = 0; i < st->node->n_output; i++) {
		if (st->out[i] < 0)
			continue;
		res[i] = r->p->consts[r->st->out[i]];
		res[i].owned = 0;
		res[i].name = NULL;
		const_owner(r->p, r->st->out[i], &view[i].of, &view[i].slot);
	}
	return 1;
}

/* Constant folding: a node whose inputs are all initializers or folded
 * values (of this plan or an enclosing one: an If body reordering the
 * main graph's LSTM weights, say) runs once here and its outputs become
 * constants of the plan (up to 16 MiB each, views of any size: see
 * Alias); one equal to a constant folded before borrows its bytes. Plans
 * are folded parents first. A node that fails is left to fail, with its
 * message, when the model runs. */
static void fold_constants(Interp *ip, Plan *p)
{
	StrBuf key = {0};
	for (size_t i = 0; i < p->nsteps; i++) {
		Step *st = &p->steps[i];
		const Onnx__NodeProto *n = st->node;
		int ok = !nondeterministic(n) && !st->nimplicit;
		for (size_t a = 0; ok && a < n->n_attribute; a++)
			ok = n->attribute[a]->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH &&
			     n->attribute[a]->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS;
		for (size_t k = 0; ok && k < n->n_input; k++)
			ok = st->in[k] < 0 || plan_const(p, st->in[k]);
		if (!ok)
			continue;
		size_t nin = n->n_input, nout = n->n_output;
		const Tensor **ins = xcalloc(nin ? nin : 1, sizeof *ins);
		Tensor **outs = xcalloc(nout ? nout : 1, sizeof *outs);
		Tensor *res = xcalloc(nout ? nout : 1, sizeof *res);
		int *src = xmalloc(sizeof *src * (nout ? nout : 1));
		Alias *view = xcalloc(nout ? nout : 1, sizeof *view);
		for (size_t k = 0; k < nin; k++)
			ins[k] = st->in[k] >= 0 ? plan_const(p, st->in[k]) : NULL;
		for (size_t k = 0; k < nout; k++) {
			outs[k] = &res[k];
			src[k] = -1;
		}
		RunCtx c = {
			.node = n, .opset = st->opset, .nin = nin, .nout = nout,
			.in = ins, .out = outs, .interp = NULL, .threads = ip->o.threads,
			.out_limit = 16u << 20, /* what is kept below: the rest runs later */
		};
		FoldCtx fc = {.in = ins, .nin = nin, .out = outs, .nout = nout, .src = src};
		int keyed = 0, again = 0;
		ok = borrow_constant(n, &res[0]);
		if (!ok && (keyed = fold_key(p, st, &key)))
			ok = again = fold_again(ip, &key, st, res, view);
		if (!ok) {
			tl_fold = &fc;
			ok = st->def->run(&c) == 0;
			tl_fold = NULL;
			for (size_t k = 0; ok && k < nout; k++)
				if (src[k] >= 0)
					const_owner(p, st->in[src[k]], &view[k].of, &view[k].slot);
		}
		for (size_t k = 0; ok && k < nout; k++)
			ok = st->out[k] < 0 || (res[k].data && res[k].dtype &&
						(res[k].nbytes <= (16u << 20) || view[k].of) &&
						res[k].numel == shape_numel(res[k].rank, res[k].dims));
		for (size_t k = 0; ok && k < nout; k++) {
			int s = st->out[k];
			if (s < 0)
				continue;
			if (view[k].of) { /* it holds no bytes */
				p->consts[s] = res[k];
				memset(&res[k], 0, sizeof res[k]);
				p->vals[s].kind = V_INIT;
				p->alias[s] = (Alias){.of = view[k].of, .slot = view[k].slot};
				view[k].of->alias[view[k].slot].views++;
				continue;
			}
			const Tensor *same = same_folded(ip, &res[k]);
			p->consts[s] = res[k];
			memset(&res[k], 0, sizeof res[k]);
			p->vals[s].kind = V_INIT; /* bound like an initializer from now on */
			if (same) { /* borrowed: release_const leaves it alone */
				if (p->consts[s].owned)
					free(p->consts[s].data);
				p->consts[s].data = same->data;
				p->consts[s].owned = 0;
			} else {
				ip->weights += p->consts[s].nbytes;
			}
		}
		if (ok)
			st->folded = 1;
		if (ok && keyed && !again) {
			int added;
			StrMapEnt *e = strmap_addb(&ip->folds, key.buf, key.len, &added);
			if (added) {
				FoldRec *r = xmalloc(sizeof *r);
				*r = (FoldRec){p, st};
				pv_push(&ip->foldrecs, r);
				e->v.p = r;
				strmap_own_key(e);
			}
		}
		for (size_t k = 0; k < nout; k++)
			tensor_free(&res[k]);
		free(res);
		free(src);
		free(view);
		free(ins);
		free(outs);
	}
	sb_release(&key);
}

/* the constant float32 tensor of slot s with n elements (n < 0: any), or NULL */
static const Tensor *const_f32(const Plan *p, int s, int64_t n)
{
	if (s < 0 || p->vals[s].kind != V_INIT || !p->consts[s].data || p->consts[s].dtype != DT_FLOAT)
		return NULL;
	if (n >= 0 && p->consts[s].numel != n)
		return NULL;
	if ((uintptr_t)p->consts[s].data % sizeof(float))
		return NULL;
	return &p->consts[s];
}

static int is_op(const Step *st, const char *op)
{
	return st->node->op_type && !strcmp(st->node->op_type, op) &&
	       (!st->node->domain || !*st->node->domain || !strcmp(st->node->domain, "ai.onnx"));
}

/* Fold for Conv step c into BatchNormalization step b, or -1 when the
 * pair does not qualify (then nothing changes) */
static int fold_bn(Interp *ip, Plan *p, Step *c, Step *b)
{
	const Onnx__NodeProto *cn = c->node, *bn = b->node;
	int64_t train = 0;
	float eps;
	if (bn->n_input != 5 || attr_float(bn, "epsilon", 1e-5f, &eps) < 0 ||
	    attr_int(bn, "training_mode", 0, &train) < 0 || train)
		return -1;
	for (size_t k = 1; k < bn->n_output; k++)
		if (bn->output[k] && *bn->output[k])
			return -1;
	const Tensor *w = const_f32(p, c->in[1], -1);
	if (!w || w->rank < 3 || b->out[0] < 0)
		return -1;
	int64_t M = w->dims[0], per = M ? w->numel / M : 0;
	const Tensor *cb = cn->n_input > 2 && c->in[2] >= 0 ? const_f32(p, c->in[2], M) : NULL;
	if (cn->n_input > 2 && c->in[2] >= 0 && !cb)
		return -1;
	const Tensor *sc = const_f32(p, b->in[1], M), *bb = const_f32(p, b->in[2], M);
	const Tensor *mean = const_f32(p, b->in[3], M), *var = const_f32(p, b->in[4], M);
	if (!sc || !bb || !mean || !var)
		return -1;
	Fold *fd = xcalloc(1, sizeof *fd);
	int64_t bd[1] = {M};
	if (tensor_alloc(&fd->w, DT_FLOAT, w->rank, w->dims) < 0 || tensor_alloc(&fd->b, DT_FLOAT, 1, bd) < 0) {
		tensor_free(&fd->w);
		free(fd);
		return -1;
	}
	const float *wv = w->data, *s = sc->data, *o = bb->data, *mu = mean->data, *v = var->data;
	float *fw = fd->w.data, *fb = fd->b.data;
	for (int64_t m = 0; m < M; m++) {
		float k = s[m] / sqrtf(v[m] + eps);
		for (int64_t j = 0; j < per; j++)
			fw[m * per + j] = wv[m * per + j] * k;
		fb[m] = ((cb ? ((const float *)cb->data)[m] : 0.0f) - mu[m]) * k + o[m];
	}
	fd->out = b->out[0];
	c->fold = fd;
	b->absorbed = 1;
	ip->weights += fd->w.nbytes + fd->b.nbytes;
	return 0;
}

/* Clamp of Conv step c into activation step a (Relu, or Clip with
 * constant float bounds), or -1 when it does not qualify */
static int fuse_clamp(Plan *p, Step *c, Step *a)
{
	float v[2] = {0, INFINITY};
	const Onnx__NodeProto *an = a->node;
	if (an->n_output != 1 || a->out[0] < 0)
		return -1;
	if (is_op(a, "Clip") && a->opset < 11) {
		/* attributes; the kernel's defaults are -FLT_MAX and FLT_MAX */
		if (attr_float(an, "min", -FLT_MAX, &v[0]) < 0 || attr_float(an, "max", FLT_MAX, &v[1]) < 0)
			return -1;
	} else if (is_op(a, "Clip")) {
		for (size_t k = 1; k < 3; k++) {
			v[k - 1] = k == 1 ? -INFINITY : INFINITY; /* absent: no bound */
			if (k >= an->n_input || a->in[k] < 0)
				continue;
			const Tensor *t = const_f32(p, a->in[k], 1);
			if (!t)
				return -1;
			v[k - 1] = *(const float *)t->data;
		}
	} else if (!is_op(a, "Relu")) {
		return -1;
	}
	Clamp *cl = xmalloc(sizeof *cl);
	cl->v[0] = v[0];
	cl->v[1] = v[1];
	cl->out = a->out[0];
	c->clamp = cl;
	a->absorbed = 1;
	return 0;
}

/* slot s is a node output (not a graph output) read once */
static int read_once(const Plan *p, const int *uses, int s)
{
	return s >= 0 && p->vals[s].kind == V_NODE && !p->vals[s].output && uses[s] == 1;
}

/* step st (a binary operator, unfused) has a constant float scalar input
 * and another one: the scalar's index (1 or 0) with its value, the other
 * input's slot and the highest rank seen, or -1 */
static int scalar_operand(const Plan *p, const Step *st, int *other, float *v, int *rank)
{
	if (st->folded || st->absorbed || st->node->n_input != 2 || st->node->n_output != 1 ||
	    st->out[0] < 0 || st->nimplicit)
		return -1;
	for (int k = 1; k >= 0; k--) {
		const Tensor *t = const_f32(p, st->in[k], 1);
		if (!t || st->in[1 - k] < 0 || const_f32(p, st->in[1 - k], -1))
			continue;
		*other = st->in[1 - k];
		*v = *(const float *)t->data;
		*rank = t->rank > *rank ? t->rank : *rank;
		return k;
	}
	return -1;
}

/* Gelu starting at step i of p, a Div or Mul by a constant (see Gelu), or
 * -1 when the steps around it do not qualify (then nothing changes).
 * consumer[s]: the step reading slot s; producer[s]: the step writing it. */
static int fuse_gelu(Plan *p, const int *uses, const int *consumer, const int *producer, size_t i)
{
	Step *d = &p->steps[i], *m0 = NULL, *last;
	GeluErf g = {0};
	int x, o, rank = 0;
	g.mul_d = is_op(d, "Mul");
	if (!g.mul_d && !is_op(d, "Div"))
		return -1;
	int k = scalar_operand(p, d, &x, &g.d, &rank);
	if (k < 0 || (!g.mul_d && k != 1) || !read_once(p, uses, d->out[0]))
		return -1;
	Step *e = &p->steps[consumer[d->out[0]]];
	if (!is_op(e, "Erf") || e->folded || e->absorbed || e->node->n_input != 1 ||
	    e->node->n_output != 1 || !read_once(p, uses, e->out[0]))
		return -1;
	Step *a = &p->steps[consumer[e->out[0]]];
	if (!is_op(a, "Add") || scalar_operand(p, a, &o, &g.a, &rank) < 0 || o != e->out[0] ||
	    !read_once(p, uses, a->out[0]))
		return -1;
	Step *m1 = &p->steps[consumer[a->out[0]]];
	int w = a->out[0];
	if (!is_op(m1, "Mul") || m1->folded || m1->absorbed || m1->node->n_input != 2 ||
	    m1->node->n_output != 1 || m1->out[0] < 0 || m1->in[0] == m1->in[1])
		return -1;
	int z = m1->in[0] == w ? m1->in[1] : m1->in[0];
	if (z == x) { /* (x * e) * h */
		if (!read_once(p, uses, m1->out[0]))
			return -1;
		last = &p->steps[consumer[m1->out[0]]];
		if (!is_op(last, "Mul") || scalar_operand(p, last, &o, &g.h, &rank) < 0 || o != m1->out[0])
			return -1;
	} else { /* (x * h) * e */
		if (!read_once(p, uses, z) || producer[z] < 0)
			return -1;
		m0 = &p->steps[producer[z]];
		if (!is_op(m0, "Mul") || m0 == d || scalar_operand(p, m0, &o, &g.h, &rank) < 0 || o != x)
			return -1;
		g.half_first = 1;
		last = m1;
	}
	Gelu *gl = xmalloc(sizeof *gl);
	gl->g = g;
	gl->xin = d->in[0] == x ? 0 : 1;
	gl->rank = rank;
	gl->out = last->out[0];
	d->gelu = gl;
	e->absorbed = a->absorbed = m1->absorbed = last->absorbed = 1;
	if (m0)
		m0->absorbed = 1;
	return 0;
}

/* Sum of Conv step i of p into the Add that reads its output, then a
 * Relu or Clip after the Add into its Clamp (see Sum), or -1 when it does
 * not qualify. consumer[s]: the step reading slot s; producer[s]: the step
 * writing it. */
static int fuse_sum(Plan *p, const int *uses, const int *consumer, const int *producer, size_t i)
{
	Step *c = &p->steps[i];
	if (c->folded || c->clamp || c->sum || !is_op(c, "Conv") || c->node->n_output != 1 || c->out[0] < 0)
		return -1;
	int s = c->fold ? c->fold->out : c->out[0];
	if (!read_once(p, uses, s))
		return -1;
	Step *a = &p->steps[consumer[s]];
	if (!is_op(a, "Add") || a->opset < 7 || a->folded || a->absorbed || a->node->n_input != 2 ||
	    a->node->n_output != 1 || a->out[0] < 0 || a->nimplicit || a->in[0] == a->in[1])
		return -1;
	int o = a->in[0] == s ? a->in[1] : a->in[0];
	if (o < 0 || (p->vals[o].kind == V_NODE && (producer[o] < 0 || (size_t)producer[o] >= i)))
		return -1;
	Sum *sm = xmalloc(sizeof *sm);
	sm->in = o;
	sm->out = a->out[0];
	c->sum = sm;
	a->absorbed = 1;
	if (read_once(p, uses, sm->out)) {
		Step *r = &p->steps[consumer[sm->out]];
		if (!r->folded && !r->absorbed && r->node->n_input >= 1 && r->in[0] == sm->out)
			fuse_clamp(p, c, r);
	}
	return 0;
}

static void release_const(Interp *ip, Plan *p, int s);

/* find Conv -> BatchNormalization pairs of p to fold (see Fold),
 * activations after them to fuse (see Clamp), Gelu decompositions (see
 * Gelu) and residual Adds after Convs (see Sum) */
static void fuse_plan(Interp *ip, Plan *p)
{
	int *uses = xcalloc(p->nvals ? p->nvals : 1, sizeof *uses);
	int *consumer = xmalloc(sizeof *consumer * (p->nvals ? p->nvals : 1));
	int *producer = xmalloc(sizeof *producer * (p->nvals ? p->nvals : 1));
	for (size_t s = 0; s < p->nvals; s++)
		producer[s] = -1;
	for (size_t i = 0; i < p->nsteps; i++) {
		const Step *st = &p->steps[i];
		for (size_t k = 0; k < st->node->n_output; k++)
			if (st->out[k] >= 0)
				producer[st->out[k]] = (int)i;
		for (size_t k = 0; k < st->node->n_input + st->nimplicit; k++) {
			int s = k < st->node->n_input ? st->in[k] : st->implicit[k - st->node->n_input];
			if (s >= 0) {
				uses[s]++;
				consumer[s] = (int)i;
			}
		}
	}
	for (size_t i = 0; i < p->nsteps; i++) {
		Step *c = &p->steps[i];
		if (c->folded || !is_op(c, "Conv") || c->node->n_output != 1 || c->out[0] < 0)
			continue;
		int s = c->out[0];
		if (p->vals[s].kind != V_NODE || p->vals[s].output || uses[s] != 1)
			continue;
		Step *b = &p->steps[consumer[s]];
		if (!is_op(b, "BatchNormalization") || b->folded || b->in[0] != s || fold_bn(ip, p, c, b) < 0)
			continue;
		/* the originals nobody else reads go at once, so the folded
		 * copies do not add to the peak (see Release) */
		int orig[6] = {c->in[1], c->node->n_input > 2 ? c->in[2] : -1, b->in[1], b->in[2], b->in[3], b->in[4]};
		for (size_t k = 0; ip->o.release_consts && k < 6; k++) {
			int o = orig[k];
			if (o >= 0 && p->vals[o].kind == V_INIT && !p->vals[o].output && uses[o] == 1)
				release_const(ip, p, o);
		}
	}
	for (size_t i = 0; i < p->nsteps; i++) {
		Step *c = &p->steps[i];
		if (c->folded || !is_op(c, "Conv") || c->node->n_output != 1 || c->out[0] < 0)
			continue;
		int s = c->fold ? c->fold->out : c->out[0];
		if (p->vals[s].kind != V_NODE || p->vals[s].output || uses[s] != 1)
			continue;
		Step *a = &p->steps[consumer[s]];
		if (!a->folded && !a->absorbed && a->node->n_input >= 1 && a->in[0] == s)
			fuse_clamp(p, c, a);
	}
	for (size_t i = 0; i < p->nsteps; i++)
		fuse_gelu(p, uses, consumer, producer, i);
	for (size_t i = 0; i < p->nsteps; i++)
		fuse_sum(p, uses, consumer, producer, i);
	free(uses);
	free(consumer);
	free(producer);
}

/* operators whose kernel copies input 0's bytes unchanged into output 0
 * (copy_reshaped in ops/shape.c, which skips the copy when both are the
 * same block) */
static int relabels(const Step *st)
{
	static const char *const ops[] = {"Flatten", "Identity", "Reshape", "Squeeze", "Unsqueeze"};
	for (size_t i = 0; i < ARRAY_LEN(ops); i++)
		if (is_op(st, ops[i]))
			return 1;
	return 0;
}

/* mark the steps of p whose output may take over input 0's block: a
 * relabelling operator whose input 0 is a node output (not a graph output)
 * that dies at that step and is not read twice by it */
static void plan_steals(Plan *p)
{
	for (size_t i = 0; i < p->nsteps; i++) {
		Step *st = &p->steps[i];
		if (st->folded || !relabels(st) || st->node->n_input < 1 || st->node->n_output < 1 ||
		    st->nimplicit)
			continue;
		int s = st->in[0], dies = 0, twice = 0;
		if (s < 0 || p->vals[s].kind != V_NODE || p->vals[s].output)
			continue;
		for (size_t k = 0; k < st->nrelease; k++)
			dies |= st->release[k] == s;
		for (size_t k = 1; k < st->node->n_input; k++)
			twice |= st->in[k] == s;
		st->steal = dies && !twice;
	}
}

/* load the initializers of every plan */
static int load_consts(Interp *ip)
{
	for (size_t i = 0; i < ip->plans.n; i++) {
		Plan *p = ip->plans.v[i];
		p->consts = xcalloc(p->nvals ? p->nvals : 1, sizeof *p->consts);
		p->alias = xcalloc(p->nvals ? p->nvals : 1, sizeof *p->alias);
		for (size_t s = 0; s < p->nvals; s++) {
			if (p->vals[s].init < 0)
				continue;
			const Onnx__TensorProto *tp = p->g->initializer[p->vals[s].init];
			Tensor *t = &p->consts[s];
			/* borrowed rather than every weight held twice */
			int ext = tp->has_data_location &&
				  tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
			int b = borrow_proto(tp, t);
			if (b == 0)
				b = tensor_load_proto(ip->m, tp, t) < 0 ? -1 : 0;
			if (b < 0)
				return error_prefix("initializer '%s'", vname(&p->vals[s]));
			if (b == 0 && ext) {
				/* copied: give the mapped pages back (a later reader
				 * faults them in again from the file) */
				const void *d;
				size_t len;
				int owned;
				if (model_tensor_bytes(ip->m, tp, &d, &len, &owned) == 0) {
					if (owned)
						free((void *)d);
					else
						ext_release(d, len);
				}
			}
			ip->weights += p->consts[s].nbytes;
		}
	}
	return 0;
}

/* ---- releasing constants (see Release in the header) ---- */

/* empty the data fields of initializer tp, whose bytes nobody reads now */
static void proto_drop(Onnx__TensorProto *tp)
{
	free(tp->raw_data.data);
	tp->raw_data.data = NULL;
	tp->raw_data.len = 0;
	free(tp->float_data);
	tp->float_data = NULL;
	tp->n_float_data = 0;
	free(tp->int32_data);
	tp->int32_data = NULL;
	tp->n_int32_data = 0;
	free(tp->int64_data);
	tp->int64_data = NULL;
	tp->n_int64_data = 0;
	free(tp->double_data);
	tp->double_data = NULL;
	tp->n_double_data = 0;
	free(tp->uint64_data);
	tp->uint64_data = NULL;
	tp->n_uint64_data = 0;
}

/* free t's bytes (an owned copy): it keeps its type and shape */
static void drop_owned(Interp *ip, Tensor *t)
{
	if (!t->data || !t->owned || t->kind != TK_TENSOR || t->dtype == DT_STRING)
		return;
	free(t->data);
	t->data = NULL;
	t->owned = 0;
	ip->weights -= ip->weights >= t->nbytes ? t->nbytes : ip->weights;
	ip->trim = 1;
}

/* free chunks inside the heap stay resident (and the trim threshold is
 * high, see block_new): after constants went, return their pages. One
 * trim at a time: interpreters run side by side (calibration workers,
 * verify's reference thread), and two concurrent malloc_trim calls crashed
 * under AddressSanitizer's allocator. */
static void trim_heap(Interp *ip)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	if (ip->trim) {
		pthread_mutex_lock(&lock);
		(void)malloc_trim(0);
		pthread_mutex_unlock(&lock);
	}
	ip->trim = 0;
}

/* whether releasing constant s of p would free its bytes */
static int frees_bytes(Interp *ip, const Plan *p, int s)
{
	const Tensor *t = &p->consts[s];
	const Block *sh = shared_find(ip, t->data);
	int init = p->vals[s].init;
	if (sh)
		return sh->cap == 1;
	return t->owned || (init >= 0 && !ip->inl && p->g->initializer[init]->raw_data.data == t->data);
}

/* Owner s of p is released while views still read its bytes: when those
 * are under half of them, each view takes a copy of its own and the
 * owner's bytes can go (a row sliced from a large table must not keep the
 * whole table); 1 if so. */
static int unview(Interp *ip, Plan *p, int s)
{
	size_t bytes = 0;
	for (int copy = 0; copy < 2; copy++) {
		for (size_t i = 0; i < ip->plans.n; i++) {
			Plan *q = ip->plans.v[i];
			for (size_t v = 0; v < q->nvals; v++) {
				Tensor *t = &q->consts[v];
				if (q->alias[v].of != p || q->alias[v].slot != s || !t->data)
					continue;
				if (!copy) {
					bytes += t->nbytes;
					continue;
				}
				void *d = xmalloc(t->nbytes);
				memcpy(d, t->data, t->nbytes);
				t->data = d;
				t->owned = 1;
				q->alias[v].of = NULL;
				ip->weights += t->nbytes;
			}
		}
		if (!copy && 2 * bytes >= p->consts[s].nbytes)
			return 0;
	}
	p->alias[s].views = 0;
	return 1;
}

/* free the bytes of constant s of p, and its initializer's in the model;
 * an owner's wait for its views (see Alias), a view's own go with it */
static void release_const(Interp *ip, Plan *p, int s)
{
	Tensor *t = &p->consts[s];
	Alias *a = &p->alias[s];
	int init = p->vals[s].init;
	if (!t->data || t->kind != TK_TENSOR || t->dtype == DT_STRING)
		return;
	if (a->of) {
		Alias *o = &a->of->alias[a->slot];
		t->data = NULL;
		if (--o->views == 0 && o->held) {
			o->held = 0;
			release_const(ip, a->of, a->slot);
		}
		return;
	}
	if (a->views && !(frees_bytes(ip, p, s) && unview(ip, p, s))) {
		a->held = 1;
		return;
	}
	Block *sh = shared_find(ip, t->data);
	if (sh) { /* shared: the last holder frees the bytes */
		if (--sh->cap > 0) {
			t->data = NULL;
			return;
		}
		*sh = ip->shared[--ip->nshared];
		t->owned = 1;
	}
	/* expanded graphs share the model's arrays: leave the model alone */
	Onnx__TensorProto *tp = init >= 0 && !ip->inl ? p->g->initializer[init] : NULL;
	if (!t->owned) { /* borrowed raw_data */
		if (!tp || tp->raw_data.data != t->data)
			return;
		t->owned = 1;
		tp->raw_data.data = NULL;
	}
	drop_owned(ip, t);
	if (tp)
		proto_drop(tp);
}

/* whether a subgraph of p (at any depth) reads p's slot s when it runs:
 * a step of it that is not folded or absorbed takes it, or it is one of
 * its outputs. silero-vad's If bodies read the LSTM weights of the main
 * graph only through Slice and Concat folded at plan time: the originals
 * (0.5 MB) need not stay beside the folded copies. */
static int sub_reads(const Interp *ip, const Plan *p, int s)
{
	for (size_t i = 0; i < ip->plans.n; i++) {
		const Plan *q = ip->plans.v[i];
		if (q->parent != p)
			continue;
		for (size_t v = 0; v < q->nvals; v++) {
			if (q->vals[v].kind != V_OUTER || q->vals[v].outer != s)
				continue;
			if (q->vals[v].output)
				return 1;
			for (size_t j = 0; j < q->nsteps; j++) {
				const Step *st = &q->steps[j];
				if (st->folded || st->absorbed)
					continue;
				for (size_t k = 0; k < st->node->n_input; k++)
					if (st->in[k] == (int)v)
						return 1;
				for (size_t k = 0; k < st->nimplicit; k++)
					if (st->implicit[k] == (int)v && sub_reads(ip, q, (int)v))
						return 1;
			}
		}
	}
	return 0;
}

/* count the reads of every constant of p by the steps that run and free
 * those nobody reads */
static void plan_readers(Interp *ip, Plan *p)
{
	p->readers = xcalloc(p->nvals ? p->nvals : 1, sizeof *p->readers);
	for (size_t s = 0; s < p->nvals; s++)
		if (p->vals[s].kind != V_INIT || p->vals[s].output)
			p->readers[s] = -1; /* never released */
	for (size_t i = 0; i < p->nsteps; i++) {
		const Step *st = &p->steps[i];
		if (st->folded || st->absorbed)
			continue;
		for (size_t k = 0; k < st->nimplicit; k++)
			if (sub_reads(ip, p, st->implicit[k]))
				p->readers[st->implicit[k]] = -1;
		for (size_t k = 0; k < st->node->n_input; k++) {
			int s = st->in[k];
			if (s < 0 || p->readers[s] < 0 || (st->fold && (k == 1 || k == 2)))
				continue; /* a fold's step reads its own weights and bias */
			p->readers[s] = k < 64 ? p->readers[s] + 1 : -1;
		}
		if (st->sum && p->readers[st->sum->in] >= 0)
			p->readers[st->sum->in] = -1; /* the fused Add's operand: kept */
	}
	for (size_t s = 0; s < p->nvals; s++)
		if (p->readers[s] == 0)
			release_const(ip, p, (int)s);
}

/* step st of p has packed inputs for good: take their reads off */
static void note_packed(Interp *ip, Plan *p, Step *st)
{
	uint64_t nw = st->cache.packed & ~st->counted;
	st->counted |= nw;
	for (size_t k = 0; k < st->node->n_input && k < 64; k++) {
		if (!(nw >> k & 1))
			continue;
		if (st->fold && k == 1) {
			drop_owned(ip, &st->fold->w);
			continue;
		}
		int s = st->in[k];
		if (st->fold && k == 2)
			continue;
		if (s >= 0 && p->readers[s] > 0 && --p->readers[s] == 0)
			release_const(ip, p, s);
	}
}

/* the record of folded steps (fold_key), needed while plans remain to
 * be finished */
static void folds_free(Interp *ip)
{
	strmap_free_keys(&ip->folds);
	pv_free_all(&ip->foldrecs);
}

/* The plan-time work on p's constants: folding, fusing, steals. The main
 * graph is finished by interp_new; a subgraph when it first runs, since
 * a body a model never takes need not be folded at all: silero-vad's If
 * on the sample rate keeps a whole 8 kHz network beside the 16 kHz one,
 * and their Concats of LSTM weights were most of planning it. Nothing
 * here can fail (a node that fails to fold is left to fail when it
 * runs), so no error moves from planning to running; errors of the
 * plan itself (unsupported operators, unknown names) still come from
 * interp_new. Folding a body before a parent is impossible: a body runs
 * only inside its parent's frame. */
static void plan_finish(Interp *ip, Plan *p)
{
	fold_constants(ip, p);
	fuse_plan(ip, p);
	plan_steals(p);
	p->finished = 1;
}

Interp *interp_new(Model *m, const InterpOpts *o)
{
	if (!m || !m->proto || !m->proto->graph) {
		error("model has no graph");
		return NULL;
	}
	static int thresh;
	if (!__atomic_exchange_n(&thresh, 1, __ATOMIC_RELAXED)) { /* see block_new */
		(void)mallopt(M_MMAP_THRESHOLD, (int)HUGE_BLOCK);
		(void)mallopt(M_TRIM_THRESHOLD, (int)(2 * HUGE_BLOCK));
	}
	Interp *ip = xcalloc(1, sizeof *ip);
	ip->m = m;
	if (o)
		ip->o = *o;
	if (ip->o.threads <= 0)
		ip->o.threads = 1;
	if (inline_functions(m->proto, &ip->inl) < 0)
		goto fail;
	if (plan_graph(ip, ip->inl ? inlined_graph(ip->inl) : m->proto->graph, NULL, &ip->main) < 0)
		goto fail;
	if (!ip->o.check_only && load_consts(ip) < 0)
		goto fail;
	/* subgraphs are finished when they first run (see plan_finish),
	 * unless constants are released: that counts every plan's reads */
	for (size_t i = 0; !ip->o.check_only && i < ip->plans.n; i++)
		if (ip->o.release_consts || !((Plan *)ip->plans.v[i])->parent)
			plan_finish(ip, ip->plans.v[i]);
	if (ip->o.release_consts)
		folds_free(ip);
	for (size_t i = 0; !ip->o.check_only && ip->o.release_consts && i < ip->plans.n; i++)
		plan_readers(ip, ip->plans.v[i]);
	trim_heap(ip);
	Plan *p = ip->main;
	ip->real_inputs = xcalloc(p->ninputs ? p->ninputs : 1, sizeof *ip->real_inputs);
	for (size_t i = 0; i < p->ninputs; i++)
		if (p->vals[p->inputs[i]].init < 0)
			ip->real_inputs[ip->nreal++] = (int)i;
	ip->mainf.plan = p;
	ip->mainf.t = xcalloc(p->nvals ? p->nvals : 1, sizeof *ip->mainf.t);
	ip->mainf.ref = xcalloc(p->nvals ? p->nvals : 1, sizeof *ip->mainf.ref);
	return ip;
fail:
	interp_free(ip);
	return NULL;
}

void interp_free(Interp *ip)
{
	if (!ip)
		return;
	folds_free(ip);
	if (ip->mainf.t)
		for (size_t s = 0; s < ip->main->nvals; s++)
			tensor_free(&ip->mainf.t[s]);
	free(ip->mainf.t);
	free(ip->mainf.ref);
	for (size_t i = 0; i < ip->plans.n; i++)
		plan_free(ip->plans.v[i]);
	pv_free(&ip->plans);
	for (size_t i = 0; i < ip->npool; i++)
		free(ip->pool[i].p);
	free(ip->pool);
	for (size_t i = 0; i < ip->nshared; i++)
		free(ip->shared[i].p);
	free(ip->shared);
	pat_free_arena(&ip->pat);
	free(ip->pat.b);
	free(ip->pat.ev);
	free(ip->pat.live);
	free(ip->real_inputs);
	inlined_free(ip->inl);
	free(ip);
}

int interp_check_model(Model *m)
{
	InterpOpts o = {.check_only = 1};
	Interp *ip = interp_new(m, &o);
	if (!ip)
		return -1;
	interp_free(ip);
	return 0;
}

size_t interp_ninputs(const Interp *ip)
{
	return ip->nreal;
}

const char *interp_input_name(const Interp *ip, size_t i)
{
	return i < ip->nreal ? ip->main->g->input[ip->real_inputs[i]]->name : NULL;
}

void interp_input_type(const Interp *ip, size_t i, int *dtype, int *rank, int64_t *dims)
{
	*dtype = 0;
	*rank = -1;
	if (i >= ip->nreal)
		return;
	const Onnx__ValueInfoProto *vi = ip->main->g->input[ip->real_inputs[i]];
	const Onnx__TypeProto *tp = vi->type;
	if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
		return;
	*dtype = tp->tensor_type->has_elem_type ? tp->tensor_type->elem_type : 0;
	const Onnx__TensorShapeProto *sh = tp->tensor_type->shape;
	if (!sh || sh->n_dim > QM_MAX_RANK)
		return;
	*rank = (int)sh->n_dim;
	for (size_t k = 0; k < sh->n_dim; k++) {
		const Onnx__TensorShapeProto__Dimension *d = sh->dim[k];
		dims[k] = d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ? d->dim_value : -1;
	}
}

size_t interp_noutputs(const Interp *ip)
{
	return ip->main->noutputs;
}

const char *interp_output_name(const Interp *ip, size_t i)
{
	return i < ip->main->noutputs ? ip->main->g->output[i]->name : NULL;
}

void interp_stats(const Interp *ip, size_t *weights, size_t *peak_live)
{
	/* weights in the layouts kernels keep (packed for fgemm) count too */
	size_t w = ip->weights;
	for (size_t i = 0; i < ip->plans.n; i++) {
		const Plan *p = ip->plans.v[i];
		for (size_t k = 0; k < p->nsteps; k++)
			w += p->steps[k].cache.bytes;
	}
	*weights = w;
	*peak_live = ip->peak;
}

size_t interp_buffer_bytes(const Interp *ip)
{
	return ip->pat.arena_bytes + ip->pool_bytes;
}

int interp_threads(const Interp *ip)
{
	return ip->o.threads;
}

void interp_set_threads(Interp *ip, int threads)
{
	ip->o.threads = threads < 1 ? 1 : threads;
}

void interp_set_tap(Interp *ip, void (*tap)(void *ud, const char *name, const Tensor *t), void *ud)
{
	ip->o.tap = tap;
	ip->o.tap_ud = ud;
}

/* ---- running ---- */

static void frame_clear(Interp *ip, Frame *f)
{
	for (size_t s = 0; s < f->plan->nvals; s++) {
		if (f->plan->vals[s].kind == V_NODE && f->t[s].owned) /* outputs, and values left by an error */
			ip->live -= ip->live >= f->t[s].nbytes ? f->t[s].nbytes : ip->live;
		if (f->plan->vals[s].kind == V_NODE)
			release_tensor(ip, &f->t[s]);
		f->ref[s] = NULL;
	}
}

/* bind initializers and outer values of a fresh frame */
static int frame_bind(Frame *f)
{
	Plan *p = f->plan;
	for (size_t s = 0; s < p->nvals; s++) {
		const Value *v = &p->vals[s];
		if (v->kind == V_INIT)
			f->ref[s] = &p->consts[s];
		else if (v->kind == V_OUTER) {
			f->ref[s] = f->parent ? f->parent->ref[v->outer] : NULL;
			if (!f->ref[s])
				return error("graph '%s': outer-scope value '%s' is not available",
					     gname(p->g), v->name);
		}
	}
	return 0;
}

/* release the node outputs that die after step st */
static void release_dead(Interp *ip, Frame *f, const Step *st)
{
	for (size_t k = 0; k < st->nrelease; k++) {
		int s = st->release[k];
		if (f->plan->vals[s].kind != V_NODE)
			continue; /* folded into a constant */
		if (f->t[s].owned) /* else its block went to a relabelling step's output */
			ip->live -= ip->live >= f->t[s].nbytes ? f->t[s].nbytes : ip->live;
		release_tensor(ip, &f->t[s]);
		f->ref[s] = NULL;
	}
}

/* whether node n takes value t: sequences and optionals go only to the
 * operators that handle them, string tensors also to those that read
 * strings; every other kernel sees numeric tensors only */
static int takes_value(const Onnx__NodeProto *n, const Tensor *t)
{
	static const char *const containers[] = {
		"ConcatFromSequence", "Identity", "If", "Loop", "Optional", "OptionalGetElement",
		"OptionalHasElement", "SequenceAt", "SequenceConstruct", "SequenceErase", "SequenceInsert",
		"SequenceLength", "SequenceMap",
	};
	static const char *const strings[] = {"Cast", "CastLike", "StringNormalizer", "TfIdfVectorizer"};
	if (t->kind == TK_TENSOR && t->dtype != DT_STRING)
		return 1;
	if (n->domain && *n->domain && strcmp(n->domain, "ai.onnx"))
		return 0;
	for (size_t i = 0; i < ARRAY_LEN(containers); i++)
		if (!strcmp(n->op_type, containers[i]))
			return 1;
	for (size_t i = 0; t->kind == TK_TENSOR && i < ARRAY_LEN(strings); i++)
		if (!strcmp(n->op_type, strings[i]))
			return 1;
	return 0;
}

static int run_frame(Interp *ip, Frame *f, int tap)
{
	Plan *p = f->plan;
	char lb[256];
	const Tensor *inbuf[16];
	Tensor *outbuf[16];
	Tensor scratchbuf[16];
	int outslot[16];
	/* folds run where no tap would miss the tensors they skip */
	int fusing = !(tap && ip->o.tap);
	for (size_t i = 0; i < p->nsteps; i++) {
		Step *st = &p->steps[i];
		const Onnx__NodeProto *n = st->node;
		size_t nin = n->n_input, nout = n->n_output;
		if (st->folded) {
			for (size_t k = 0; tap && ip->o.tap && k < nout; k++)
				if (st->out[k] >= 0)
					ip->o.tap(ip->o.tap_ud, n->output[k], f->ref[st->out[k]]);
			continue;
		}
		if (st->absorbed && fusing) {
			release_dead(ip, f, st);
			continue;
		}
		const Fold *fd = fusing ? st->fold : NULL;
		const Clamp *cl = fusing ? st->clamp : NULL;
		const Sum *sm = fusing ? st->sum : NULL;
		const Gelu *gl = fusing ? st->gelu : NULL;
		size_t nrun = fd && nin < 3 ? 3 : nin;
		const Tensor **ins = nrun <= 16 ? inbuf : xcalloc(nrun, sizeof *ins);
		Tensor **outs = nout <= 16 ? outbuf : xcalloc(nout, sizeof *outs);
		Tensor *scratch = nout <= 16 ? scratchbuf : xcalloc(nout, sizeof *scratch);
		int *oslot = nout <= 16 ? outslot : xcalloc(nout, sizeof *oslot);
		int r = 0;
		uint64_t cin = 0;
		for (size_t k = 0; k < nin; k++) {
			if (k < 64 && st->in[k] >= 0 && (p->vals[st->in[k]].kind == V_INIT ||
							    (p->vals[st->in[k]].kind == V_OUTER && plan_const(p, st->in[k]))))
				cin |= (uint64_t)1 << k;
			ins[k] = st->in[k] >= 0 ? f->ref[st->in[k]] : NULL;
			if (st->in[k] >= 0 && !ins[k]) {
				r = error("node '%s' (%s): input '%s' has no value", node_label(n, lb, sizeof lb),
					  n->op_type, n->input[k]);
				break;
			}
			if (ins[k] && !takes_value(n, ins[k])) {
				r = error("node '%s' (%s): input '%s' is a %s, which this operator does not take",
					  node_label(n, lb, sizeof lb), n->op_type, n->input[k],
					  ins[k]->kind != TK_TENSOR ? tensor_kind_name(ins[k]->kind) : "string tensor");
				break;
			}
		}
		if (fd) {
			ins[1] = &fd->w;
			ins[2] = &fd->b;
			cin |= 6;
		}
		for (size_t k = 0; k < nout; k++) {
			memset(&scratch[k], 0, sizeof scratch[k]);
			oslot[k] = k ? st->out[k] : gl ? gl->out : cl ? cl->out : sm ? sm->out : fd ? fd->out : st->out[0];
			outs[k] = oslot[k] >= 0 ? &f->t[oslot[k]] : &scratch[k];
		}
		if (r == 0 && sm && (!f->ref[sm->in] || !takes_value(n, f->ref[sm->in])))
			r = error("node '%s' (%s): the fused Add's input '%s' has no tensor value",
				  node_label(n, lb, sizeof lb), n->op_type, p->vals[sm->in].name);
		Scratch sc = {.ip = ip, .prev = tl_scratch};
		if (r == 0) {
			RunCtx c = {
				.node = n, .opset = st->opset, .nin = nrun, .nout = nout,
				.in = ins, .out = outs, .interp = ip, .threads = ip->o.threads,
				.cache = &st->cache, .const_in = cin, .clamp = cl ? cl->v : NULL,
				.sum = sm ? f->ref[sm->in] : NULL,
			};
			Frame *saved = ip->cur;
			ip->cur = f;
			ip->steal = st->steal ? &f->t[st->in[0]] : NULL;
			tl_scratch = &sc;
			r = gl ? gelu_erf_run(&c, gl->xin, gl->rank, &gl->g) : st->def->run(&c);
			tl_scratch = sc.prev;
			if (r == 0 && p->readers && fusing && (st->cache.packed & ~st->counted))
				note_packed(ip, p, st);
			ip->steal = NULL;
			ip->cur = saved;
			if (r < 0 && strncmp(errmsg(), "node '", 6))
				error_prefix("node '%s' (%s)", node_label(n, lb, sizeof lb), n->op_type);
		}
		for (size_t k = 0; r == 0 && k < nout; k++) {
			if (oslot[k] < 0)
				continue;
			Tensor *t = outs[k];
			if (t->kind != TK_TENSOR)
				f->ref[oslot[k]] = t; /* a container: its tensors are the kernel's */
			else if (t->dtype == DT_STRING && !tensor_strings_valid(t))
				r = error("node '%s' (%s): kernel produced an inconsistent string tensor for output '%s'",
					  node_label(n, lb, sizeof lb), n->op_type, n->output[k]);
			else if (t->dtype == DT_STRING)
				f->ref[oslot[k]] = t;
			else if (!t->data || !t->dtype)
				r = error("node '%s' (%s): kernel produced no value for output '%s'",
					  node_label(n, lb, sizeof lb), n->op_type, n->output[k]);
			else if (t->rank < 0 || t->rank > QM_MAX_RANK || t->numel != shape_numel(t->rank, t->dims) ||
				 t->nbytes != dtype_nbytes(t->dtype, t->numel))
				r = error("node '%s' (%s): kernel produced an inconsistent tensor for output '%s' "
					  "(%lld elements, %zu bytes of %s)", node_label(n, lb, sizeof lb), n->op_type,
					  n->output[k], (long long)t->numel, t->nbytes, dtype_name(t->dtype));
			else {
				f->ref[oslot[k]] = t;
				ip->live += t->nbytes;
			}
		}
		if (ip->live > ip->peak) /* the step's scratch counts too */
			ip->peak = ip->live;
		scratch_end(ip, &sc);
		for (size_t k = 0; k < nout; k++)
			release_tensor(ip, &scratch[k]);
		if (ins != inbuf)
			free(ins);
		if (outs != outbuf)
			free(outs);
		if (scratch != scratchbuf)
			free(scratch);
		if (oslot != outslot)
			free(oslot);
		if (r < 0)
			return -1;
		if (tap && ip->o.tap)
			for (size_t k = 0; k < nout; k++)
				if (st->out[k] >= 0)
					ip->o.tap(ip->o.tap_ud, n->output[k], f->ref[st->out[k]]);
		release_dead(ip, f, st);
	}
	return 0;
}

/* hand the frame's outputs to the caller: move node outputs, copy others */
static int take_outputs(Interp *ip, Frame *f, size_t nout, Tensor *out)
{
	Plan *p = f->plan;
	for (size_t i = 0; i < nout; i++)
		memset(&out[i], 0, sizeof out[i]);
	for (size_t i = 0; i < nout; i++) {
		int s = p->outputs[i];
		int later = 0;
		for (size_t j = i + 1; j < nout; j++)
			if (p->outputs[j] == s)
				later = 1;
		if (p->vals[s].kind == V_NODE && !later && f->t[s].owned &&
		    !pat_in_arena(&ip->pat, f->t[s].data)) { /* arena bytes are copied: they cannot leave by free() */
			/* the caller's now (a subgraph's kernel counts its own outputs) */
			ip->live -= ip->live >= f->t[s].nbytes ? f->t[s].nbytes : ip->live;
			out[i] = f->t[s];
			memset(&f->t[s], 0, sizeof f->t[s]);
			f->ref[s] = NULL;
		} else if (!f->ref[s] || tensor_copy(&out[i], f->ref[s]) < 0) {
			for (size_t j = 0; j < i; j++)
				tensor_free(&out[j]);
			return error("graph '%s': output '%s' has no value", gname(p->g), p->vals[s].name);
		}
	}
	return 0;
}

static void expected_str(const Interp *ip, size_t i, char *buf, size_t size)
{
	int dt, rank;
	int64_t dims[QM_MAX_RANK];
	interp_input_type(ip, i, &dt, &rank, dims);
	const Onnx__ValueInfoProto *vi = ip->main->g->input[ip->real_inputs[i]];
	const char *w;
	int kind = type_kind(vi->type, &w);
	if (kind == TK_SEQUENCE || kind == TK_OPTIONAL) {
		snprintf(buf, size, "a %s", tensor_kind_name(kind));
		return;
	}
	size_t o = (size_t)snprintf(buf, size, "%s", dt ? dtype_name(dt) : "any type");
	if (rank < 0 || o >= size)
		return;
	const Onnx__TensorShapeProto *sh = vi->type->tensor_type->shape;
	o += (size_t)snprintf(buf + o, size - o, " [");
	for (int k = 0; k < rank && o < size; k++) {
		const Onnx__TensorShapeProto__Dimension *d = sh->dim[k];
		if (dims[k] >= 0)
			o += (size_t)snprintf(buf + o, size - o, "%s%lld", k ? "," : "", (long long)dims[k]);
		else
			o += (size_t)snprintf(buf + o, size - o, "%s%s", k ? "," : "",
					      d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM
					      && d->dim_param ? d->dim_param : "?");
	}
	if (o < size)
		snprintf(buf + o, size - o, "]");
}

static int check_input(const Interp *ip, size_t i, const Tensor *t)
{
	int dt, rank;
	int64_t dims[QM_MAX_RANK];
	interp_input_type(ip, i, &dt, &rank, dims);
	const char *w;
	int kind = type_kind(ip->main->g->input[ip->real_inputs[i]]->type, &w);
	if (kind >= 0 && t->kind != kind) {
		char e[512];
		expected_str(ip, i, e, sizeof e);
		return error("input '%s': expected %s%s, got a %s", interp_input_name(ip, i),
			     kind == TK_TENSOR ? "a tensor " : "", e, tensor_kind_name(t->kind));
	}
	if (t->kind != TK_TENSOR)
		return 0; /* the operators check what they find inside */
	int bad = dt && t->dtype != dt;
	if (rank >= 0 && t->rank != rank)
		bad = 1;
	for (int k = 0; !bad && rank >= 0 && k < rank; k++)
		if (dims[k] >= 0 && t->dims[k] != dims[k])
			bad = 1;
	if (!t->data && t->nbytes)
		bad = 1;
	if (!bad)
		return 0;
	char e[512], g[256];
	expected_str(ip, i, e, sizeof e);
	return error("input '%s': expected %s, got %s %s", interp_input_name(ip, i), e,
		     dtype_name(t->dtype), shape_str(t->rank, t->dims, g, sizeof g));
}

/* point the main frame at initializers and the caller's inputs, checking
 * names, types and shapes */
static int bind_inputs(Interp *ip, size_t nin, const Tensor *in)
{
	Plan *p = ip->main;
	Frame *f = &ip->mainf;
	for (size_t s = 0; s < p->nvals; s++)
		f->ref[s] = NULL;
	if (frame_bind(f) < 0)
		return -1;
	for (size_t k = 0; k < nin; k++) {
		size_t i;
		if (in[k].name) {
			for (i = 0; i < ip->nreal; i++)
				if (!strcmp(interp_input_name(ip, i), in[k].name))
					break;
			if (i == ip->nreal) {
				/* an input that has an initializer may be overridden */
				int s = map_get(&p->map, in[k].name);
				if (s >= 0 && p->vals[s].kind == V_INPUT) {
					f->ref[s] = &in[k];
					continue;
				}
				const char *best = NULL;
				int bd = INT_MAX;
				for (size_t j = 0; j < ip->nreal; j++) {
					int d = edit_distance(in[k].name, interp_input_name(ip, j));
					if (d < bd) {
						bd = d;
						best = interp_input_name(ip, j);
					}
				}
				if (best && bd <= 3)
					return error("the model has no input '%s' (did you mean '%s'?)", in[k].name, best);
				if (!ip->nreal)
					return error("the model has no input '%s' (it takes no inputs)", in[k].name);
				return error("the model has no input '%s' (its first input is '%s')", in[k].name,
					     interp_input_name(ip, 0));
			}
		} else {
			if (k >= ip->nreal)
				return error("%zu inputs given, the model has %zu", nin, ip->nreal);
			i = k;
		}
		int s = p->inputs[ip->real_inputs[i]];
		if (f->ref[s])
			return error("input '%s' is given twice", interp_input_name(ip, i));
		if (check_input(ip, i, &in[k]) < 0)
			return -1;
		f->ref[s] = &in[k];
	}
	for (size_t i = 0; i < p->ninputs; i++) {
		int s = p->inputs[i];
		if (f->ref[s])
			continue;
		if (p->vals[s].init >= 0) {
			f->ref[s] = &p->consts[s];
			continue;
		}
		char e[512];
		size_t ri = 0;
		while (ri < ip->nreal && p->inputs[ip->real_inputs[ri]] != s)
			ri++;
		expected_str(ip, ri, e, sizeof e);
		return error("missing input '%s' (%s)", p->vals[s].name, e);
	}
	return 0;
}

int interp_check_inputs(Interp *ip, size_t nin, const Tensor *in)
{
	int r = ip->o.check_only ? 0 : bind_inputs(ip, nin, in);
	for (size_t s = 0; s < ip->main->nvals; s++)
		ip->mainf.ref[s] = NULL;
	return r;
}

int interp_run(Interp *ip, size_t nin, const Tensor *in, size_t nout, Tensor *out)
{
	if (ip->o.check_only)
		return error("interpreter was created in check-only mode");
	Plan *p = ip->main;
	Frame *f = &ip->mainf;
	if (nout > p->noutputs)
		return error("%zu outputs requested, the model has %zu", nout, p->noutputs);
	if (ip->o.release_consts && ip->o.tap)
		return error("a tap cannot watch an interpreter that releases constants (release_consts)");
	if (bind_inputs(ip, nin, in) < 0) {
		for (size_t s = 0; s < p->nvals; s++)
			f->ref[s] = NULL;
		return -1;
	}
	/* one thread: OpenBLAS's sums change with its thread count, and a
	 * build's bytes must not change with -j (see DESIGN.md) */
	openblas_set_num_threads(1);
	if (ip->o.tap) /* calibration needs the ranges of the inputs too */
		for (size_t i = 0; i < p->ninputs; i++)
			ip->o.tap(ip->o.tap_ud, p->vals[p->inputs[i]].name, f->ref[p->inputs[i]]);
	ip->live = 0;
	pat_begin(ip);
	int r = run_frame(ip, f, 1);
	if (r == 0)
		r = take_outputs(ip, f, nout, out);
	frame_clear(ip, f);
	pat_end(ip, r == 0);
	ip->live = 0;
	trim_heap(ip);
	return r;
}

int interp_run_sample(Interp *ip, size_t nin, const Tensor *in, size_t nout, Tensor *out)
{
	Tensor *sel = xcalloc(nin ? nin : 1, sizeof *sel);
	char *named = xcalloc(ip->nreal ? ip->nreal : 1, 1);
	size_t n = 0, next = 0;
	for (size_t k = 0; k < nin; k++)
		for (size_t i = 0; in[k].name && i < ip->nreal; i++)
			if (!strcmp(in[k].name, interp_input_name(ip, i))) {
				named[i] = 1;
				sel[n++] = in[k]; /* shallow: interp_run only reads */
			}
	for (size_t k = 0; k < nin; k++) {
		if (in[k].name)
			continue;
		while (next < ip->nreal && named[next])
			next++;
		sel[n] = in[k];
		/* the next input no tensor names; past the last one, interp_run
		 * reports the surplus */
		sel[n++].name = next < ip->nreal ? (char *)interp_input_name(ip, next++) : NULL;
	}
	int r = n || !nin ? interp_run(ip, n, sel, nout, out)
			  : error("the sample names none of the model's inputs (first tensor: '%s', first input: '%s')",
				  in[0].name, ip->nreal ? interp_input_name(ip, 0) : "");
	free(named);
	free(sel);
	return r;
}

int run_subgraph(RunCtx *c, const Onnx__GraphProto *g, size_t nin,
		 const Tensor *const *in, size_t nout, Tensor *out)
{
	Interp *ip = c->interp;
	if (!ip)
		return op_error(c->node, "subgraph '%s' can only run inside the interpreter", gname(g));
	Plan *p = NULL;
	for (size_t i = 0; i < ip->plans.n && !p; i++)
		if (((Plan *)ip->plans.v[i])->g == g)
			p = ip->plans.v[i];
	if (!p || !ip->cur || ip->cur->plan != p->parent)
		return op_error(c->node, "subgraph '%s' was not planned for this node", gname(g));
	if (nin != p->ninputs)
		return op_error(c->node, "subgraph '%s' takes %zu inputs, %zu given", gname(g), p->ninputs, nin);
	if (nout > p->noutputs)
		return op_error(c->node, "subgraph '%s' has %zu outputs, %zu requested", gname(g), p->noutputs, nout);
	if (!p->finished) {
		/* the folds' kernels take no scratch of the step running this one */
		Scratch *sc = tl_scratch;
		tl_scratch = NULL;
		plan_finish(ip, p);
		tl_scratch = sc;
	}
	Frame f = {.plan = p, .parent = ip->cur};
	f.t = xcalloc(p->nvals ? p->nvals : 1, sizeof *f.t);
	f.ref = xcalloc(p->nvals ? p->nvals : 1, sizeof *f.ref);
	int r = frame_bind(&f);
	for (size_t i = 0; r == 0 && i < nin; i++) {
		if (!in[i])
			r = op_error(c->node, "subgraph '%s': input %zu ('%s') is missing", gname(g), i,
				     p->vals[p->inputs[i]].name);
		f.ref[p->inputs[i]] = in[i];
	}
	/* taps see subgraph inputs and tensors too (calibration) */
	for (size_t i = 0; r == 0 && ip->o.tap && i < nin; i++)
		ip->o.tap(ip->o.tap_ud, p->vals[p->inputs[i]].name, in[i]);
	if (r == 0)
		r = run_frame(ip, &f, 1);
	if (r == 0)
		r = take_outputs(ip, &f, nout, out);
	frame_clear(ip, &f);
	free(f.t);
	free(f.ref);
	return r;
}
