/* export.c — the first stage of every model: run the project's export
 * command (`export = CMD`), take an ONNX file as it is (`source = PATH`), or
 * take another model's output (`source = @MODEL`). The result is checked to
 * be a loadable ONNX model; external data files travel with it. */
#include <errno.h>
#include <glob.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "onnx/extdata.h"
#include "onnx/model.h"
#include "rules/rules.h"
#include "stages/stage.h"

static const StageParam params[] = {
	{"source", PARAM_TEXT, NULL, NULL, 0,
	 "ONNX file taken as it is (project-relative), or @MODEL for another model's output"},
	{"export", PARAM_TEXT, NULL, NULL, 1,
	 "shell command that writes the model to $out (runs in the project root)"},
	{"export.deps", PARAM_LIST, NULL, NULL, 0,
	 "files and globs the export command reads; their contents are part of the key"},
	{"export.env", PARAM_LIST, NULL, NULL, 1,
	 "NAME=VALUE pairs added to the export command's environment"},
	{NULL, 0, NULL, NULL, 0, NULL},
};

static int wanted(const Section *sec)
{
	(void)sec;
	return 1;
}

/* a path of key (set in sec) must stay inside the project */
static int check_relative(const Section *sec, const char *key, const char *path)
{
	const KV *kv = sec_find(sec, key);
	if (path_outside(path))
		return error("%s:%d: model '%s': %s '%s' leaves the project: use a path inside the project",
			     kv ? kv->file : sec->file, kv ? kv->line : sec->line, sec->name, key, path);
	return 0;
}

static int declared_inputs(const Section *sec, const char *root, PtrVec *files)
{
	const char *src = sec_get(sec, "source");
	if (src && src[0] != '@') {
		if (check_relative(sec, "source", src) < 0)
			return -1;
		char *full = path_join(root, src);
		struct stat st;
		int ok = stat(full, &st) == 0 && S_ISREG(st.st_mode);
		int in = !ok || path_resolves_inside(root, full);
		free(full);
		const KV *kv = sec_find(sec, "source");
		if (!ok)
			return error("%s:%d: model '%s': source '%s' does not exist", kv->file, kv->line,
				     sec->name, src);
		if (!in)
			return error("%s:%d: model '%s': source '%s' leads outside the project through a "
				     "symbolic link: use a file inside the project", kv->file, kv->line, sec->name, src);
		pv_push(files, xstrdup(src));
	}
	const char *deps = sec_get(sec, "export.deps");
	if (!deps)
		return 0;
	const KV *kv = sec_find(sec, "export.deps");
	PtrVec pats = {0};
	split_words(deps, &pats);
	int r = 0;
	for (size_t i = 0; i < pats.n; i++) {
		const char *pat = pats.v[i];
		if (r == 0 && check_relative(sec, "export.deps", pat) < 0)
			r = -1;
		if (r == 0 && !strpbrk(pat, "*?[")) {
			/* a plain path: no need for glob() */
			struct stat st;
			char *full = path_join(root, pat);
			int ok = stat(full, &st) == 0 && S_ISREG(st.st_mode);
			if (ok && !path_resolves_inside(root, full))
				r = error("%s:%d: model '%s': export.deps '%s' leads outside the project through a "
					  "symbolic link", kv->file, kv->line, sec->name, pat);
			else if (ok)
				pv_push(files, xstrdup(pat));
			else
				r = error("%s:%d: model '%s': export.deps '%s' does not exist", kv->file, kv->line,
					  sec->name, pat);
			free(full);
		} else if (r == 0) {
			char *full = path_join(root, pat);
			glob_t g;
			int gr = glob(full, GLOB_NOSORT, NULL, &g);
			size_t skip = strlen(root) + 1;
			if (gr == 0) {
				for (size_t j = 0; r == 0 && j < g.gl_pathc; j++) {
					struct stat st;
					if (stat(g.gl_pathv[j], &st) != 0 || !S_ISREG(st.st_mode))
						continue;
					if (!path_resolves_inside(root, g.gl_pathv[j]))
						r = error("%s:%d: model '%s': export.deps '%s' leads outside the "
							  "project through a symbolic link", kv->file, kv->line,
							  sec->name, g.gl_pathv[j] + skip);
					else
						pv_push(files, xstrdup(g.gl_pathv[j] + skip));
				}
				globfree(&g);
			} else {
				r = error("%s:%d: model '%s': export.deps '%s' matches no file", kv->file,
					  kv->line, sec->name, pat);
			}
			free(full);
		}
		free(pats.v[i]);
	}
	pv_free(&pats);
	return r;
}

/* Copy model src to dst together with the external data files it
 * references (same relative names beside dst). Adds the external files to
 * deps as root-relative paths when rel_dir is not NULL. Data files are
 * copied in the kernel (copy_file_range); another model's output (a store
 * object, read-only) is hard-linked, but a project's own file never is:
 * the store must not change when the user edits it. */
