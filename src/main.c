/* main.c — command line: subcommands and make-style build options. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "build.h"
#include "cache.h"
#include "hash.h"
#include "heap.h"
#include "commands.h"
#include "rules/rules.h"
#include "util.h"

static int cmd_clean(int argc, char **argv);
static int cmd_hash(int argc, char **argv);
static int cmd_gc(int argc, char **argv);
static int cmd_fsck(int argc, char **argv);
static int cmd_graph(int argc, char **argv);
static int cmd_release_main(int argc, char **argv);

static const struct {
	const char *name;
	int (*fn)(int, char **);
	const char *help;
} commands[] = {
	{"hash", cmd_hash, "hash FILE...             print XXH3-128 digests (as xxhsum -H2)"},
	{"clean", cmd_clean, "clean [--cache]          remove the build directory (and the cache)"},
	{"gc", cmd_gc, "gc --max-size SIZE [--grace DURATION]\n"
		       "                           evict least recently used cache entries (not those used\n"
		       "                           within DURATION, default 10m, nor those being built)"},
	{"fsck", cmd_fsck, "fsck                     re-hash the cache; remove damaged objects and records"},
	{"graph", cmd_graph, "graph [TARGET...]        print the action graph (Graphviz dot)"},
	{"run", cmd_run, "run MODEL [-i [NAME=]FILE]... [-d DIR] [-o OUT.npz] [--compare DIR] [--bench N] [-t N]\n"
			 "                           run a model with the built-in interpreter"},
	{"inspect", cmd_inspect, "inspect MODEL [--json]   summarize an ONNX model"},
	{"infer-shapes", cmd_infer_shapes, "infer-shapes IN OUT [--strict]   infer types and shapes"},
	{"preprocess", cmd_preprocess, "preprocess IN OUT [--passes LIST] [--opset N] [--fold-limit SIZE] [--no-infer]\n"
	 "                           infer shapes and simplify one model (the preprocess stage)"},
	{"convert", cmd_convert, "convert IN OUT [--external-data NAME] [--threshold BYTES] [--inline]\n"
				 "                           re-save a model, moving tensors to/from external data"},
	{"release", cmd_release_main, "release [--require-clean] [--require-git] [NAME...]\n"
				      "                           build and pack releases into dist/ (git-stamped)"},
	{"verify-release", cmd_verify_release, "verify-release ARCHIVE    re-hash an archive against its MANIFEST.json"},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: quantmake [-C DIR] [-f FILE] [-j N] [-k] [-n] [-B] [--explain] [TARGET...]\n"
		   "       quantmake COMMAND [ARGS...]\n\ncommands:\n");
	for (size_t i = 0; i < ARRAY_LEN(commands); i++)
		fprintf(f, "  %s\n", commands[i].help);
}

/* Options shared by builds and project subcommands. */
static struct {
	const char *file;
	int jobs;
	int keep_going, dry_run, force, explain;
} opt;

static Project *load_project(void)
{
	char cwd[PATH_MAX];
	if (!getcwd(cwd, sizeof cwd))
		fatal("cannot read the current directory:");
	Project *p;
	if (rules_load(cwd, opt.file, &p) < 0)
		fatal("%s", errmsg());
	return p;
}

/* Resolve the cache and build directories: QUANTMAKE_CACHE, then the
 * cache setting, then cache/ at the project root. */
static void dirs(Project *p, BuildOpts *o)
{
	const char *env = getenv("QUANTMAKE_CACHE");
	const char *set = sec_get(&p->settings, "cache");
	o->cache_dir = env && *env ? env : set ? set : "cache";
	const char *bd = sec_get(&p->settings, "build-dir");
	o->build_dir = bd ? bd : "build";
	const char *j = sec_get(&p->settings, "jobs");
	o->jobs = opt.jobs > 0 ? opt.jobs : j ? atoi(j) : ncpus();
	/* under make -jN without our own -j, make's jobserver sets the pace */
	o->jobserver = opt.jobs == 0 && jobserver_open();
	if (o->jobserver)
		o->jobs = 1024;
	o->keep_going = opt.keep_going;
	o->dry_run = opt.dry_run;
	o->force = opt.force;
	o->explain = opt.explain;
}

static int cmd_clean(int argc, char **argv)
{
	int cache = argc > 1 && !strcmp(argv[1], "--cache");
	if (argc > 2 || (argc == 2 && !cache)) {
		fprintf(stderr, "usage: quantmake clean [--cache]\n");
		return 2;
	}
	Project *p = load_project();
	BuildOpts o;
	dirs(p, &o);
	int r = rmtree(o.build_dir);
	if (r == 0)
		printf("removed %s/\n", o.build_dir);
	if (r == 0 && cache) {
		r = rmtree(o.cache_dir);
		if (r == 0)
			printf("removed %s/\n", o.cache_dir);
	}
	if (r < 0)
		fprintf(stderr, "%s: %s\n", argv0, errmsg());
	project_free(p);
	return r < 0 ? 1 : 0;
}

/* seconds in a duration like 90, 30s, 10m, 2h, 7d; -1 if malformed */
static int64_t parse_duration(const char *s)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || end == s || v < 0)
		return -1;
	int64_t mul = !*end ? 1 : !strcmp(end, "s") ? 1 : !strcmp(end, "m") ? 60 : !strcmp(end, "h") ? 3600
		    : !strcmp(end, "d") ? 86400 : -1;
	return mul < 0 || v > INT64_MAX / mul ? -1 : v * mul;
}

static Cache *open_project_cache(Project **pp)
{
	Project *p = load_project();
	BuildOpts o;
	dirs(p, &o);
	Cache *c = cache_open(o.cache_dir);
	if (!c)
		fatal("%s", errmsg());
	*pp = p;
	return c;
}

