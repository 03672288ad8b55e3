/* build.c — expanding models into actions, planning keys, and running
 * actions in parallel child processes (see build.h).
 *
 * Flow: expand() builds every model's chain and checks for cycles;
 * mark() selects the actions the targets need; the loop in build_run()
 * resolves actions whose inputs are known: compute the key, look for a
 * record (hit), else start a child that runs the stage into a temporary
 * directory under the cache and stores the outputs. Finally the targets'
 * outputs are materialized into the build directory by copying from the
 * store (never linking: editing build/ can not corrupt the cache). */
#include "build.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <stdint.h>
#include <unistd.h>

#include "buildlog.h"
#include "cache.h"
#include "hash.h"
#include "onnx/extdata.h"
#include "stages/stage.h"
#include "statcache.h"
#include "util.h"

enum { A_PENDING, A_RUNNING, A_DONE, A_FAILED, A_SKIPPED };

/* An action's inputs besides its model: other actions of the same model
 * whose outputs the stage receives, each fetched into a directory of its
 * own and hashed into the key as lines of its own. */
enum { AUX_REF, AUX_SIDE, NAUX };
static const struct {
	const char *key, *dir;
	int files_only; /* its outputs but the model (fetching a model verifies
			   every byte of it) */
} aux_kind[NAUX] = {
	/* verify: the float model quantize started from (Stage.reference_of) */
	{"reference", "ref", 0},
	/* quantize, verify: calibrate's statistics (Stage.side_of) */
	{"side", "side", 1},
};
/* a child's exit when an input object is corrupt or gone: the input's, or
 * EXIT_CORRUPT_AUX + the AUX_* kind */
enum { EXIT_CORRUPT_INPUT = 3, EXIT_CORRUPT_AUX = 4 };

typedef struct Action {
	Section *model;
	const Stage *stage;
	struct Action *in;     /* upstream action giving the input model */
	struct Action *aux[NAUX]; /* actions giving its other inputs, or NULL */
	int last;              /* final action of its model */
	int needed;            /* required by the targets */
	int target;            /* materialized into the build directory */
	int state;
	int hit;
	Hash key;
	char *keytext;
	ActionRec rec;
	int have_rec;
	int borrowed;          /* rec's arrays belong to the build log */
	pid_t pid;
	int fd;
	size_t slot;           /* work directory while running (Build.slots) */
	StrBuf log;
	double start;
	struct timespec start_real;
	int tries;
	char *why;             /* reason it runs, for --explain and -n */
	char *pre;             /* its declared inputs' key lines, hashed ahead
				  (see prehash_child), or NULL */
	int ahead;             /* started before its key was known (start_ahead) */
	int keyfd;             /* then: the pipe that says the key is there (the
				  child's read end, the parent's write end) */
} Action;

typedef struct Build {
	Project *p;
	const BuildOpts *o;
	Cache *cache;
	StatCache *sc;
	BuildLog *log;
	Action **acts;
	size_t nacts;
	int visiting_depth;
	size_t total, done;
	int failed;
	int tty;
	/* Work directories cache/tmp/act-N (cache_workdir), one per action
	 * running at a time, claimed when first needed and reused by the
	 * actions that follow, then by later builds (each action empties it
	 * first): making and removing act-*, in/ and out/ for every action was
	 * a third of the inodes a small build allocated, and each removal
	 * waited for a discard. */
	char **slots;
	char *slot_busy;
	size_t nslots;
	struct Prehash *ph;    /* declared inputs being hashed ahead, or NULL */
	int ph_trust;          /* no command of this build may change them */
} Build;

static volatile sig_atomic_t got_signal;
static int sigpipe_w = -1;
static int sigpipe_r_fd = -1;

static void on_signal(int sig)
{
	got_signal = sig;
	if (sigpipe_w >= 0) {
		int e = errno;
		ssize_t r = write(sigpipe_w, "x", 1);
		(void)r;
		errno = e;
	}
}

static char *label(const Action *a)
{
	return xasprintf("%s:%s", a->model->name, a->stage->name);
}

/* ---- expansion ---- */

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

static const char **model_names(const Project *p)
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
			const char **names = model_names(b->p);
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
		a->keyfd = -1;
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

static int expand(Build *b)
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

static int mark(Build *b, int ntargets, char **targets)
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
			const char **names = model_names(b->p);
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

/* ---- keys ---- */

