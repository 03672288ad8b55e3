/* main.c — command line: subcommands and make-style build options. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "build.h"
#include "cache.h"
#include "hash.h"
#include "heap.h"
#include "remote.h"
#include "commands.h"
#include "rules/rules.h"
#include "stages/stage.h"
#include "util.h"

static int cmd_clean(int argc, char **argv);
static int cmd_hash(int argc, char **argv);
static int cmd_gc(int argc, char **argv);
static int cmd_fsck(int argc, char **argv);
static int cmd_graph(int argc, char **argv);
static int cmd_release_main(int argc, char **argv);
static int cmd_targets(int argc, char **argv);
static int cmd_keys(int argc, char **argv);
static int cmd_run_main(int argc, char **argv);
static int cmd_inspect_main(int argc, char **argv);
static int cmd_infer_shapes_main(int argc, char **argv);
static int cmd_preprocess_main(int argc, char **argv);
static int cmd_convert_main(int argc, char **argv);

static const struct {
	const char *name;
	int (*fn)(int, char **);
	const char *help;
} commands[] = {
	{"hash", cmd_hash, "hash FILE...             print XXH3-128 digests (as xxhsum -H2)"},
	{"clean", cmd_clean, "clean [--cache [--force]]   remove the build directory (and the cache; --force\n"
			     "                           for a cache outside the project, which others may share)"},
	{"gc", cmd_gc, "gc --max-size SIZE [--grace DURATION]\n"
		       "                           evict least recently used cache entries (not those used\n"
		       "                           within DURATION, default 10m, nor those being built)"},
	{"fsck", cmd_fsck, "fsck                     re-hash the cache; remove damaged objects and records"},
	{"graph", cmd_graph, "graph [TARGET...]        print the action graph (Graphviz dot)"},
	{"targets", cmd_targets, "targets                  list the targets: all, every model, every MODEL:STAGE"},
	{"keys", cmd_keys, "keys [--man]             list every rule-file key with its default and meaning"},
	{"run", cmd_run_main, "run MODEL [-i [NAME=]FILE]... [-d DIR] [-o OUT.npz] [--compare DIR] [--bench N] [-t N]\n"
			 "                           run a model (a file, or a model's built output) with the built-in interpreter"},
	{"inspect", cmd_inspect_main, "inspect MODEL [--json]   summarize an ONNX model (a file, or a model's built output)"},
	{"infer-shapes", cmd_infer_shapes_main, "infer-shapes IN OUT [--strict]   infer types and shapes"},
	{"preprocess", cmd_preprocess_main, "preprocess IN OUT [--passes LIST] [--opset N] [--fold-limit SIZE] [--no-infer]\n"
	 "                           infer shapes and simplify one model (the preprocess stage)"},
	{"convert", cmd_convert_main, "convert IN OUT [--external-data NAME] [--threshold BYTES] [--inline]\n"
				 "                           re-save a model, moving tensors to/from external data"},
	{"release", cmd_release_main, "release [--require-clean] [--require-git] [--force] [NAME...]\n"
				      "                           build and pack releases into dist/ (git-stamped); the build\n"
				      "                           options below apply, before or after 'release'"},
	{"verify-release", cmd_verify_release, "verify-release ARCHIVE    re-hash an archive against its MANIFEST.json"},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: quantmake [OPTION...] [TARGET...]\n"
		   "       quantmake [OPTION...] COMMAND [ARGS...]\n\n"
		   "targets: all (the default), MODEL, MODEL:STAGE (quantmake targets lists them)\n\n"
		   "options:\n"
		   "  -C DIR, --directory DIR  change to DIR first (else the project root is found\n"
		   "                           upward from the current directory, as git does)\n"
		   "  -f FILE, --file FILE     read this rule file instead of rules/*.rules\n"
		   "  -j N, --jobs N           run up to N actions at once (default: the CPUs, or\n"
		   "                           make's jobserver under make)\n"
		   "  -k, --keep-going         go on with the other models after a failure\n"
		   "  -n, --dry-run            print what would run, run nothing\n"
		   "  -B, --always-make        run every action again, ignoring the cache\n"
		   "  --explain                say why each action runs\n"
		   "  -q, --question           run nothing; exit 0 if every target is up to date, else 1\n"
		   "  -s, --silent             one line per action; a failed action's output in full\n"
		   "  --shard I/N              build shard I of N of the models (CI runners\n"
		   "                           sharing a remote cache)\n"
		   "  -h, --help               print this help\n"
		   "  --version                print the version\n\n"
		   "commands:\n");
	for (size_t i = 0; i < ARRAY_LEN(commands); i++)
		fprintf(f, "  %s\n", commands[i].help);
	fprintf(f, "\nexit status: 0 success, 1 a stage (or a verify gate) failed, 2 a usage or rule-file error\n");
}

/* Options shared by builds and project subcommands. */
static struct {
	const char *file;
	int jobs;
	int keep_going, dry_run, force, explain, question, silent;
	int chdir_given;  /* -C: the project is there, no search upward */
	int shard, shards;
} opt;

