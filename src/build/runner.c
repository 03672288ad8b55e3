/* runner.c — one action in a child process (see action.h).
 *
 * The child takes the action's lock (a second quantmake process building
 * the same action waits, then finds the record), fetches its inputs from
 * the store into its work directory (each verified on the way), runs the
 * stage into out/, moves every output into the store and writes the
 * action record. Its exit status says how it ended (CHILD_*). */
#include "build/action.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx/extdata.h"

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
 * of its main output. CACHE_GONE when an object is corrupt or missing. */
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
int runner_threads(const Build *b)
{
	if (b->o->jobserver && js_active())
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

/* The action's lock, taken before the stage runs, so that a second
 * quantmake process building the same action waits for the first and then
 * finds its record: 0, or 1 when a valid record (its objects present) is
 * there already. */
static int lock_action(Build *b, const Action *a, const char *lab, int *lock)
{
	*lock = cache_lock(b->cache, a->key);
	if (*lock < 0)
		fatalx(CHILD_FAILED, "%s: %s", lab, errmsg());
	ActionRec rec;
	int found = 0;
	if (!b->o->force && cache_get_action(b->cache, a->key, &rec) == 1) {
		char *why = NULL;
		found = key_record_valid(b, &rec, &why, 1);
		free(why);
		action_rec_free(&rec);
	}
	return found;
}

static _Noreturn void child_main(Build *b, Action *a)
{
	double t0 = now_sec();
	char *lab = action_label(a);
	int lock = -1;
	if (lock_action(b, a, lab, &lock))
		_exit(CHILD_FOUND);
	const char *tmp = b->slots[a->slot];
	char *indir = path_join(tmp, "in"), *outdir = path_join(tmp, "out");
	char *used[NUSED] = {indir, outdir};
	if (fresh_dir(indir) < 0 || fresh_dir(outdir) < 0)
		fatalx(CHILD_FAILED, "%s: %s", lab, errmsg());
	int ask = rc_asks(b);
	if (ask && !b->o->force) {
		int r = rc_lookup(b, a, outdir);
		if (r == REMOTE_FOUND) {
			cache_unlock(lock);
			fflush(NULL);
			child_exit(used, CHILD_REMOTE);
		}
		/* a server that failed is not asked again by this child; one
		 * that served a bad entry or blob gets a good one */
		ask = r == REMOTE_MISSING || r == REMOTE_EBAD;
	}
	for (int k = 0; k < NAUX; k++) {
		char *dir = path_join(tmp, aux_kind[k].dir);
		if (a->aux[k] ? fresh_dir(dir) : rmtree(dir))
			fatalx(CHILD_FAILED, "%s: %s", lab, errmsg());
		used[2 + k] = a->aux[k] ? dir : NULL;
		if (!a->aux[k])
			free(dir);
	}
	char *input = NULL, *auxmain[NAUX] = {NULL};
	int fr = a->in ? fetch_outputs(b, a->in, 0, indir, &input) : 0, code = CHILD_CORRUPT_INPUT;
	for (int k = 0; fr == 0 && k < NAUX; k++)
		if (a->aux[k]) {
			fr = fetch_outputs(b, a->aux[k], (size_t)aux_kind[k].files_only, used[2 + k],
					   &auxmain[k]);
			code = CHILD_CORRUPT_AUX + k;
		}
	if (fr < 0) {
		fprintf(stderr, "%s: %s: %s\n", argv0, lab, errmsg());
		child_exit(used, fr == CACHE_GONE ? code : CHILD_FAILED);
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
		.threads = runner_threads(b),
	};
	/* the inputs are links to immutable objects: a stage that keeps a
	 * data file as it is may link it into its output too */
	ext_allow_links(1);
	if (a->stage->run(&ctx) < 0) {
		fprintf(stderr, "%s: %s: %s\n", argv0, lab, errmsg());
		keep_failed(b, a, outdir);
		child_exit(used, CHILD_FAILED);
	}
	if (access(output, F_OK) != 0) {
		fprintf(stderr, "%s: %s: the stage wrote no %s.onnx\n", argv0, lab, a->model->name);
		child_exit(used, CHILD_FAILED);
	}
	PtrVec names = {0};
	if (list_outputs(outdir, NULL, &names) < 0) {
		fprintf(stderr, "%s: %s: %s\n", argv0, lab, errmsg());
		child_exit(used, CHILD_FAILED);
	}
	pv_sort_str(&names);
	/* the main model first, the others in name order */
	char *mainname = xasprintf("%s.onnx", a->model->name);
	for (size_t i = 0; i < names.n; i++)
		if (!strcmp(names.v[i], mainname)) {
			char *m = names.v[i];
			memmove(names.v + 1, names.v, i * sizeof *names.v);
			names.v[0] = m;
			break;
		}
	ActionRec r = {.stage = xstrdup(a->stage->name), .model = xstrdup(a->model->name)};
	r.outs = xcalloc(names.n, sizeof *r.outs);
	for (size_t i = 0; i < names.n; i++) {
		char *p = path_join(outdir, names.v[i]);
		if (cache_put_move(b->cache, p, &r.outs[i].h, &r.outs[i].size) < 0) {
			fprintf(stderr, "%s: %s: %s\n", argv0, lab, errmsg());
			child_exit(used, CHILD_FAILED);
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
			child_exit(used, CHILD_FAILED);
		}
		r.ndeps++;
	}
	r.key = a->key;
	r.keytext = xstrdup(a->keytext);
	r.seconds = now_sec() - t0;
	if (cache_put_action(b->cache, &r) < 0) {
		fprintf(stderr, "%s: %s: %s\n", argv0, lab, errmsg());
		child_exit(used, CHILD_FAILED);
	}
	cache_unlock(lock);
	if (ask && !remote_read_only(b->remote))
		rc_upload(b, a, &r);
	fflush(NULL);
	child_exit(used, CHILD_BUILT);
}

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

int runner_start(Build *b, Action *a)
{
	if (take_slot(b, a) < 0)
		return -1;
	rc_clear(b, a);
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		b->slot_busy[a->slot] = 0;
		return error("cannot create a pipe:");
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		b->slot_busy[a->slot] = 0;
		close(pfd[0]);
		close(pfd[1]);
		return error("cannot fork:");
	}
	if (pid == 0) {
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
	a->pid = pid;
	a->fd = pfd[0];
	a->state = A_RUNNING;
	a->start = now_sec();
	clock_gettime(CLOCK_REALTIME, &a->start_real);
	if (b->tty) {
		/* a terminal shows what runs now on one line, replaced as it goes */
		printf("\r\033[K[%zu/%zu] %s %s ...", b->ran + 1, b->total - b->hits, a->stage->name, a->model->name);
		fflush(stdout);
	}
	sb_reset(&a->log);
	return 0;
}

