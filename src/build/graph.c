/* graph.c — models expanded into chains of actions, the targets' needs
 * marked, and the graph printed (see action.h). */
#include "build/action.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const AuxKind aux_kind[NAUX] = {
	/* verify: the float model quantize started from (Stage.reference_of) */
	{"reference", "ref", 0},
	/* quantize, verify: calibrate's statistics (Stage.side_of) */
	{"side", "side", 1},
};

char *action_label(const Action *a)
{
	return xasprintf("%s:%s", a->model->name, a->stage->name);
}

int action_takes_from(const Action *d, const Action *a)
{
	if (d->in == a)
		return 1;
	for (int k = 0; k < NAUX; k++)
		if (d->aux[k] == a)
			return 1;
	return 0;
}

int action_inputs_done(const Action *a)
{
	if (a->in && a->in->state != A_DONE)
		return 0;
	for (int k = 0; k < NAUX; k++)
		if (a->aux[k] && a->aux[k]->state != A_DONE)
			return 0;
	return 1;
}

static Action *chain_find(Build *b, const Section *m, const char *stage)
{
	Action *last = NULL;
	size_t first = (size_t)(uintptr_t)m->user;
	for (size_t i = first ? first - 1 : b->nacts; i < b->nacts && b->acts[i]->model == m; i++) {
		Action *a = b->acts[i];
		if (stage && !strcmp(a->stage->name, stage))
			return a;
		if (a->last)
			last = a;
	}
	return stage ? NULL : last;
}

const char **graph_model_names(const Project *p)
{
	const char **n = xcalloc(p->nmodels + 1, sizeof *n);
	for (size_t i = 0; i < p->nmodels; i++)
		n[i] = p->models[i]->name;
	return n;
}

static int expand_model(Build *b, Section *m, PtrVec *stack)
{
	if (chain_find(b, m, NULL))
		return 0;
	for (size_t i = 0; i < stack->n; i++) {
		if (stack->v[i] != m)
			continue;
		StrBuf sb = {0};
		for (size_t j = i; j < stack->n; j++)
			sb_printf(&sb, "%s -> ", ((Section *)stack->v[j])->name);
		sb_puts(&sb, m->name);
		const KV *kv = sec_find(m, "source");
		error("%s:%d: dependency cycle: %s", kv ? kv->file : m->file, kv ? kv->line : m->line, sb.buf);
		sb_release(&sb);
		return -1;
	}
	Action *up = NULL;
	const KV *src = sec_find(m, "source");
	if (src && src->value[0] == '@') {
		char *name = xstrdup(src->value + 1), *stage = strchr(name, ':');
		if (stage)
			*stage++ = 0;
		Section *o = project_model(b->p, name);
		if (!o) {
			const char **names = graph_model_names(b->p);
			const char *near = closest(name, names, b->p->nmodels);
			error("%s:%d: model '%s': source '@%s' names no model%s%s%s", src->file, src->line,
			      m->name, name, near ? " (did you mean '@" : "", near ? near : "", near ? "'?)" : "");
			free(names);
			free(name);
			return -1;
		}
		pv_push(stack, m);
		int r = expand_model(b, o, stack);
		stack->n--;
		if (r < 0) {
			free(name);
			return -1;
		}
		up = chain_find(b, o, stage);
		if (!up) {
			error("%s:%d: model '%s': model '%s' has no stage '%s'", src->file, src->line, m->name,
			      name, stage);
			free(name);
			return -1;
		}
		free(name);
	}
	Action *prev = NULL;
	size_t nstages = 0;
	for (size_t i = 0; stage_table[i]; i++) {
		const Stage *st = stage_table[i];
		if (!st->wanted(m))
			continue;
		Action *a = xcalloc(1, sizeof *a);
		a->model = m;
		a->stage = st;
		a->in = prev ? prev : up;
		a->fd = -1;
		b->acts = xreallocarray(b->acts, b->nacts + 1, sizeof *b->acts);
		b->acts[b->nacts++] = a;
		nstages++;
		prev = a;
	}
	if (prev)
		prev->last = 1;
	size_t first = b->nacts - nstages;
	/* An off-chain stage (calibrate) makes what later stages take beside
	 * their model: the stage after it takes its model from the stage
	 * before it. It takes its own from before an annotating stage right
	 * before it (infer-shapes only adds the types and shapes it does not
	 * read), so that the two run at the same time. */
	for (size_t i = first; i + 1 < b->nacts; i++) {
		Action *a = b->acts[i];
		if (!a->stage->off_chain)
			continue;
		b->acts[i + 1]->in = a->in;
		if (a->in && a->in->model == m && a->in->stage->annotates && a->in->in)
			a->in = a->in->in;
	}
	for (size_t i = first; i < b->nacts; i++) {
		Action *a = b->acts[i];
		for (size_t j = first; a->stage->side_of && j < b->nacts; j++)
			if (!strcmp(b->acts[j]->stage->name, a->stage->side_of))
				a->aux[AUX_SIDE] = b->acts[j];
		if (!a->stage->reference_of)
			continue;
		for (size_t j = first; j < b->nacts; j++)
			if (!strcmp(b->acts[j]->stage->name, a->stage->reference_of))
				a->aux[AUX_REF] = b->acts[j]->in;
		if (!a->aux[AUX_REF]) {
			error("%s:%d: model '%s': stage %s needs a %s stage to compare against", m->file, m->line,
			      m->name, a->stage->name, a->stage->reference_of);
			return -1;
		}
	}
	/* index + 1 of the model's first action (b->acts moves as it grows) */
	m->user = (void *)(uintptr_t)(first + 1);
	return 0;
}