/* --shard I/N: shard I (1 to N) of N (1 to 1024) */
static void parse_shard(const char *s)
{
	char *end;
	long i = strtol(s, &end, 10), n = 0;
	if (end != s && *end == '/')
		n = strtol(end + 1, &end, 10);
	if (*end || n < 1 || n > 1024 || i < 1 || i > n)
		fatal("--shard expects I/N with 1 <= I <= N <= 1024 (such as 2/3), got '%s'", s);
	opt.shard = (int)i;
	opt.shards = (int)n;
}

static int parse_jobs(const char *s)
{
	char *end;
	long j = strtol(s, &end, 10);
	if (!*s || *end || j < 1 || j > 1024)
		fatal("-j expects a number from 1 to 1024, got '%s'", s);
	return (int)j;
}

static void change_dir(const char *d)
{
	if (chdir(d) < 0)
		fatal("cannot change to directory '%s':", d);
	opt.chdir_given = 1;
}

/* Take the build option at argv[*i] (and its argument) into opt: 1 when
 * it was one, 0 when not; a missing argument is fatal. The same options
 * are read before a subcommand that builds and after it. */
static int build_flag(int argc, char **argv, int *i)
{
	const char *a = argv[*i];
	if (!strcmp(a, "-C") || !strcmp(a, "-f") || !strcmp(a, "-j") || !strcmp(a, "--directory") ||
	    !strcmp(a, "--file") || !strcmp(a, "--jobs")) {
		if (*i + 1 >= argc)
			fatal("option %s needs an argument", a);
		const char *v = argv[++*i];
		char c = a[1] == '-' ? (a[2] == 'd' ? 'C' : a[2]) : a[1];
		if (c == 'C')
			change_dir(v);
		else if (c == 'f')
			opt.file = v;
		else
			opt.jobs = parse_jobs(v);
	} else if (!strncmp(a, "-j", 2) && a[2]) {
		opt.jobs = parse_jobs(a + 2);
	} else if (!strncmp(a, "-C", 2) && a[2]) {
		change_dir(a + 2);
	} else if (!strcmp(a, "-k") || !strcmp(a, "--keep-going")) {
		opt.keep_going = 1;
	} else if (!strcmp(a, "-n") || !strcmp(a, "--dry-run")) {
		opt.dry_run = 1;
	} else if (!strcmp(a, "-B") || !strcmp(a, "--always-make")) {
		opt.force = 1;
	} else if (!strcmp(a, "--explain")) {
		opt.explain = 1;
	} else if (!strcmp(a, "-q") || !strcmp(a, "--question")) {
		opt.question = 1;
	} else if (!strcmp(a, "-s") || !strcmp(a, "--silent") || !strcmp(a, "--quiet")) {
		opt.silent = 1;
	} else if (!strcmp(a, "--shard") || !strncmp(a, "--shard=", 8)) {
		const char *v = a[7] == '=' ? a + 8 : *i + 1 < argc ? argv[++*i] : NULL;
		if (!v)
			fatal("option --shard needs an argument I/N");
		parse_shard(v);
	} else {
		return 0;
	}
	return 1;
}