static int copy_model(const char *src, const char *dst, const char *rel_dir, PtrVec *deps)
{
	Model *m;
	if (rel_dir)
		ext_allow_links(0);
	if (model_load_view(src, &m) < 0)
		return -1;
	int r = copy_file_atomic(src, dst, 0644);
	char *sdir = path_dir(src), *ddir = path_dir(dst);
	PtrVec seen = {0};
	const Onnx__GraphProto *g = m->proto->graph;
	for (size_t i = 0; r == 0 && i < g->n_initializer; i++) {
		const Onnx__TensorProto *t = g->initializer[i];
		if (!t->has_data_location || t->data_location != ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
			continue;
		for (size_t k = 0; k < t->n_external_data; k++) {
			const char *key = t->external_data[k]->key, *loc = t->external_data[k]->value;
			if (!key || !loc || strcmp(key, "location"))
				continue;
			int dup = 0;
			for (size_t j = 0; j < seen.n; j++)
				dup |= !strcmp(seen.v[j], loc);
			if (dup)
				continue;
			if (loc[0] == '/' || strstr(loc, "..")) {
				r = error("model '%s': external data location '%s' leaves its directory", src, loc);
				break;
			}
			pv_push(&seen, (void *)loc);
			char *from = path_join(sdir, loc), *to = path_join(ddir, loc);
			if (access(from, F_OK) == 0 && !path_resolves_inside(sdir, from)) {
				r = error("model '%s': external data location '%s' leads outside the model's "
					  "directory through a symbolic link", src, loc);
				free(from);
				free(to);
				break;
			}
			char *todir = path_dir(to);
			r = mkdirs(todir);
			if (r == 0)
				r = ext_copy_file(from, to);
			if (r == 0 && rel_dir && deps)
				pv_push(deps, path_join(rel_dir, loc));
			free(from);
			free(to);
			free(todir);
		}
	}
	pv_free(&seen);
	free(sdir);
	free(ddir);
	model_free(m);
	return r;
}

static int run_command(StageCtx *c, const char *cmd)
{
	PtrVec files = {0};
	if (declared_inputs(c->sec, c->root, &files) < 0)
		return -1;
	StrBuf deps = {0};
	for (size_t i = 0; i < files.n; i++) {
		if (i)
			sb_putc(&deps, ' ');
		sb_puts(&deps, files.v[i]);
		free(files.v[i]);
	}
	pv_free(&files);
	PtrVec env = {0};
	const char *ev = sec_get(c->sec, "export.env");
	if (ev)
		split_words(ev, &env);
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		sb_release(&deps);
		return error("cannot start export command:");
	}
	if (pid == 0) {
		if (chdir(c->root) < 0)
			_exit(127);
		setenv("out", c->output, 1);
		setenv("outdir", c->outdir, 1);
		setenv("deps", deps.buf ? deps.buf : "", 1);
		setenv("model", c->model, 1);
		for (size_t i = 0; i < env.n; i++) {
			char *kv = env.v[i], *eq = strchr(kv, '=');
			if (eq) {
				*eq = 0;
				setenv(kv, eq + 1, 1);
			}
		}
		dup2(2, 1); /* the command's stdout goes to the captured log too */
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	for (size_t i = 0; i < env.n; i++)
		free(env.v[i]);
	pv_free(&env);
	sb_release(&deps);
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return error("waiting for export command:");
	if (WIFSIGNALED(status))
		return error("export command of model '%s' was killed by signal %d", c->model, WTERMSIG(status));
	if (WEXITSTATUS(status) != 0)
		return error("export command of model '%s' failed with exit status %d", c->model,
			     WEXITSTATUS(status));
	if (access(c->output, F_OK) != 0)
		return error("export command of model '%s' succeeded but wrote no file to $out", c->model);
	Model *m;
	if (model_load_view(c->output, &m) < 0)
		return error_prefix("export command of model '%s' wrote a bad $out", c->model);
	model_free(m);
	return 0;
}

static int run(StageCtx *c)
{
	const char *src = sec_get(c->sec, "source");
	const char *cmd = sec_get(c->sec, "export");
	if (cmd)
		return run_command(c, cmd);
	if (src && src[0] == '@')
		return copy_model(c->input, c->output, NULL, NULL);
	char *full = path_join(c->root, src), *reldir = path_dir(src);
	int r = copy_model(full, c->output, reldir, c->deps);
	free(full);
	free(reldir);
	return r;
}

/* an export command may write any file of the project */
static int writes_project(const struct Section *sec)
{
	return sec_get(sec, "export") != NULL;
}

const Stage stage_export = {
	.name = "export",
	.version = 1,
	.params = params,
	.wanted = wanted,
	.declared_inputs = declared_inputs,
	.run = run,
	.writes_project = writes_project,
};