static int cmd_gc(int argc, char **argv)
{
	int64_t max = -1, grace = 600;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--max-size") && i + 1 < argc) {
			max = parse_size(argv[++i]);
			if (max < 0) {
				fprintf(stderr, "%s: invalid size '%s': expected a number with an optional K, M, G or T suffix\n",
					argv0, argv[i]);
				return 2;
			}
		} else if (!strcmp(argv[i], "--grace") && i + 1 < argc) {
			grace = parse_duration(argv[++i]);
			if (grace < 0) {
				fprintf(stderr, "%s: invalid duration '%s': expected seconds or a number with s, m, h or d\n",
					argv0, argv[i]);
				return 2;
			}
		} else {
			max = -1;
			break;
		}
	}
	if (max < 0) {
		fprintf(stderr, "usage: quantmake gc --max-size SIZE [--grace DURATION]   (SIZE like 500M, 10G; DURATION like 10m, 0)\n");
		return 2;
	}
	Project *p;
	Cache *c = open_project_cache(&p);
	CacheGcStats st;
	int r = cache_gc(c, max, grace, &st);
	if (r < 0)
		fprintf(stderr, "%s: %s\n", argv0, errmsg());
	else
		printf("gc: removed %zu actions and %zu objects (%lld bytes); cache holds %lld bytes\n",
		       st.actions_removed, st.objects_removed, (long long)st.bytes_freed, (long long)st.bytes_left);
	if (r == 0 && st.kept_recent + st.kept_busy)
		printf("gc: kept %zu entries used in the last %llds (--grace) and %zu being built\n", st.kept_recent,
		       (long long)grace, st.kept_busy);
	cache_close(c);
	project_free(p);
	return r < 0 ? 1 : 0;
}

static int cmd_fsck(int argc, char **argv)
{
	if (argc != 1) {
		fprintf(stderr, "usage: quantmake fsck\n");
		return 2;
	}
	Project *p;
	Cache *c = open_project_cache(&p);
	CacheFsckStats st;
	int r = cache_fsck(c, &st);
	if (r < 0)
		fprintf(stderr, "%s: %s\n", argv0, errmsg());
	else
		printf("fsck: %zu objects checked, %zu damaged and removed; %zu action records checked, %zu damaged or "
		       "dangling and removed\n",
		       st.objects, st.objects_damaged, st.actions, st.actions_damaged);
	cache_close(c);
	project_free(p);
	return r < 0 ? 1 : (st.objects_damaged || st.actions_damaged) ? 1 : 0;
}

static int cmd_hash(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: quantmake hash FILE...\n");
		return 2;
	}
	int r = 0;
	for (int i = 1; i < argc; i++) {
		Hash h;
		char hex[HASH_HEX_LEN];
		if (hash_file(argv[i], &h) < 0) {
			fprintf(stderr, "%s: %s\n", argv0, errmsg());
			r = 1;
			continue;
		}
		printf("%s  %s\n", hash_hex(h, hex), argv[i]);
	}
	return r;
}

static int cmd_graph(int argc, char **argv)
{
	Project *p = load_project();
	BuildOpts o;
	dirs(p, &o);
	int r = build_graph(p, &o, argc - 1, argv + 1);
	project_free(p);
	return r;
}

static int cmd_release_main(int argc, char **argv)
{
	Project *p = load_project();
	BuildOpts o;
	dirs(p, &o);
	int r = cmd_release(p, &o, argc, argv);
	project_free(p);
	return r;
}

static int parse_jobs(const char *s)
{
	char *end;
	long j = strtol(s, &end, 10);
	if (!*s || *end || j < 1 || j > 1024)
		fatal("-j expects a number from 1 to 1024, got '%s'", s);
	return (int)j;
}

int main(int argc, char **argv)
{
	int i;
	heap_init();
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "--version")) {
			printf("quantmake %s\n", QM_VERSION);
			return 0;
		} else if (!strcmp(a, "-C") || !strcmp(a, "-f") || !strcmp(a, "-j")) {
			if (i + 1 >= argc)
				fatal("option %s needs an argument", a);
			const char *v = argv[++i];
			if (a[1] == 'C' && chdir(v) < 0)
				fatal("cannot change to directory '%s':", v);
			if (a[1] == 'f')
				opt.file = v;
			if (a[1] == 'j')
				opt.jobs = parse_jobs(v);
		} else if (!strncmp(a, "-j", 2) && a[2]) {
			opt.jobs = parse_jobs(a + 2);
		} else if (!strncmp(a, "-C", 2) && a[2]) {
			if (chdir(a + 2) < 0)
				fatal("cannot change to directory '%s':", a + 2);
		} else if (!strcmp(a, "-k") || !strcmp(a, "--keep-going")) {
			opt.keep_going = 1;
		} else if (!strcmp(a, "-n") || !strcmp(a, "--dry-run")) {
			opt.dry_run = 1;
		} else if (!strcmp(a, "-B") || !strcmp(a, "--always-make")) {
			opt.force = 1;
		} else if (!strcmp(a, "--explain")) {
			opt.explain = 1;
		} else if (!strcmp(a, "--")) {
			i++;
			break;
		} else if (a[0] == '-') {
			fprintf(stderr, "%s: unknown option '%s'\n", argv0, a);
			usage(stderr);
			return 2;
		} else {
			break;
		}
	}
	if (i < argc)
		for (size_t c = 0; c < ARRAY_LEN(commands); c++)
			if (!strcmp(argv[i], commands[c].name)) {
				return commands[c].fn(argc - i, argv + i);
			}
	Project *p = load_project();
	BuildOpts o;
	dirs(p, &o);
	int r = build_run(p, &o, argc - i, argv + i);
	project_free(p);
	return r;
}