/* Under make, the flags make was given reach us in MAKEFLAGS, whose first
 * word holds its one-letter options ("kn -j4 --jobserver-auth=3,4"): a
 * dry run, keep going, silent and question apply to the models as to
 * make's own recipes. (-B is not taken: `make -B` remakes the Makefile's
 * targets; rebuilding every model is asked for with quantmake -B.) */
static void make_flags(void)
{
	const char *mf = getenv("MAKEFLAGS");
	if (!mf || !*mf || *mf == '-' || *mf == ' ')
		return;
	for (const char *c = mf; *c && *c != ' '; c++) {
		if (*c == 'n')
			opt.dry_run = 1;
		else if (*c == 'k')
			opt.keep_going = 1;
		else if (*c == 's')
			opt.silent = 1;
		else if (*c == 'q')
			opt.question = 1;
	}
}

/* does dir/rules hold a *.rules file? */
static int has_rules(const char *dir)
{
	char *r = path_join(dir, "rules");
	DIR *d = opendir(r);
	free(r);
	if (!d)
		return 0;
	struct dirent *e;
	int found = 0;
	while (!found && (e = readdir(d))) {
		size_t n = strlen(e->d_name);
		found = n > 6 && !strcmp(e->d_name + n - 6, ".rules");
	}
	closedir(d);
	return found;
}

/* The project root: the current directory with -C or -f, else the nearest
 * directory upward holding rules/NAME.rules (as git finds its work tree);
 * the current directory when none does (rules_load then says what is
 * missing). malloc'd. */
static char *project_root(void)
{
	char cwd[PATH_MAX];
	if (!getcwd(cwd, sizeof cwd))
		fatal("cannot read the current directory:");
	if (opt.file || opt.chdir_given || has_rules(cwd))
		return xstrdup(cwd);
	char *d = xstrdup(cwd);
	for (;;) {
		char *slash = strrchr(d, '/');
		if (!slash)
			break;
		slash[slash == d ? 1 : 0] = 0;
		if (has_rules(d))
			return d;
		if (!strcmp(d, "/"))
			break;
	}
	free(d);
	return xstrdup(cwd);
}

/* the names a model cannot take: they are targets or subcommands */
static const char *reserved_name(const char *name);

static Project *load_project(void)
{
	char *root = project_root();
	char cwd[PATH_MAX];
	if (getcwd(cwd, sizeof cwd) && strcmp(cwd, root)) {
		/* as make -C: paths in messages are the root's */
		if (chdir(root) < 0)
			fatal("cannot change to directory '%s':", root);
		fprintf(stderr, "%s: entering directory '%s'\n", argv0, root);
	}
	Project *p;
	if (rules_load(root, opt.file, &p) < 0)
		fatal("%s", errmsg());
	free(root);
	for (size_t i = 0; i < p->nmodels; i++) {
		const Section *m = p->models[i];
		const char *what = reserved_name(m->name);
		if (what)
			fatal("%s:%d: model name '%s' is reserved: it is %s; rename the model", m->file, m->line,
			      m->name, what);
	}
	return p;
}


/* Resolve the cache and build directories: QUANTMAKE_CACHE, then the
 * cache setting, then cache/ at the project root. */
static void dirs(Project *p, BuildOpts *o)
{
	const char *env = getenv("QUANTMAKE_CACHE");
	const char *set = sec_get(&p->settings, "cache");
	o->cache_dir = env && *env ? env : set ? set : "cache";
	o->remote = NULL; /* builds ask remote_opts */
	const char *bd = sec_get(&p->settings, "build-dir");
	o->build_dir = bd ? bd : "build";
	const char *j = sec_get(&p->settings, "jobs");
	o->jobs = opt.jobs > 0 ? opt.jobs : j ? atoi(j) : ncpus();
	/* under make -jN without our own -j, make's jobserver sets the pace */
	o->jobserver = opt.jobs == 0 && jobserver_open();
	if (o->jobserver) {
		o->jobs = 1024;
	} else if (opt.jobs == 0 && getenv("MAKEFLAGS") && strstr(getenv("MAKEFLAGS"), "--jobserver-")) {
		/* make runs in parallel, but did not hand its jobserver to this
		 * recipe: make says the same of its own sub-makes */
		warn("make's jobserver is not available to this recipe (put '+' before quantmake in the "
		     "Makefile to share make's -j); using -j%d",
		     o->jobs);
	}
	o->keep_going = opt.keep_going;
	o->dry_run = opt.dry_run;
	o->force = opt.force;
	o->explain = opt.explain;
	o->question = opt.question;
	o->silent = opt.silent;
	if (o->question)
		o->dry_run = 1;
	o->shard = opt.shard;
	o->shards = opt.shards;
}

