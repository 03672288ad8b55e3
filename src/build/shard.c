/* shard.c — --shard I/N: a deterministic share of the models (see
 * action.h), so that N CI runners fill a remote cache side by side and a
 * final build finds only hits.
 *
 * The unit is a group of models joined by source = @MODEL (a model and the
 * models it builds from must share a runner, or two would build the same
 * actions). A group's cost is its needed actions plus one per MiB of the
 * files they read (the source model, export's deps, calibration and verify
 * data): known from the checkout alone, so every runner computes the same
 * split without asking anything. Groups are placed by consistent hashing
 * with bounded loads: from the most costly down (ties by name), each goes
 * to the first shard, in an order drawn from a hash of its name and the
 * shard, whose load stays within 1.25 times the mean (else to the least
 * loaded). So the shards' costs are close, and a model added to the project
 * moves few others. */
#include "build/action.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct Group {
	const Section *root;  /* the group's name: its first model in file order */
	double cost;
} Group;

static double file_mib(const char *root, const char *path)
{
	char *p = path[0] == '/' ? xstrdup(path) : path_join(root, path);
	struct stat st;
	double mib = stat(p, &st) == 0 ? (double)st.st_size / (1 << 20) : 0;
	free(p);
	return mib;
}

/* the cost of one needed action */
static double action_cost(const Build *b, const Action *a)
{
	double c = 1;
	PtrVec files = {0};
	if (a->stage->declared_inputs && a->stage->declared_inputs(a->model, b->p->root, &files) == 0)
		for (size_t i = 0; i < files.n; i++)
			c += file_mib(b->p->root, files.v[i]);
	pv_free_all(&files);
	const char *src = a->in ? NULL : sec_get(a->model, "source");
	if (src && src[0] != '@')
		c += file_mib(b->p->root, src);
	return c;
}

static int by_cost(const void *x, const void *y)
{
	const Group *a = x, *b = y;
	if (a->cost != b->cost)
		return a->cost > b->cost ? -1 : 1;
	return strcmp(a->root->name, b->root->name);
}

/* the place of shard k in group g's order: a hash of both */
static Hash rank(const Group *g, int k)
{
	StrBuf sb = {0};
	sb_printf(&sb, "%s\n%d", g->root->name, k);
	Hash h = hash_buf(sb.buf, sb.len);
	sb_release(&sb);
	return h;
}

static size_t find(size_t *up, size_t x)
{
	while (up[x] != x)
		x = up[x] = up[up[x]];
	return x;
}

int shard_select(Build *b)
{
	int n = b->o->shards, me = b->o->shard;
	size_t nm = b->p->nmodels;
	/* each model's index in Section.user for a while (graph.c's value
	 * is put back at the end) */
	void **saved = xcalloc(nm, sizeof *saved);
	for (size_t i = 0; i < nm; i++) {
		saved[i] = b->p->models[i]->user;
		b->p->models[i]->user = (void *)i;
	}
	/* groups: the models an action takes its input from join its own */
	size_t *up = xcalloc(nm, sizeof *up);
	for (size_t i = 0; i < nm; i++)
		up[i] = i;
	for (size_t i = 0; i < b->nacts; i++) {
		const Action *a = b->acts[i];
		if (!a->in || a->in->model == a->model)
			continue;
		size_t x = find(up, (size_t)a->model->user), y = find(up, (size_t)a->in->model->user);
		if (x != y)
			up[x > y ? x : y] = x < y ? x : y; /* the first model names it */
	}
	Group *g = xcalloc(nm, sizeof *g);
	size_t *gi = xcalloc(nm, sizeof *gi); /* a root model's group index + 1 */
	size_t ng = 0;
	double total = 0;
	for (size_t i = 0; i < b->nacts; i++) {
		const Action *a = b->acts[i];
		if (!a->needed)
			continue;
		size_t r = find(up, (size_t)a->model->user);
		if (!gi[r]) {
			g[ng] = (Group){.root = b->p->models[r]};
			gi[r] = ++ng;
		}
		double c = action_cost(b, a);
		g[gi[r] - 1].cost += c;
		total += c;
	}
	qsort(g, ng, sizeof *g, by_cost);
	double *load = xcalloc((size_t)n, sizeof *load), cap = total / n * 1.25;
	int *shard_of = xcalloc(nm, sizeof *shard_of); /* by root model */
	for (size_t i = 0; i < ng; i++) {
		int best = -1;
		Hash bh = {{0}};
		/* the highest-ranked shard with room */
		for (int k = 1; k <= n; k++) {
			Hash h = rank(&g[i], k);
			if (load[k - 1] + g[i].cost <= cap && (best < 0 || memcmp(h.b, bh.b, sizeof h.b) > 0)) {
				best = k;
				bh = h;
			}
		}
		if (best < 0) /* none: the least loaded */
			for (int k = 1; k <= n; k++)
				if (best < 0 || load[k - 1] < load[best - 1])
					best = k;
		shard_of[(size_t)g[i].root->user] = best;
		load[best - 1] += g[i].cost;
	}
	/* the other shards' actions are not needed here */
	for (size_t i = 0; i < b->nacts; i++) {
		Action *a = b->acts[i];
		if (shard_of[find(up, (size_t)a->model->user)] != me)
			a->needed = a->target = 0;
	}
	size_t mine = 0, all = 0;
	for (size_t i = 0; i < nm; i++) {
		int s = shard_of[find(up, i)];
		all += s != 0;
		mine += s == me;
	}
	printf("%s: shard %d/%d: %zu of %zu models (cost %.0f of %.0f)\n", argv0, me, n, mine, all, load[me - 1],
	       total);
	fflush(stdout);
	for (size_t i = 0; i < nm; i++)
		b->p->models[i]->user = saved[i];
	free(saved);
	free(shard_of);
	free(load);
	free(g);
	free(gi);
	free(up);
	return 0;
}