static int cmpstr(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

static int in_build_dir(const Build *b, const char *path);

/* The key lines of a's declared input files (sorted, each once): "file
 * HASH PATH". -1 when one cannot be listed or hashed; ahead (the prehash
 * child), 1 when one lies in the build directory. */
static int declared_lines(Build *b, const Action *a, StrBuf *sb, int ahead)
{
	char hex[HASH_HEX_LEN];
	PtrVec files = {0};
	int r = a->stage->declared_inputs(a->model, b->p->root, &files);
	for (size_t i = 0; r == 0 && ahead && i < files.n; i++)
		r = in_build_dir(b, files.v[i]);
	if (r == 0 && files.n > 1)
		qsort(files.v, files.n, sizeof *files.v, cmpstr);
	for (size_t i = 0; r == 0 && i < files.n; i++) {
		Hash h;
		if (i && !strcmp(files.v[i], files.v[i - 1]))
			continue;
		if (statcache_hash(b->sc, files.v[i], &h) < 0) {
			r = -1;
			break;
		}
		sb_puts(sb, "file ");
		sb_puts(sb, hash_hex(h, hex));
		sb_putc(sb, ' ');
		sb_puts(sb, files.v[i]);
		sb_putc(sb, '\n');
	}
	pv_free_all(&files);
	return r;
}

/* ---- declared inputs hashed ahead ----
 *
 * A later stage's declared inputs (calibrate's and verify's data: a
 * thousand .npz files, say) were hashed only once the stages before had
 * run, since the key also holds the input model's hash: a fresh
 * 1000-sample build spent 14-44 ms there, one core idle. A child process
 * forked at the start now lists and hashes them beside the first stages
 * and hands the stat cache's new entries over a pipe, with each action's
 * key lines. When a key needs them, the build takes the lines as they
 * are: stat-ing a thousand samples again cost 2-4 ms there. If an export
 * command of this build may have written them meanwhile (or they lie in
 * the build directory) the lines are not trusted and the files are
 * stat-ed again: the stat cache then finds the hash of each file that did
 * not change and hashes anew one that did. A process, not a thread: the
 * stages are forked meanwhile, and a fork must not catch another thread
 * holding a lock (a child of an ASan build waited forever for its
 * allocator). Errors are left to make_key, which reports them as before. */
typedef struct Prehash {
	pid_t pid;
	int fd;                /* the pipe's read end */
} Prehash;

/* is root-relative path inside the build directory (whose files this
 * build writes) */
static int in_build_dir(const Build *b, const char *path)
{
	const char *bd = b->o->build_dir;
	char *full = bd[0] == '/' ? path_join(b->p->root, path) : NULL;
	const char *p = full ? full : path;
	size_t n = strlen(bd);
	while (n > 1 && bd[n - 1] == '/')
		n--;
	int in = !strncmp(p, bd, n) && (p[n] == '/' || !p[n]);
	free(full);
	return in;
}

static void put_u64(StrBuf *sb, uint64_t v)
{
	sb_add(sb, &v, sizeof v);
}

static _Noreturn void prehash_child(Build *b, int fd)
{
	StrBuf lists = {0};
	for (size_t i = 0; i < b->nacts; i++) {
		const Action *a = b->acts[i];
		if (!a->needed || !a->in || !a->stage->declared_inputs)
			continue;
		StrBuf sb = {0};
		if (declared_lines(b, a, &sb, 1) == 0) {
			put_u64(&lists, i);
			put_u64(&lists, sb.len);
			sb_add(&lists, sb.buf, sb.len);
		}
		sb_release(&sb);
	}
	size_t len, off = 0;
	char *sc = statcache_fresh(b->sc, &len);
	StrBuf all = {0};
	put_u64(&all, len);
	sb_add(&all, sc, len);
	sb_add(&all, lists.buf, lists.len);
	while (off < all.len) {
		ssize_t n = write(fd, all.buf + off, all.len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(1);
		off += (size_t)n;
	}
	_exit(0);
}

/* start hashing the declared inputs of the needed actions that wait for
 * another action (the first stage's are hashed at once anyway); not with
 * -j1 or under make's jobserver, whose budget is one process at a time or
 * not ours */
static void prehash_start(Build *b)
{
	if (b->o->jobs < 2 || b->o->jobserver)
		return;
	int any = 0;
	for (size_t i = 0; i < b->nacts && !any; i++)
		any = b->acts[i]->needed && b->acts[i]->in && b->acts[i]->stage->declared_inputs;
	/* an export command may write what a later stage reads: then the
	 * files are checked again when the key needs them (see make_key) */
	b->ph_trust = 1;
	for (size_t i = 0; i < b->nacts; i++)
		if (b->acts[i]->needed && b->acts[i]->stage == &stage_export && sec_get(b->acts[i]->model, "export"))
			b->ph_trust = 0;
	int pfd[2];
	if (!any || pipe2(pfd, O_CLOEXEC) < 0)
		return;
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		close(pfd[0]);
		prehash_child(b, pfd[1]);
	}
	close(pfd[1]);
	if (pid < 0) {
		close(pfd[0]);
		return;
	}
	b->ph = xmalloc(sizeof *b->ph);
	*b->ph = (Prehash){pid, pfd[0]};
}

static int get_u64(const char **p, const char *end, uint64_t *v)
{
	if ((size_t)(end - *p) < sizeof *v)
		return -1;
	memcpy(v, *p, sizeof *v);
	*p += sizeof *v;
	return 0;
}

/* what prehash_child wrote: the stat cache's new entries, then each
 * action's key lines */
static void prehash_take(Build *b, const char *data, size_t len)
{
	const char *p = data, *end = data + len;
	uint64_t n, i;
	if (get_u64(&p, end, &n) < 0 || n > (size_t)(end - p) || statcache_merge(b->sc, p, n) < 0)
		return;
	p += n;
	while (get_u64(&p, end, &i) == 0 && get_u64(&p, end, &n) == 0 && i < b->nacts && n <= (size_t)(end - p)) {
		Action *a = b->acts[i];
		free(a->pre);
		a->pre = xstrndup(p, n);
		p += n;
	}
}

/* the hashes taken in (all, or none if the child failed) and the child
 * gone; with kill, it is stopped first (an interrupted build) */
static void prehash_finish(Build *b, int kill_it)
{
	Prehash *ph = b->ph;
	if (!ph)
		return;
	if (kill_it)
		kill(ph->pid, SIGKILL);
	StrBuf sb = {0};
	char buf[65536];
	ssize_t n;
	while (!kill_it && ((n = read(ph->fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)))
		if (n > 0)
			sb_add(&sb, buf, (size_t)n);
	close(ph->fd);
	int st;
	while (waitpid(ph->pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!kill_it && WIFEXITED(st) && WEXITSTATUS(st) == 0)
		prehash_take(b, sb.buf, sb.len);
	sb_release(&sb);
	free(ph);
	b->ph = NULL;
}

/* The canonical key text of a (ready) action; -1 on a bad declared input. */
static int make_key(Build *b, Action *a)
{
	StrBuf sb = {0};
	char hex[HASH_HEX_LEN], num[32];
	/* plain appends: this runs for every action of every no-op build */
	sb_puts(&sb, "quantmake-key 1\ntool " QM_VERSION "\nstage ");
	sb_puts(&sb, a->stage->name);
	snprintf(num, sizeof num, " %d\nmodel ", a->stage->version);
	sb_puts(&sb, num);
	sb_puts(&sb, a->model->name);
	sb_putc(&sb, '\n');
	for (const StageParam *p = a->stage->params; p->key; p++) {
		const char *v = stage_param_value(a->model, p->key);
		if (!v || !p->in_key)
			continue;
		sb_puts(&sb, "param ");
		sb_puts(&sb, p->key);
		sb_putc(&sb, '=');
		sb_puts(&sb, v);
		sb_putc(&sb, '\n');
	}
	if (a->stage->key_extra)
		a->stage->key_extra(a->model, &sb);
	if (a->in)
		for (size_t i = 0; i < a->in->rec.nouts; i++) {
			sb_puts(&sb, "input ");
			sb_puts(&sb, hash_hex(a->in->rec.outs[i].h, hex));
			sb_putc(&sb, ' ');
			sb_puts(&sb, a->in->rec.outs[i].name);
			sb_putc(&sb, '\n');
		}
	for (int k = 0; k < NAUX; k++)
		for (size_t i = 0; a->aux[k] && i < a->aux[k]->rec.nouts; i++) {
			sb_puts(&sb, aux_kind[k].key);
			sb_putc(&sb, ' ');
			sb_puts(&sb, hash_hex(a->aux[k]->rec.outs[i].h, hex));
			sb_putc(&sb, ' ');
			sb_puts(&sb, a->aux[k]->rec.outs[i].name);
			sb_putc(&sb, '\n');
		}
	if (a->stage->declared_inputs) {
		if (a->in)
			prehash_finish(b, 0);
		if (a->pre && b->ph_trust) {
			sb_puts(&sb, a->pre);
		} else if (declared_lines(b, a, &sb, 0) < 0) {
			sb_release(&sb);
			return -1;
		}
	}
	free(a->keytext);
	a->keytext = sb_detach(&sb);
	a->key = hash_buf(a->keytext, strlen(a->keytext));
	return 0;
}

/* Explain what differs between the last recorded key text and the new one. */
static char *explain(Build *b, const Action *a)
{
	LogEntry *e = buildlog_get(b->log, a->model->name, a->stage->name);
	if (!e)
		return xstrdup("no previous build of it recorded here");
	const char *old = e->rec.keytext;
	StrBuf sb = {0};
	char *save = NULL;
	/* lines of the new text missing from the old one: changed items */
	char *cur = xstrdup(a->keytext);
	for (char *l = strtok_r(cur, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char *needle = xasprintf("%s\n", l);
		int found = strstr(old, needle) != NULL || (strncmp(old, l, strlen(l)) == 0);
		free(needle);
		if (found)
			continue;
		const char *what = l;
		if (!strncmp(l, "param ", 6))
			sb_printf(&sb, "%sparameter %s", sb.len ? "; " : "", what + 6);
		else if (!strncmp(l, "file ", 5))
			sb_printf(&sb, "%sfile %s changed", sb.len ? "; " : "", what + 5 + 33);
		else if (!strncmp(l, "input ", 6))
			sb_printf(&sb, "%sinput %s changed", sb.len ? "; " : "", what + 6 + 33);
		else
			sb_printf(&sb, "%s%s changed", sb.len ? "; " : "", what);
	}
	free(cur);
	/* parameters that disappeared */
	cur = xstrdup(old);
	for (char *l = strtok_r(cur, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		if (strncmp(l, "param ", 6))
			continue;
		char *eq = strchr(l, '=');
		if (!eq)
			continue;
		char *prefix = xstrndup(l, (size_t)(eq - l + 1));
		if (!strstr(a->keytext, prefix))
			sb_printf(&sb, "%sparameter %.*s removed", sb.len ? "; " : "", (int)(eq - l - 6), l + 6);
		free(prefix);
	}
	free(cur);
	if (!sb.len)
		sb_puts(&sb, "inputs unchanged, but no cached result (evicted or never stored here)");
	return sb_detach(&sb);
}

static void remember(Build *b, const Action *a)
{
	if (!b->o->dry_run && a->have_rec)
		buildlog_put(b->log, a->model->name, a->stage->name, &a->rec);
}

/* A record is usable when its discovered deps are unchanged and every
 * output object is present. */
static int record_valid(Build *b, const ActionRec *r, char **why, int check_objects)
{
	for (size_t i = 0; i < r->ndeps; i++) {
		Hash h;
		if (statcache_hash(b->sc, r->deps[i].path, &h) < 0 || !hash_eq(h, r->deps[i].h)) {
			*why = xasprintf("file %s changed", r->deps[i].path);
			return 0;
		}
	}
	for (size_t i = 0; check_objects && i < r->nouts; i++) {
		char *p = cache_object_path(b->cache, r->outs[i].h);
		int ok = access(p, F_OK) == 0;
		free(p);
		if (!ok) {
			*why = xasprintf("output %s is missing from the cache", r->outs[i].name);
			return 0;
		}
	}
	return 1;
}

/* ---- GNU make jobserver (client side) ----
 * Under `make -jN`, MAKEFLAGS carries --jobserver-auth=R,W: every job beyond
 * our first needs a token read from R, written back when the job ends. R is
 * reopened through /proc so that our non-blocking reads do not change the
 * pipe's flags for make and its other children. */
static struct {
	int r, w;
	char held[1024];
	size_t nheld;
} js = {-1, -1, {0}, 0};

/* ---- running one action (in the child) ---- */

static int list_outputs(const char *dir, const char *rel, PtrVec *names)
{
	char *full = rel ? path_join(dir, rel) : xstrdup(dir);
	DIR *d = opendir(full);
	if (!d) {
		error("cannot read '%s':", full);
		free(full);
		return -1;
	}
	struct dirent *e;
	int r = 0;
	while (r == 0 && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char *name = rel ? path_join(rel, e->d_name) : xstrdup(e->d_name);
		char *p = path_join(dir, name);
		struct stat st;
		if (lstat(p, &st) < 0)
			r = error("cannot stat '%s':", p);
		else if (S_ISDIR(st.st_mode))
			r = list_outputs(dir, name, names);
		else if (S_ISREG(st.st_mode))
			pv_push(names, xstrdup(name));
		free(name);
		free(p);
	}
	closedir(d);
	free(full);
	return r;
}

/* Fetch the outputs of action src into dir (verifying their hashes), from
 * the one numbered from on (1: all but its main output); *first gets the path
 * of its main output. -2 when an object is corrupt or missing. */
static int fetch_outputs(Build *b, const Action *src, size_t from, const char *dir, char **first)
{
	for (size_t i = from; i < src->rec.nouts; i++) {
		const ActionOut *o = &src->rec.outs[i];
		char *dst = path_join(dir, o->name), *dd = path_dir(dst);
		int r = mkdirs(dd);
		if (r == 0)
			r = cache_fetch(b->cache, o->h, dst, 0444);
		if (r == 0 && i == 0)
			*first = xstrdup(dst);
		free(dst);
		free(dd);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Threads an action may use inside itself (the interpreter in calibrate and
 * verify): the -j budget shared among the models that still have work, so
 * one model built with -j4 calibrates on 4 threads and ten models on 1 each.
 * Under a make jobserver the budget is not ours to split: 1. */
static int action_threads(const Build *b)
{
	if (b->o->jobserver && js.r >= 0)
		return 1;
	/* a model's actions are contiguous in b->acts (expand_model) */
	size_t models = 0;
	const Section *last = NULL;
	for (size_t i = 0; i < b->nacts; i++) {
		const Action *x = b->acts[i];
		if (!x->needed || (x->state != A_PENDING && x->state != A_RUNNING) || x->model == last)
			continue;
		last = x->model;
		models++;
	}
	int t = models ? b->o->jobs / (int)models : b->o->jobs;
	return t < 1 ? 1 : t;
}

/* A failed action stores nothing in the cache, but what it wrote (verify's
 * report of the failed gates, say) is for the user to read: copy it to
 * build/<model>/failed/<stage>/, replacing an earlier failure's, built aside
 * and renamed so the directory appears complete. */
static void keep_failed(const Build *b, const Action *a, const char *outdir)
{
	PtrVec names = {0};
	if (list_outputs(outdir, NULL, &names) < 0 || names.n == 0) {
		pv_free_all(&names);
		return;
	}
	char *dst = xasprintf("%s/%s/failed/%s", b->o->build_dir, a->model->name, a->stage->name);
	char *tmp = xasprintf("%s.tmp%ld", dst, (long)getpid());
	int r = 0;
	for (size_t i = 0; i < names.n && r == 0; i++) {
		char *from = path_join(outdir, names.v[i]), *to = path_join(tmp, names.v[i]), *dd = path_dir(to);
		r = mkdirs(dd) < 0 || copy_file_atomic(from, to, 0644) < 0 ? -1 : 0;
		free(from);
		free(to);
		free(dd);
	}
	if (r == 0 && (rmtree(dst) < 0 || rename(tmp, dst) < 0))
		r = -1;
	if (r == 0)
		fprintf(stderr, "%s: %s %s: what the failed stage wrote is in %s/\n", argv0, a->stage->name,
			a->model->name, dst);
	else
		rmtree(tmp);
	free(tmp);
	free(dst);
	pv_free_all(&names);
}

/* Make DIR, or empty it if it exists: whatever an earlier action in the
 * same work directory left, a killed one included, is removed. */
static int fresh_dir(const char *dir)
{
	if (mkdir(dir, 0777) == 0)
		return 0;
	if (errno != EEXIST)
		return error("cannot create directory '%s':", dir);
	DIR *d = opendir(dir);
	if (!d)
		return error("cannot read '%s':", dir);
	struct dirent *e;
	int r = 0;
	while (r == 0 && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char *p = path_join(dir, e->d_name);
		r = rmtree(p);
		free(p);
	}
	closedir(d);
	return r;
}

/* The end of an action's child. What it did not move into the store
 * (outputs the store held already, its inputs' links, a failed stage's
 * files) goes now, not when the next action there starts: an idle work
 * directory holds nothing. */
enum { NUSED = 2 + NAUX }; /* a work directory's in/, out/ and aux kinds' */

static _Noreturn void child_exit(char *const used[NUSED], int code)
{
	for (int i = 0; i < NUSED; i++)
		if (used[i] && fresh_dir(used[i]) < 0)
			fprintf(stderr, "%s: %s\n", argv0, errmsg());
	_exit(code);
}

/* The action's lock, taken before its record is written: 0, or 1 when
 * another quantmake process has built it meanwhile. */
static int lock_action(Build *b, const Action *a, const char *lab, int *lock)
{
	*lock = cache_lock(b->cache, a->key);
	if (*lock < 0)
		fatalx(1, "%s: %s", lab, errmsg());
	ActionRec rec;
	if (!b->o->force && cache_get_action(b->cache, a->key, &rec) == 1) {
		action_rec_free(&rec);
		return 1;
	}
	return 0;
}

/* a child started ahead (start_ahead) waits here for its key, which the
 * parent writes to the work directory's file "key" before it says so on
 * the pipe; 0, or -1 when the parent found the action built (or died) */
static int await_key(Action *a, const char *tmp)
{
	char c;
	ssize_t n;
	while ((n = read(a->keyfd, &c, 1)) < 0 && errno == EINTR)
		;
	if (n != 1)
		return -1;
	char *p = path_join(tmp, "key"), *text;
	size_t len;
	int r = read_file(p, &text, &len);
	unlink(p);
	free(p);
	if (r < 0)
		return -1;
	a->keytext = text;
	a->key = hash_buf(text, len);
	return 0;
}

static _Noreturn void child_main(Build *b, Action *a)
{
	double t0 = now_sec();
	char *lab = label(a);
	int lock = -1;
	if (!a->ahead && lock_action(b, a, lab, &lock))
		_exit(0); /* built meanwhile by another quantmake process */
	const char *tmp = b->slots[a->slot];
	char *indir = path_join(tmp, "in"), *outdir = path_join(tmp, "out");
	char *used[NUSED] = {indir, outdir};
	if (fresh_dir(indir) < 0 || fresh_dir(outdir) < 0)
		fatalx(1, "%s: %s", lab, errmsg());
	for (int k = 0; k < NAUX; k++) {
		char *dir = path_join(tmp, aux_kind[k].dir);
		if (a->aux[k] ? fresh_dir(dir) : rmtree(dir))
			fatalx(1, "%s: %s", lab, errmsg());
		used[2 + k] = a->aux[k] ? dir : NULL;
		if (!a->aux[k])
			free(dir);
	}
	char *input = NULL, *auxmain[NAUX] = {NULL};
	int fr = a->in ? fetch_outputs(b, a->in, 0, indir, &input) : 0, code = EXIT_CORRUPT_INPUT;
	for (int k = 0; fr == 0 && k < NAUX; k++)
		if (a->aux[k]) {
			fr = fetch_outputs(b, a->aux[k], (size_t)aux_kind[k].files_only, used[2 + k],
					   &auxmain[k]);
			code = EXIT_CORRUPT_AUX + k;
		}
	if (fr < 0) {
		fprintf(stderr, "%s: %s: %s\n", argv0, lab, errmsg());
		child_exit(used, fr == -2 ? code : 1);
	}
	PtrVec deps = {0};
	char *output = xasprintf("%s/%s.onnx", outdir, a->model->name);
	StageCtx ctx = {
		.model = a->model->name,
		.root = b->p->root,
		.sec = a->model,
		.input = input,
		.reference = auxmain[AUX_REF],
		.side = used[2 + AUX_SIDE],
		.outdir = outdir,
		.output = output,
		.deps = &deps,
		.log = stderr,
		.threads = action_threads(b),
	};
	/* the inputs are links to immutable objects: a stage that keeps a
	 * data file as it is may link it into its output too */
	ext_allow_links(1);
	if (a->stage->run(&ctx) < 0) {
		fprintf(stderr, "%s: %s: %s\n", argv0, lab, errmsg());
		keep_failed(b, a, outdir);
		child_exit(used, 1);
	}
	if (access(output, F_OK) != 0) {
		fprintf(stderr, "%s: %s: the stage wrote no %s.onnx\n", argv0, lab, a->model->name);
		child_exit(used, 1);
	}
	PtrVec names = {0};
	if (list_outputs(outdir, NULL, &names) < 0) {
		fprintf(stderr, "%s: %s: %s\n", argv0, lab, errmsg());
		child_exit(used, 1);
	}
	if (names.n > 1)
		qsort(names.v, names.n, sizeof *names.v, cmpstr);
	/* the main model first */
	char *mainname = xasprintf("%s.onnx", a->model->name);
	for (size_t i = 0; i < names.n; i++)
		if (!strcmp(names.v[i], mainname)) {
			void *t = names.v[0];
			names.v[0] = names.v[i];
			names.v[i] = t;
			qsort(names.v + 1, names.n - 1, sizeof *names.v, cmpstr);
			break;
		}
	ActionRec r = {.stage = xstrdup(a->stage->name), .model = xstrdup(a->model->name)};
	r.outs = xcalloc(names.n, sizeof *r.outs);
	for (size_t i = 0; i < names.n; i++) {
		char *p = path_join(outdir, names.v[i]);
		if (cache_put_move(b->cache, p, &r.outs[i].h, &r.outs[i].size) < 0) {
			fprintf(stderr, "%s: %s: %s\n", argv0, lab, errmsg());
			child_exit(used, 1);
		}
		r.outs[i].name = names.v[i];
		r.nouts++;
		free(p);
	}
	r.deps = xcalloc(deps.n + 1, sizeof *r.deps);
	for (size_t i = 0; i < deps.n; i++) {
		r.deps[i].path = deps.v[i];
		if (hash_file(deps.v[i], &r.deps[i].h) < 0) {
			fprintf(stderr, "%s: %s: %s\n", argv0, lab, errmsg());
			child_exit(used, 1);
		}
		r.ndeps++;
	}
	/* started ahead: what it stored so far are objects, named by their
	 * contents; the record needs the key */
	if (a->ahead && (await_key(a, tmp) < 0 || lock_action(b, a, lab, &lock)))
		child_exit(used, 0);
	r.key = a->key;
	r.keytext = xstrdup(a->keytext);
	r.seconds = now_sec() - t0;
	if (cache_put_action(b->cache, &r) < 0) {
		fprintf(stderr, "%s: %s: %s\n", argv0, lab, errmsg());
		child_exit(used, 1);
	}
	cache_unlock(lock);
	fflush(NULL);
	child_exit(used, 0);
}

/* a free work directory for an action about to start, claimed from the
 * cache if this build holds none that is free */
static int take_slot(Build *b, Action *a)
{
	size_t i = 0;
	while (i < b->nslots && b->slot_busy[i])
		i++;
	if (i == b->nslots) {
		char *dir = cache_workdir(b->cache);
		if (!dir)
			return -1;
		b->slots = xreallocarray(b->slots, b->nslots + 1, sizeof *b->slots);
		b->slot_busy = xreallocarray(b->slot_busy, b->nslots + 1, 1);
		b->slots[b->nslots++] = dir;
	}
	b->slot_busy[i] = 1;
	a->slot = i;
	return 0;
}

static int start(Build *b, Action *a)
{
	if (take_slot(b, a) < 0)
		return -1;
	int pfd[2], kp[2] = {-1, -1};
	if (pipe2(pfd, O_CLOEXEC) < 0 || (a->ahead && pipe2(kp, O_CLOEXEC) < 0)) {
		b->slot_busy[a->slot] = 0;
		return error("cannot create a pipe:");
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		b->slot_busy[a->slot] = 0;
		close(pfd[0]);
		close(pfd[1]);
		if (a->ahead) {
			close(kp[0]);
			close(kp[1]);
		}
		return error("cannot fork:");
	}
	if (pid == 0) {
		/* another child's key pipe must not stay open here: it would
		 * never see the parent go */
		for (size_t i = 0; i < b->nacts; i++)
			if (b->acts[i]->keyfd >= 0)
				close(b->acts[i]->keyfd);
		if (a->ahead) {
			close(kp[1]);
			a->keyfd = kp[0];
		}
		setpgid(0, 0);
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		int devnull = open("/dev/null", O_RDONLY);
		if (devnull >= 0) {
			dup2(devnull, 0);
			close(devnull);
		}
		dup2(pfd[1], 1);
		dup2(pfd[1], 2);
		child_main(b, a);
	}
	setpgid(pid, pid);
	close(pfd[1]);
	if (a->ahead) {
		close(kp[0]);
		a->keyfd = kp[1];
	}
	a->pid = pid;
	a->fd = pfd[0];
	a->state = A_RUNNING;
	a->start = now_sec();
	clock_gettime(CLOCK_REALTIME, &a->start_real);
	if (b->tty) {
		/* a terminal shows what runs now on one line, replaced as it goes */
		printf("\r\033[K[%zu/%zu] %s %s ...", b->done, b->total, a->stage->name, a->model->name);
		fflush(stdout);
	}
	sb_reset(&a->log);
	return 0;
}

/* ---- scheduling ---- */

/* does d take a's outputs (as its model or another input)? */
static int takes_from(const Action *d, const Action *a)
{
	if (d->in == a)
		return 1;
	for (int k = 0; k < NAUX; k++)
		if (d->aux[k] == a)
			return 1;
	return 0;
}

/* are all of a's inputs built? */
static int inputs_done(const Action *a)
{
	if (a->in && a->in->state != A_DONE)
		return 0;
	for (int k = 0; k < NAUX; k++)
		if (a->aux[k] && a->aux[k]->state != A_DONE)
			return 0;
	return 1;
}

static void skip_downstream(Build *b, Action *a)
{
	for (size_t i = 0; i < b->nacts; i++) {
		Action *d = b->acts[i];
		if (takes_from(d, a) && d->state == A_PENDING) {
			d->state = A_SKIPPED;
			skip_downstream(b, d);
		}
	}
}

static void invalidate(Build *b, Action *a)
{
	char hex[HASH_HEX_LEN], *p;
	hash_hex(a->key, hex);
	p = xasprintf("%s/actions/%.2s/%s", cache_dir(b->cache), hex, hex);
	unlink(p);
	free(p);
	if (a->have_rec && !a->borrowed)
		action_rec_free(&a->rec);
	a->have_rec = a->borrowed = 0;
	a->state = A_PENDING;
	a->hit = 0;
	buildlog_drop(b->log, a->model->name, a->stage->name);
	if (b->done)
		b->done--;
}

/* Try to resolve a pending action whose input is done. Returns 1 when it
 * needs to run, 0 when resolved, -1 on a planning error (exit 2). */
static int resolve(Build *b, Action *a)
{
	if (make_key(b, a) < 0)
		return -1;
	free(a->why);
	a->why = NULL;
	if (b->o->force && a->tries == 0) {
		a->why = xstrdup("-B given");
		return 1;
	}
	char *why = NULL;
	LogEntry *e = buildlog_get(b->log, a->model->name, a->stage->name);
	if (e && hash_eq(e->rec.key, a->key) && record_valid(b, &e->rec, &why, 0)) {
		/* the fast path of a no-op: known from the build log */
		a->rec = e->rec; /* borrowed: the log outlives the build */
		a->borrowed = 1;
		a->have_rec = 1;
		a->hit = 1;
		a->state = A_DONE;
		b->done++;
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		if (now.tv_sec - e->touched > 3600) {
			cache_touch_action(b->cache, a->key);
			e->touched = now.tv_sec;
			buildlog_put(b->log, a->model->name, a->stage->name, &a->rec)->touched = now.tv_sec;
		}
		return 0;
	}
	free(why);
	why = NULL;
	ActionRec rec;
	int r = cache_get_action(b->cache, a->key, &rec);
	if (r == 1) {
		if (record_valid(b, &rec, &why, 1)) {
			a->rec = rec;
			a->have_rec = 1;
			a->hit = 1;
			a->state = A_DONE;
			b->done++;
			cache_touch_action(b->cache, a->key);
			remember(b, a);
			return 0;
		}
		action_rec_free(&rec);
		a->why = why;
		return 1;
	}
	a->why = explain(b, a);
	return 1;
}

/* the input of a whose object was corrupt or gone, by its child's exit
 * code, or NULL */
static Action *corrupt_input(const Action *a, int code)
{
	if (code == EXIT_CORRUPT_INPUT)
		return a->in;
	if (code >= EXIT_CORRUPT_AUX && code < EXIT_CORRUPT_AUX + NAUX)
		return a->aux[code - EXIT_CORRUPT_AUX];
	return NULL;
}

static void finish(Build *b, Action *a, int status)
{
	char *lab = label(a);
	double dt = now_sec() - a->start;
	a->pid = 0;
	b->slot_busy[a->slot] = 0;
	if (a->fd >= 0) {
		close(a->fd);
		a->fd = -1;
	}
	int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
	if (b->tty)
		fputs("\r\033[K", stdout);
	if (ok && cache_get_action(b->cache, a->key, &a->rec) == 1) {
		a->have_rec = 1;
		for (size_t i = 0; i < a->rec.ndeps; i++) {
			struct stat st;
			if (stat(a->rec.deps[i].path, &st) == 0 &&
			    (st.st_ctim.tv_sec < a->start_real.tv_sec ||
			     (st.st_ctim.tv_sec == a->start_real.tv_sec && st.st_ctim.tv_nsec < a->start_real.tv_nsec)))
				statcache_put(b->sc, a->rec.deps[i].path, a->rec.deps[i].h);
		}
		a->state = A_DONE;
		b->done++;
		remember(b, a);
		printf("[%zu/%zu] %s %s (%.2fs)\n", b->done, b->total, a->stage->name, a->model->name, dt);
		if (a->log.len)
			fputs(a->log.buf, stdout);
	} else if (WIFEXITED(status) && a->tries < 2 && corrupt_input(a, WEXITSTATUS(status))) {
		/* an input object was corrupt or gone: rebuild the action that made it */
		Action *up = corrupt_input(a, WEXITSTATUS(status));
		fputs(a->log.buf ? a->log.buf : "", stderr);
		fprintf(stderr, "%s: rebuilding %s:%s\n", argv0, up->model->name, up->stage->name);
		invalidate(b, up);
		up->tries++;
		a->state = A_PENDING;
		a->tries++;
	} else {
		a->state = A_FAILED;
		b->failed = 1;
		fflush(stdout);
		fprintf(stderr, "FAILED: %s %s\n", a->stage->name, a->model->name);
		if (a->log.len)
			fputs(a->log.buf, stderr);
		if (ok)
			fprintf(stderr, "%s: %s: the action ended without a cache record\n", argv0, lab);
		else if (WIFSIGNALED(status))
			fprintf(stderr, "%s: %s: killed by signal %d\n", argv0, lab, WTERMSIG(status));
		skip_downstream(b, a);
	}
	fflush(stdout);
	free(lab);
}

static void kill_all(Build *b, int sig)
{
	for (size_t i = 0; i < b->nacts; i++)
		if (b->acts[i]->state == A_RUNNING && b->acts[i]->pid > 0)
			kill(-b->acts[i]->pid, sig);
}

/* Copy the targets' outputs into the build directory. Returns 0, -1 on an
 * I/O error, 1 when a corrupt object invalidated an action (run again). */
static int materialize(Build *b)
{
	int again = 0;
	for (size_t i = 0; i < b->nacts; i++) {
		Action *a = b->acts[i];
		if (!a->target || a->state != A_DONE)
			continue;
		char *dir = a->last ? path_join(b->o->build_dir, a->model->name)
				    : xasprintf("%s/%s/%s", b->o->build_dir, a->model->name, a->stage->name);
		if (a->last) {
			/* the whole chain is built: an earlier failure's leftovers are stale */
			char *failed = path_join(dir, "failed");
			if (access(failed, F_OK) == 0)
				rmtree(failed);
			free(failed);
		}
		for (size_t j = 0; j < a->rec.nouts; j++) {
			const ActionOut *o = &a->rec.outs[j];
			char *dst = path_join(dir, o->name), *dd = path_dir(dst);
			Hash h;
			if (access(dst, F_OK) == 0 && statcache_hash(b->sc, dst, &h) == 0 && hash_eq(h, o->h)) {
				free(dst);
				free(dd);
				continue;
			}
			if (mkdirs(dd) < 0) {
				free(dst);
				free(dd);
				free(dir);
				return error_prefix("build directory");
			}
			int r = cache_fetch(b->cache, o->h, dst, 0644);
			if (r == -2) {
				fprintf(stderr, "%s: %s; rebuilding %s:%s\n", argv0, errmsg(), a->model->name, a->stage->name);
				invalidate(b, a);
				a->tries++;
				again = 1;
			} else if (r < 0) {
				free(dst);
				free(dd);
				free(dir);
				return -1;
			} else {
				statcache_put(b->sc, dst, o->h);
			}
			free(dst);
			free(dd);
			if (again)
				break;
		}
		free(dir);
	}
	return again;
}

/* ---- GNU make jobserver (client side) ----
 * The jobserver state (js) is declared before the action runner, which
 * reads it; its functions are here. */

int jobserver_open(void)
{
	const char *mf = getenv("MAKEFLAGS");
	const char *a = mf ? strstr(mf, "--jobserver-auth=") : NULL;
	if (!a && mf)
		a = strstr(mf, "--jobserver-fds=");
	if (!a)
		return 0;
	a = strchr(a, '=') + 1;
	int r, w;
	if (sscanf(a, "%d,%d", &r, &w) != 2 || fcntl(r, F_GETFD) < 0 || fcntl(w, F_GETFD) < 0)
		return 0; /* fifo: style or fds not passed to us (a non-recursive rule) */
	char path[64];
	snprintf(path, sizeof path, "/proc/self/fd/%d", r);
	js.r = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (js.r < 0)
		return 0;
	js.w = w;
	fcntl(w, F_SETFD, FD_CLOEXEC);
	return 1;
}

static int js_take(void)
{
	if (js.nheld >= sizeof js.held)
		return 0;
	char c;
	if (read(js.r, &c, 1) != 1)
		return 0;
	js.held[js.nheld++] = c;
	return 1;
}

static void js_give(void)
{
	if (js.nheld == 0)
		return;
	char c = js.held[--js.nheld];
	while (write(js.w, &c, 1) < 0 && errno == EINTR)
		;
}

static void js_give_all(void)
{
	while (js.nheld)
		js_give();
}

/* A fresh calibration's key waits for its samples' hashes (the prehash
 * child: a thousand files, 3-6 ms after export on the benchmark machine),
 * while its stage needs only its input model. So an action whose key
 * waits for the prehash and whose input was built in this run starts
 * ahead: its child runs the stage and stores its outputs' objects (named
 * by their contents), then waits for the key. Meanwhile the parent takes
 * the prehash's lines and makes the key; it writes the key to the work
 * directory's file "key" and a byte to the pipe, or, when the key finds
 * the action built (a cache hit) or fails, kills the child. Not for -n,
 * -B or --explain. -1 planning error, 0 not started ahead, 1 started (and
 * running), 2 done without its child. */
static int start_ahead(Build *b, Action *a)
{
	if (!b->ph || !a->stage->declared_inputs || !a->in || a->in->hit || a->tries || b->o->dry_run ||
	    b->o->force || b->o->explain)
		return 0;
	a->ahead = 1;
	if (start(b, a) < 0) {
		a->ahead = 0;
		return 0;
	}
	prehash_finish(b, 0);
	int r = resolve(b, a);
	if (r == 1) {
		char *p = path_join(b->slots[a->slot], "key");
		int w = write_file_atomic(p, a->keytext, strlen(a->keytext));
		free(p);
		if (w == 0) {
			/* a child whose stage failed has gone without reading
			 * it (EPIPE): its exit and log are reaped as any other's */
			ssize_t n = write(a->keyfd, "k", 1);
			(void)n;
			close(a->keyfd);
			a->keyfd = -1;
			a->ahead = 0; /* a rerun (a corrupt input rebuilt) starts plainly */
			return 1;
		}
		fprintf(stderr, "%s: %s: cannot hand its key over: %s\n", argv0, a->stage->name, errmsg());
	}
	/* built already, its key failed, or it could not be handed over:
	 * the child goes */
	kill(-a->pid, SIGKILL);
	int st;
	while (waitpid(a->pid, &st, 0) < 0 && errno == EINTR)
		;
	close(a->fd);
	close(a->keyfd);
	a->fd = a->keyfd = -1;
	a->pid = 0;
	a->ahead = 0;
	b->slot_busy[a->slot] = 0;
	if (r == 1) {
		a->state = A_FAILED;
		b->failed = 1;
	}
	return r < 0 ? -1 : 2;
}

/* -n: the actions taking a's outputs, directly or not, would run too */
static void would_run_downstream(Build *b, const Action *a)
{
	for (size_t j = 0; j < b->nacts; j++) {
		Action *d = b->acts[j];
		if (takes_from(d, a) && d->needed && d->state == A_PENDING) {
			d->state = A_SKIPPED;
			printf("would run %s %s: its input from %s changes\n", d->stage->name, d->model->name,
			       a->stage->name);
			would_run_downstream(b, d);
		}
	}
}

static int run_loop(Build *b)
{
	size_t running = 0;
	for (;;) {
		int progress = 0, want_token = 0;
		/* resolve and start what is ready */
		for (size_t i = 0; i < b->nacts && !got_signal; i++) {
			Action *a = b->acts[i];
			if (!a->needed || a->state != A_PENDING)
				continue;
			if (!inputs_done(a))
				continue;
			if (b->failed && !b->o->keep_going)
				continue;
			if (!a->keytext || !a->why) {
				int s = running < (size_t)b->o->jobs ? start_ahead(b, a) : 0;
				if (s < 0)
					return 2;
				if (s > 0) {
					running += s == 1;
					progress = 1;
					continue;
				}
				int r = resolve(b, a);
				if (r < 0)
					return 2;
				if (r == 0) {
					progress = 1;
					continue;
				}
			}
			if (b->o->dry_run) {
				printf("would run %s %s: %s\n", a->stage->name, a->model->name, a->why);
				a->state = A_DONE;
				a->have_rec = 0;
				b->done++;
				/* downstream keys depend on outputs we do not have */
				would_run_downstream(b, a);
				progress = 1;
				continue;
			}
			if (running >= (size_t)b->o->jobs)
				continue;
			if (b->o->jobserver && js.r >= 0 && running >= 1 && !js_take()) {
				want_token = 1;
				continue;
			}
			if (b->o->explain)
				printf("explain %s %s: %s\n", a->stage->name, a->model->name, a->why);
			if (start(b, a) < 0) {
				fprintf(stderr, "%s: %s\n", argv0, errmsg());
				a->state = A_FAILED;
				b->failed = 1;
				continue;
			}
			running++;
			progress = 1;
		}
		if (got_signal) {
			prehash_finish(b, 1);
			kill_all(b, SIGTERM);
			while (running > 0) {
				int st;
				pid_t pid = wait(&st);
				if (pid < 0 && errno == EINTR)
					continue;
				if (pid < 0)
					break;
				running--;
			}
			return 128 + got_signal;
		}
		if (running == 0) {
			if (progress)
				continue;
			break;
		}
		/* wait for output or exits */
		struct pollfd *pfds = xcalloc(running + 1, sizeof *pfds);
		Action **who = xcalloc(running + 1, sizeof *who);
		size_t n = 0;
		for (size_t i = 0; i < b->nacts; i++)
			if (b->acts[i]->state == A_RUNNING && b->acts[i]->fd >= 0) {
				pfds[n].fd = b->acts[i]->fd;
				pfds[n].events = POLLIN;
				who[n++] = b->acts[i];
			}
		pfds[n].fd = sigpipe_r_fd;
		pfds[n].events = POLLIN;
		size_t npfd = n + 1;
		if (want_token) {
			pfds = xreallocarray(pfds, n + 2, sizeof *pfds);
			pfds[n + 1].fd = js.r;
			pfds[n + 1].events = POLLIN;
			pfds[n + 1].revents = 0;
			npfd++;
		}
		int pr = poll(pfds, npfd, -1);
		if (pr < 0 && errno != EINTR) {
			free(pfds);
			free(who);
			return error("poll:"), 1;
		}
		for (size_t i = 0; pr > 0 && i < n; i++) {
			if (!(pfds[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			char buf[4096];
			ssize_t got = read(who[i]->fd, buf, sizeof buf);
			if (got > 0) {
				sb_add(&who[i]->log, buf, (size_t)got);
				continue;
			}
			if (got < 0 && errno == EINTR)
				continue;
			int st;
			while (waitpid(who[i]->pid, &st, 0) < 0 && errno == EINTR)
				;
			running--;
			if (running > 0 || js.nheld)
				js_give();
			finish(b, who[i], st);
		}
		free(pfds);
		free(who);
	}
	return 0;
}

static int setup(Build *b, Project *p, const BuildOpts *o, int ntargets, char **targets)
{
	memset(b, 0, sizeof *b);
	b->p = p;
	b->o = o;
	if (expand(b) < 0 || mark(b, ntargets, targets) < 0)
		return -1;
	return 0;
}

static void teardown(Build *b)
{
	prehash_finish(b, 1);
	for (size_t i = 0; i < b->nacts; i++) {
		Action *a = b->acts[i];
		if (a->have_rec && !a->borrowed)
			action_rec_free(&a->rec);
		free(a->keytext);
		free(a->why);
		free(a->pre);
		sb_release(&a->log);
		free(a);
	}
	free(b->acts);
	for (size_t i = 0; i < b->nslots; i++)
		free(b->slots[i]);
	free(b->slots);
	free(b->slot_busy);
}

int build_run(Project *p, const BuildOpts *o, int ntargets, char **targets)
{
	Build b;
	if (setup(&b, p, o, ntargets, targets) < 0) {
		fprintf(stderr, "%s: %s\n", argv0, errmsg());
		teardown(&b);
		return 2;
	}
	b.cache = cache_open(o->cache_dir);
	if (!b.cache) {
		fprintf(stderr, "%s: %s\n", argv0, errmsg());
		teardown(&b);
		return 2;
	}
	char *scpath = xasprintf("%s/.quantmake/statcache", o->build_dir);
	b.sc = statcache_open(scpath);
	free(scpath);
	char *logpath = xasprintf("%s/.quantmake/log", o->build_dir);
	b.log = buildlog_open(logpath);
	free(logpath);
	prehash_start(&b);
	for (size_t i = 0; i < b.nacts; i++)
		b.total += b.acts[i]->needed;
	b.tty = isatty(1) && !o->dry_run && getenv("CI") == NULL;
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC | O_NONBLOCK) < 0)
		fatalx(1, "cannot create a pipe:");
	sigpipe_r_fd = pfd[0];
	sigpipe_w = pfd[1];
	struct sigaction sa = {.sa_handler = on_signal};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	int status = 0;
	size_t ran_before = 0;
	for (int round = 0; round < 4; round++) {
		status = run_loop(&b);
		if (status || b.o->dry_run)
			break;
		int m = materialize(&b);
		if (m < 0) {
			fprintf(stderr, "%s: %s\n", argv0, errmsg());
			status = 1;
			break;
		}
		if (m == 0)
			break;
	}
	size_t ran = 0, hits = 0;
	for (size_t i = 0; i < b.nacts; i++) {
		ran += b.acts[i]->state == A_DONE && !b.acts[i]->hit && b.acts[i]->needed;
		hits += b.acts[i]->hit;
	}
	(void)ran_before;
	if (status == 0 && b.failed)
		status = 1;
	if (status == 0 && !o->dry_run && ran == 0)
		printf("%s: nothing to do: %zu actions up to date\n", argv0, hits);
	else if (status == 0 && o->dry_run && b.done == hits)
		printf("%s: nothing to do: %zu actions up to date\n", argv0, hits);
	if (status == 2)
		fprintf(stderr, "%s: %s\n", argv0, errmsg());
	else if (status > 128)
		fprintf(stderr, "%s: interrupted: stopped all actions; nothing partial was stored\n", argv0);
	if (getenv("QUANTMAKE_STATS"))
		fprintf(stderr, "%s: stats: %zu actions run, %zu cache hits, %ld files read for hashing\n",
			argv0, ran, hits, statcache_reads(b.sc));
	prehash_finish(&b, 0);
	if (statcache_save(b.sc) < 0)
		warn("%s", errmsg());
	js_give_all();
	if (buildlog_save(b.log) < 0)
		warn("%s", errmsg());
	buildlog_close(b.log);
	statcache_close(b.sc);
	cache_close(b.cache);
	close(pfd[0]);
	close(pfd[1]);
	sigpipe_w = -1;
	teardown(&b);
	return status;
}

int build_graph(Project *p, const BuildOpts *o, int ntargets, char **targets)
{
	Build b;
	if (setup(&b, p, o, ntargets, targets) < 0) {
		fprintf(stderr, "%s: %s\n", argv0, errmsg());
		teardown(&b);
		return 2;
	}
	printf("digraph quantmake {\n\trankdir=LR;\n");
	for (size_t i = 0; i < b.nacts; i++) {
		Action *a = b.acts[i];
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
	teardown(&b);
	return 0;
}
