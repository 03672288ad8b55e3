/* build.h — actions, the dependency graph and the scheduler.
 *
 * Each model expands into a chain of actions, one per stage it runs (see
 * stages/stage.h). An action's key hashes the stage name and version, the
 * canonical parameters, the content hashes of every input and the tool
 * version — never a path outside the project, a time or a git revision — so
 * two clones or branches with the same inputs share every cache hit.
 * Keys are computed as inputs resolve, so an upstream rebuild that yields the
 * same bytes stops there (early cutoff). */
#ifndef QM_BUILD_H
#define QM_BUILD_H

#include "remote.h"
#include "rules/rules.h"

typedef struct BuildOpts {
	int jobs;          /* parallel actions */
	int keep_going;    /* -k */
	int dry_run;       /* -n */
	int force;         /* -B */
	int explain;       /* --explain */
	int question;      /* -q: run and print nothing; status 1 if anything would run */
	int silent;        /* -s: one line per action (a failure's output in full) */
	int jobserver;     /* take tokens from make's jobserver (no -j given) */
	const char *cache_dir;   /* resolved cache directory */
	const char *build_dir;   /* resolved build directory (project-relative) */
	const RemoteOpts *remote; /* the remote cache, or NULL */
	int shard, shards;       /* --shard I/N: build shard I of N (shards 0: all) */
} BuildOpts;

/* Build targets ("all", "MODEL", "MODEL:STAGE"); returns the exit status:
 * 0 done, 1 an action failed, 2 bad target or rule input. */
int build_run(Project *p, const BuildOpts *o, int ntargets, char **targets);
/* Join the GNU make jobserver named in MAKEFLAGS, if any; 1 when joined. */
int jobserver_open(void);
/* Print the action graph in Graphviz dot format; exit status as above. */
int build_graph(Project *p, const BuildOpts *o, int ntargets, char **targets);

#endif