/* The remote cache a build uses (o->remote), or none: QUANTMAKE_REMOTE_CACHE
 * (a URL, or "off"), then the remote-cache setting; the mode from
 * QUANTMAKE_REMOTE_CACHE_MODE, then remote-cache.mode. Only builds ask
 * (clean and gc need no credentials). A bad value exits 2, naming where it
 * was set. */
static void remote_opts(Project *p, BuildOpts *o)
{
	static RemoteOpts ro;
	const KV *url = sec_find(&p->settings, "remote-cache");
	const KV *mode = sec_find(&p->settings, "remote-cache.mode");
	const KV *auth = sec_find(&p->settings, "remote-cache.auth-env");
	const KV *tmo = sec_find(&p->settings, "remote-cache.timeout");
	const char *env = getenv("QUANTMAKE_REMOTE_CACHE");
	o->remote = NULL;
	if (env && *env) {
		if (!strcmp(env, "off"))
			return;
		/* credentials in the URL are the environment's to hold */
		if (remote_url_check(env, 1) < 0)
			fatal("QUANTMAKE_REMOTE_CACHE: %s", errmsg());
		ro.url = env;
	} else if (url) {
		ro.url = url->value;
	} else {
		return;
	}
	const char *m = getenv("QUANTMAKE_REMOTE_CACHE_MODE");
	if (m && *m && strcmp(m, "read-write") && strcmp(m, "read-only"))
		fatal("QUANTMAKE_REMOTE_CACHE_MODE = '%s' is not valid: expected read-write or read-only", m);
	if (!(m && *m))
		m = mode ? mode->value : "read-write";
	ro.read_only = !strcmp(m, "read-only");
	ro.timeout = tmo ? atol(tmo->value) : 10;
	ro.header = NULL;
	if (auth) {
		const char *h = getenv(auth->value);
		if (!h || !*h)
			fatal("%s:%d: remote-cache.auth-env names %s, which is not set: export it (an HTTP header "
			      "such as 'Authorization: Bearer TOKEN') or remove the setting",
			      auth->file, auth->line, auth->value);
		if (remote_header_check(h) < 0)
			fatal("%s:%d: remote-cache.auth-env: the variable %s: %s", auth->file, auth->line, auth->value,
			      errmsg());
		ro.header = h;
	}
	o->remote = &ro;
}

/* is dir (existing) outside the project at the current directory: a
 * cache other clones or branches may share */
static int outside_project(const char *dir)
{
	char *d = realpath(dir, NULL), *root = realpath(".", NULL);
	size_t n = root ? strlen(root) : 0;
	int out = d && root && !(strncmp(d, root, n) == 0 && (d[n] == '/' || d[n] == 0));
	free(d);
	free(root);
	return out;
}

static int cmd_clean(int argc, char **argv)
{
	int cache = 0, force = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--cache")) {
			cache = 1;
		} else if (!strcmp(argv[i], "--force")) {
			force = 1;
		} else {
			fprintf(stderr, "usage: quantmake clean [--cache [--force]]\n");
			return 2;
		}
	}
	Project *p = load_project();
	BuildOpts o;
	dirs(p, &o);
	if (cache && !force && access(o.cache_dir, F_OK) == 0 && outside_project(o.cache_dir)) {
		fprintf(stderr,
			"%s: the cache '%s' lies outside this project, so other clones or branches may share it: "
			"give --force to remove it anyway, or use gc --max-size to trim it\n",
			argv0, o.cache_dir);
		project_free(p);
		return 1;
	}
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