int graph_expand(Build *b)
{
	PtrVec stack = {0};
	int r = 0;
	for (size_t i = 0; r == 0 && i < b->p->nmodels; i++)
		r = expand_model(b, b->p->models[i], &stack);
	pv_free(&stack);
	return r;
}

static void need(Action *a)
{
	for (; a && !a->needed; a = a->in) {
		a->needed = 1;
		for (int k = 0; k < NAUX; k++)
			need(a->aux[k]);
	}
}

int graph_mark(Build *b, int ntargets, char **targets)
{
	static char *all[] = {"all"};
	if (ntargets == 0) {
		ntargets = 1;
		targets = all;
	}
	for (int t = 0; t < ntargets; t++) {
		const char *tg = targets[t];
		if (!strcmp(tg, "all")) {
			for (size_t i = 0; i < b->nacts; i++)
				if (b->acts[i]->last) {
					b->acts[i]->target = 1;
					need(b->acts[i]);
				}
			continue;
		}
		char *name = xstrdup(tg), *stage = strchr(name, ':');
		if (stage)
			*stage++ = 0;
		Section *m = project_model(b->p, name);
		if (!m) {
			const char **names = graph_model_names(b->p);
			const char *near = closest(name, names, b->p->nmodels);
			if (near)
				error("unknown target '%s' (did you mean '%s'?)", tg, near);
			else
				error("unknown target '%s': expected all, a model name or MODEL:STAGE", tg);
			free(names);
			free(name);
			return -1;
		}
		Action *a = chain_find(b, m, stage);
		if (!a) {
			StrBuf sb = {0};
			for (size_t i = 0; i < b->nacts; i++)
				if (b->acts[i]->model == m)
					sb_printf(&sb, "%s%s", sb.len ? ", " : "", b->acts[i]->stage->name);
			error("model '%s' has no stage '%s' (its stages: %s)", name, stage, sb.buf);
			sb_release(&sb);
			free(name);
			return -1;
		}
		a->target = 1;
		need(a);
		free(name);
	}
	return 0;
}

void graph_print(const Build *b)
{
	printf("digraph quantmake {\n\trankdir=LR;\n");
	for (size_t i = 0; i < b->nacts; i++) {
		const Action *a = b->acts[i];
		if (!a->needed)
			continue;
		printf("\t\"%s:%s\"%s;\n", a->model->name, a->stage->name, a->target ? " [shape=box]" : "");
		if (a->in)
			printf("\t\"%s:%s\" -> \"%s:%s\";\n", a->in->model->name, a->in->stage->name,
			       a->model->name, a->stage->name);
		for (int k = 0; k < NAUX; k++)
			if (a->aux[k])
				printf("\t\"%s:%s\" -> \"%s:%s\" [style=dashed];\n", a->aux[k]->model->name,
				       a->aux[k]->stage->name, a->model->name, a->stage->name);
	}
	printf("}\n");
}
