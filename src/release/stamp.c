/* stamp.c — the git state a release is stamped with, read with libgit2:
 * HEAD's commit and committer time, `git describe --tags --always`, which
 * tracked files differ from HEAD and which files git does not track.
 *
 * The branch is not read: a branch is a movable name, not a property of the
 * commit, and a release of one commit is the same bytes from any branch,
 * clone or detached checkout.
 *
 * Dirtiness: tracked files modified in the index or the work tree (as
 * `git describe --dirty`) make every release dirty; an untracked file (not
 * ignored) makes a release dirty only when it enters it (cmd.c compares
 * the release's inputs with Stamp.untracked). */
#include "release/release.h"

#include <git2.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static const char *git_msg(void)
{
	const git_error *e = git_error_last();
	return e && e->message ? e->message : "unknown libgit2 error";
}

static void set_unknown(Stamp *s)
{
	s->in_git = 0;
	s->commit = xstrdup("unknown");
	s->shortc = xstrdup("unknown");
	s->describe = xstrdup("unknown");
	s->dirty = 0;
	s->commit_time = 0;
}

static int cmpstr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* the project root relative to the work tree ("" when they are the same),
 * or NULL when root is not inside it */
static char *root_prefix(const char *workdir, const char *root)
{
	char w[PATH_MAX], r[PATH_MAX];
	if (!realpath(workdir, w) || !realpath(root, r))
		return NULL;
	size_t n = strlen(w);
	while (n > 1 && w[n - 1] == '/')
		w[--n] = 0;
	if (!strcmp(w, r))
		return xstrdup("");
	if (strncmp(w, r, n) || r[n] != '/')
		return NULL;
	return xasprintf("%s/", r + n + 1);
}

static int read_status(git_repository *repo, const char *prefix, Stamp *s)
{
	git_status_options so;
	git_status_options_init(&so, GIT_STATUS_OPTIONS_VERSION);
	so.show = GIT_STATUS_SHOW_INDEX_AND_WORKDIR;
	so.flags = GIT_STATUS_OPT_EXCLUDE_SUBMODULES | GIT_STATUS_OPT_INCLUDE_UNTRACKED |
		   GIT_STATUS_OPT_RECURSE_UNTRACKED_DIRS;
	git_status_list *st;
	if (git_status_list_new(&st, repo, &so) < 0)
		return error("cannot read the git status: %s", git_msg());
	size_t n = git_status_list_entrycount(st);
	PtrVec mod = {0}, unt = {0};
	size_t plen = strlen(prefix);
	for (size_t i = 0; i < n; i++) {
		const git_status_entry *e = git_status_byindex(st, i);
		if (!e || e->status == GIT_STATUS_CURRENT || (e->status & GIT_STATUS_IGNORED))
			continue;
		const git_diff_delta *d = e->index_to_workdir ? e->index_to_workdir : e->head_to_index;
		const char *path = d ? (d->new_file.path ? d->new_file.path : d->old_file.path) : NULL;
		int untracked = e->status == GIT_STATUS_WT_NEW;
		if (!untracked)
			s->dirty = 1;
		if (path && !strncmp(path, prefix, plen))
			pv_push(untracked ? &unt : &mod, xstrdup(path + plen));
	}
	git_status_list_free(st);
	if (mod.n)
		qsort(mod.v, mod.n, sizeof *mod.v, cmpstr);
	if (unt.n)
		qsort(unt.v, unt.n, sizeof *unt.v, cmpstr);
	s->modified = (char **)mod.v;
	s->nmodified = mod.n;
	s->untracked = (char **)unt.v;
	s->nuntracked = unt.n;
	return 0;
}

int stamp_read(const char *root, Stamp *s, char **why)
{
	memset(s, 0, sizeof *s);
	*why = NULL;
	git_libgit2_init();
	git_repository *repo = NULL;
	git_reference *head = NULL;
	git_commit *commit = NULL;
	git_describe_result *desc = NULL;
	git_buf buf = {0};
	int r = git_repository_open_ext(&repo, root, 0, NULL);
	if (r == GIT_ENOTFOUND) {
		set_unknown(s);
		*why = xasprintf("'%s' is not in a git repository", root);
		git_libgit2_shutdown();
		return 0;
	}
	if (r < 0) {
		error("cannot open the git repository of '%s': %s", root, git_msg());
		git_libgit2_shutdown();
		return -1;
	}
	int ret = -1;
	const char *workdir = git_repository_workdir(repo);
	char *prefix = workdir ? root_prefix(workdir, root) : NULL;
	if (!prefix) {
		error("git repository of '%s' has no work tree holding the project", root);
		goto out;
	}
	r = git_repository_head(&head, repo);
	if (r == GIT_EUNBORNBRANCH || r == GIT_ENOTFOUND) {
		set_unknown(s);
		*why = xasprintf("the git repository of '%s' has no commit yet", root);
		ret = 0;
		goto out;
	}
	if (r < 0) {
		error("cannot read HEAD of the git repository of '%s': %s", root, git_msg());
		goto out;
	}
	const git_oid *oid = git_reference_target(head);
	git_reference *resolved = NULL;
	if (!oid) {
		if (git_reference_resolve(&resolved, head) < 0) {
			error("cannot resolve HEAD: %s", git_msg());
			goto out;
		}
		oid = git_reference_target(resolved);
	}
	if (git_commit_lookup(&commit, repo, oid) < 0) {
		git_reference_free(resolved);
		error("cannot read the commit HEAD points to: %s", git_msg());
		goto out;
	}
	git_reference_free(resolved);
	char hex[GIT_OID_HEXSZ + 1];
	git_oid_tostr(hex, sizeof hex, git_commit_id(commit));
	s->in_git = 1;
	s->commit = xstrdup(hex);
	s->shortc = xstrndup(hex, 7);
	s->commit_time = (int64_t)git_commit_time(commit);
	if (read_status(repo, prefix, s) < 0)
		goto out;
	git_describe_options dopts;
	git_describe_options_init(&dopts, GIT_DESCRIBE_OPTIONS_VERSION);
	dopts.describe_strategy = GIT_DESCRIBE_TAGS;
	dopts.show_commit_oid_as_fallback = 1;
	if (git_describe_commit(&desc, (git_object *)commit, &dopts) < 0) {
		error("git describe failed: %s", git_msg());
		goto out;
	}
	git_describe_format_options fopts;
	git_describe_format_options_init(&fopts, GIT_DESCRIBE_FORMAT_OPTIONS_VERSION);
	fopts.abbreviated_size = 7;
	if (git_describe_format(&buf, desc, &fopts) < 0) {
		error("git describe failed: %s", git_msg());
		goto out;
	}
	s->describe = xstrdup(buf.ptr);
	ret = 0;
out:
	if (ret < 0)
		stamp_free(s);
	git_buf_dispose(&buf);
	git_describe_result_free(desc);
	git_commit_free(commit);
	git_reference_free(head);
	git_repository_free(repo);
	free(prefix);
	git_libgit2_shutdown();
	return ret;
}

void stamp_free(Stamp *s)
{
	free(s->commit);
	free(s->shortc);
	free(s->describe);
	for (size_t i = 0; i < s->nmodified; i++)
		free(s->modified[i]);
	free(s->modified);
	for (size_t i = 0; i < s->nuntracked; i++)
		free(s->untracked[i]);
	free(s->untracked);
	memset(s, 0, sizeof *s);
}