/* quantmake targets: what can be built, one per line, as ninja -t targets */
static int cmd_targets(int argc, char **argv)
{
	if (argc > 1) {
		fprintf(stderr, "usage: quantmake targets\n");
		return 2;
	}
	Project *p = load_project();
	BuildOpts o;
	dirs(p, &o);
	printf("all: every model\n");
	for (size_t i = 0; i < p->nmodels; i++) {
		const Section *m = p->models[i];
		printf("%s: model (%s/%s/%s.onnx)\n", m->name, o.build_dir, m->name, m->name);
		for (size_t k = 0; stage_table[k]; k++)
			if (stage_table[k]->wanted(m))
				printf("%s:%s: stage\n", m->name, stage_table[k]->name);
	}
	project_free(p);
	return 0;
}

/* one key of `quantmake keys`: plain, or a man page .TP entry */
static void key_line(int man, const char *sect, const char *key, const char *values, const char *dflt,
		     const char *help)
{
	if (!man) {
		printf("%s  (%s%s%s%s%s)\n    %s\n", key, sect, dflt ? "; default " : "", dflt ? dflt : "",
		       values ? "; one of " : "", values ? values : "", help);
		return;
	}
	/* troff: a backslash is \e, a leading dot or quote needs \& */
	StrBuf sb = {0};
	sb_printf(&sb, ".TP\n.B %s\n(%s", key, sect);
	if (dflt)
		sb_printf(&sb, "; default %s", dflt);
	if (values) {
		sb_puts(&sb, "; ");
		for (const char *v = values; *v; v++)
			sb_puts(&sb, *v == '|' ? ", " : (char[]){*v, 0});
	}
	sb_puts(&sb, ")\n");
	for (const char *h = help; *h; h++)
		sb_puts(&sb, *h == '\\' ? "\\e" : (char[]){*h, 0});
	fwrite(sb.buf, 1, sb.len, stdout);
	putchar('\n');
	sb_release(&sb);
}

/* quantmake keys [--man]: every rule-file key, from the tables the rule
 * files are checked against (the man page's RULE KEYS is this output) */
static int cmd_keys(int argc, char **argv)
{
	int man = argc == 2 && !strcmp(argv[1], "--man");
	if (argc > 2 || (argc == 2 && !man)) {
		fprintf(stderr, "usage: quantmake keys [--man]\n");
		return 2;
	}
	for (const RuleKeyDoc *d = rules_settings_doc; d->key; d++)
		key_line(man, "[settings]", d->key, NULL, d->dflt, d->help);
	for (size_t i = 0; stage_table[i]; i++)
		for (const StageParam *q = stage_table[i]->params; q->key; q++) {
			char *sect = xasprintf("[model], %s stage", stage_table[i]->name);
			key_line(man, sect, q->key, q->kind == PARAM_ENUM ? q->values : NULL, q->dflt, q->help);
			free(sect);
		}
	for (const RuleKeyDoc *d = rules_release_doc; d->key; d++)
		key_line(man, "[release]", d->key, NULL, d->dflt, d->help);
	return 0;
}

/* The model argument of run and inspect: a file as given, or, when no
 * such file exists and the project has a model of that name, its built
 * output (build/MODEL/MODEL.onnx, from the project root found as for a
 * build). NULL with a message when the model is not built yet. */
static char *model_arg(const char *arg)
{
	struct stat st;
	if (stat(arg, &st) == 0 || strchr(arg, '/'))
		return xstrdup(arg);
	char *root = project_root();
	if (opt.file || !has_rules(root)) {
		free(root);
		return xstrdup(arg);
	}
	char cwd[PATH_MAX] = "";
	Project *p = NULL;
	int loaded = getcwd(cwd, sizeof cwd) && chdir(root) == 0 && rules_load(root, NULL, &p) == 0;
	if (cwd[0] && chdir(cwd) < 0)
		fatal("cannot change to directory '%s':", cwd);
	char *out = NULL;
	if (loaded && project_model(p, arg)) {
		BuildOpts o;
		dirs(p, &o);
		char *bd = o.build_dir[0] == '/' ? xstrdup(o.build_dir) : path_join(root, o.build_dir);
		out = xasprintf("%s/%s/%s.onnx", bd, arg, arg);
		free(bd);
		if (stat(out, &st) < 0) {
			fprintf(stderr, "%s: model '%s' is not built yet (no %s): run 'quantmake %s' first\n", argv0, arg,
				out, arg);
			free(out);
			out = NULL;
		}
	} else {
		out = xstrdup(arg);
	}
	project_free(p);
	free(root);
	return out;
}

/* run the subcommand fn with its first positional argument (after
 * options taking values, listed in valued) turned into a model path (IN
 * of infer-shapes, preprocess and convert, MODEL of run and inspect) */
static int with_model_arg(int (*fn)(int, char **), const char *const *valued, int argc, char **argv)
{
	int i;
	for (i = 1; i < argc; i++) {
		if (argv[i][0] != '-' || !argv[i][1])
			break;
		for (size_t k = 0; valued[k]; k++)
			if (!strcmp(argv[i], valued[k]))
				i++;
	}
	struct stat st;
	if (i >= argc || stat(argv[i], &st) == 0)
		return fn(argc, argv);
	char *path = model_arg(argv[i]);
	if (!path)
		return 2;
	char **v = xcalloc((size_t)argc + 1, sizeof *v);
	memcpy(v, argv, (size_t)argc * sizeof *v);
	v[i] = path;
	int r = fn(argc, v);
	free(path);
	free(v);
	return r;
}

static int cmd_run_main(int argc, char **argv)
{
	static const char *const valued[] = {"-i", "--input", "-s", "--samples", "-d", "-o", "--compare", "--rtol",
					     "--atol", "--bench", "-t", "--threads", NULL};
	return with_model_arg(cmd_run, valued, argc, argv);
}

static int cmd_inspect_main(int argc, char **argv)
{
	static const char *const valued[] = {NULL};
	return with_model_arg(cmd_inspect, valued, argc, argv);
}

static int cmd_infer_shapes_main(int argc, char **argv)
{
	static const char *const valued[] = {"--skip", NULL};
	return with_model_arg(cmd_infer_shapes, valued, argc, argv);
}

static int cmd_preprocess_main(int argc, char **argv)
{
	static const char *const valued[] = {"--passes", "--opset", "--fold-limit", NULL};
	return with_model_arg(cmd_preprocess, valued, argc, argv);
}

static int cmd_convert_main(int argc, char **argv)
{
	static const char *const valued[] = {"--external-data", "--threshold", NULL};
	return with_model_arg(cmd_convert, valued, argc, argv);
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
	/* the build options may follow the subcommand (quantmake release -n) */
	char **rest = xcalloc((size_t)argc + 1, sizeof *rest);
	int n = 0;
	for (int i = 0; i < argc; i++)
		if (i == 0 || !build_flag(argc, argv, &i))
			rest[n++] = argv[i];
	Project *p = load_project();
	BuildOpts o;
	dirs(p, &o);
	remote_opts(p, &o);
	int r = cmd_release(p, &o, n, rest);
	project_free(p);
	free(rest);
	return r;
}

static const char *reserved_name(const char *name)
{
	if (!strcmp(name, "all"))
		return "the target of every model";
	for (size_t c = 0; c < ARRAY_LEN(commands); c++)
		if (!strcmp(name, commands[c].name))
			return "a quantmake subcommand";
	return NULL;
}

int main(int argc, char **argv)
{
	int i;
	heap_init();
	make_flags(); /* the command line, read next, wins */
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "--version")) {
			printf("quantmake %s\n", QM_VERSION);
			return 0;
		} else if (build_flag(argc, argv, &i)) {
			continue;
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
	remote_opts(p, &o);
	/* a directory that cannot be made is reported by the build, which
	 * says what it needed it for */
	(void)(mkdir_ignored(o.build_dir) + mkdir_ignored(o.cache_dir));
	int r = build_run(p, &o, argc - i, argv + i);
	project_free(p);
	return r;
}
