/* action.h — the scheduler's shared types: an action (one stage of one
 * model) and the state of one build. Private to src/build/; the public
 * interface is src/build.h.
 *
 * The scheduler is split by concept, as samurai splits its own:
 *   graph.c      expanding models into actions, marking what targets need,
 *                the Graphviz output
 *   key.c        action keys, --explain, record checks
 *   prehash.c    declared inputs hashed by a child beside the first stages
 *   jobserver.c  GNU make's jobserver (client side)
 *   runner.c     one action in a child process: inputs, stage, store
 *   loop.c       the event loop: resolve, start, reap, retry
 *   remote.c     the remote cache: asked by the child, reported to the loop
 *   shard.c      --shard I/N: which models this runner builds
 *   build.c      build_run: setup, the loop's rounds, materializing */
#ifndef QM_BUILD_ACTION_H
#define QM_BUILD_ACTION_H

#include <sys/types.h>
#include <time.h>

#include "build.h"
#include "buildlog.h"
#include "cache.h"
#include "hash.h"
#include "remote.h"
#include "stages/stage.h"
#include "statcache.h"
#include "util.h"

enum { A_PENDING, A_RUNNING, A_DONE, A_FAILED, A_SKIPPED };

/* An action's inputs besides its model: other actions of the same model
 * whose outputs the stage receives, each fetched into a directory of its
 * own and hashed into the key as lines of its own. */
enum { AUX_REF, AUX_SIDE, NAUX };
typedef struct AuxKind {
	const char *key, *dir;
	int files_only; /* its outputs but the model (fetching a model verifies
			   every byte of it) */
} AuxKind;
extern const AuxKind aux_kind[NAUX];

/* How an action's child ends (its exit status). */
enum {
	CHILD_BUILT = 0,         /* ran the stage and stored its record */
	CHILD_FAILED = 1,        /* the stage or storing failed (the log says why) */
	CHILD_FOUND = 2,         /* another quantmake process built it meanwhile:
				    a valid record is in the cache, nothing ran */
	CHILD_CORRUPT_INPUT = 3, /* its input model's object is corrupt or gone */
	CHILD_CORRUPT_AUX = 4,   /* + AUX_*: that other input's object is */
	CHILD_REMOTE = 8,        /* served by the remote cache: its record and
				    objects are in the local cache, nothing ran */
};

typedef struct Action {
	Section *model;
	const Stage *stage;
	struct Action *in;     /* upstream action giving the input model */
	struct Action *aux[NAUX]; /* actions giving its other inputs, or NULL */
	int last;              /* final action of its model */
	int needed;            /* required by the targets */
	int target;            /* materialized into the build directory */
	int state;             /* A_* */
	int hit;               /* resolved from a record, nothing ran */
	int remote_hit;        /* served by the remote cache, nothing ran */
	int stale;             /* running, but an input it took was rebuilt:
				  resolve again when it ends */
	Hash key;
	char *keytext;
	ActionRec rec;
	int have_rec;
	int borrowed;          /* rec's arrays belong to the build log */
	pid_t pid;
	int fd;                /* the child's output pipe, while running */
	size_t slot;           /* work directory while running (Build.slots) */
	StrBuf log;
	double start;
	struct timespec start_real;
	int tries;
	char *why;             /* reason it runs, for --explain and -n */
	char *pre;             /* its declared inputs' key lines, hashed ahead
				  (see prehash.c), or NULL */
} Action;

typedef struct Build {
	Project *p;
	const BuildOpts *o;
	Cache *cache;
	StatCache *sc;
	BuildLog *log;
	Action **acts;
	size_t nacts;
	size_t total, done;    /* needed actions; of them resolved or built */
	size_t hits, ran;      /* of the done: found built, and run here (the
				  progress counter counts what runs:
				  [ran/total - hits]) */
	int failed;
	int tty;
	/* Work directories cache/tmp/act-N (cache_workdir), one per action
	 * running at a time, claimed when first needed and reused by the
	 * actions that follow, then by later builds (each action empties it
	 * first). */
	char **slots;
	char *slot_busy;
	size_t nslots;
	struct Prehash *ph;    /* declared inputs being hashed ahead, or NULL */
	int ph_trust;          /* no command of this build may change them */
	int log_trusted;       /* the build log was written against this
				  cache, unchanged since (cache_epoch) */
	Remote *remote;        /* the remote cache, or NULL (remote.c) */
	int remote_off;        /* not asked any more: it failed */
	long remote_fails, remote_hits, remote_ups;
	int64_t remote_down, remote_up;
} Build;

/* "model:stage" (malloc'd) */
char *action_label(const Action *a);
/* does d take a's outputs (as its model or another input)? */
int action_takes_from(const Action *d, const Action *a);
/* are all of a's inputs built? */
int action_inputs_done(const Action *a);

/* graph.c */
/* expand every model into its chain of actions (b->acts); -1 after error()
 * on a cycle or a source naming no model */
int graph_expand(Build *b);
/* mark the actions the targets need; -1 after error() on an unknown target */
int graph_mark(Build *b, int ntargets, char **targets);
/* the model names, NULL-terminated (free the array, not the names) */
const char **graph_model_names(const Project *p);
/* print the needed actions and their edges in Graphviz dot */
void graph_print(const Build *b);

/* key.c */
/* the canonical key text and key of a ready action; -1 on a bad declared
 * input. Takes the prehash's lines if it has ended. */
int key_make(Build *b, Action *a);
/* the key lines of a's declared input files: "file HASH PATH", sorted, each
 * once; -1 when one cannot be listed or hashed; with ahead, also -1 when one
 * lies in the build directory */
int key_declared_lines(Build *b, const Action *a, StrBuf *sb, int ahead);
/* what differs from the last recorded key text, in words (malloc'd) */
char *key_explain(Build *b, const Action *a);
/* is the record usable: discovered deps unchanged and, with check_objects,
 * every output object present; else 0 and *why (malloc'd) */
int key_record_valid(Build *b, const ActionRec *r, char **why, int check_objects);
/* is every output object of the record in the store; else 0 and *why */
int key_outputs_present(Build *b, const ActionRec *r, char **why);
/* is the root-relative path inside the build directory */
int key_in_build_dir(const Build *b, const char *path);

/* prehash.c */
/* start hashing the declared inputs of needed actions in a child */
void prehash_start(Build *b);
/* the pipe to poll while the child runs, or -1 */
int prehash_fd(const Build *b);
/* read what is there (the pipe is non-blocking); when the child has ended,
 * take its lines and reap it. Returns 1 while it still runs. */
int prehash_poll(Build *b);
/* is a's key waiting for the prehash's lines? */
int prehash_awaited(const Build *b, const Action *a);
/* stop it (kill_it) or wait for it, then reap it */
void prehash_finish(Build *b, int kill_it);

/* jobserver.c (jobserver_open is in build.h) */
/* is a jobserver joined and its budget ours to share? */
int js_active(void);
/* the fd to poll for a token */
int js_fd(void);
/* take a token without blocking: 1 taken, 0 none now */
int js_take(void);
/* give one token back / all of them */
void js_give(void);
void js_give_all(void);
/* tokens held */
size_t js_held(void);

/* runner.c */
/* start a's child (state A_RUNNING); -1 after error() */
int runner_start(Build *b, Action *a);
/* threads an action may use inside itself */
int runner_threads(const Build *b);

/* remote.c (the remote cache; see there) */
/* is the remote cache asked (configured, and not given up on)? */
int rc_asks(const Build *b);
/* in a's child, on a local miss: serve it from the remote cache, blobs
 * downloaded through tmpdir (on the cache's file system, emptied by the
 * caller); REMOTE_FOUND when its record is now in the local cache,
 * REMOTE_MISSING, or a failure (reported) */
int rc_lookup(Build *b, Action *a, const char *tmpdir);
/* in a's child, after its record rec was stored: upload it */
void rc_upload(Build *b, Action *a, const ActionRec *rec);
/* before a's child starts: no report left from another */
void rc_clear(const Build *b, const Action *a);
/* after a's child ended: add up what it reported, warn on a failure */
void rc_collect(Build *b, const Action *a);
/* -n: would the remote serve a? Then a is done with the remote's record */
int rc_would_serve(Build *b, Action *a);
/* the build's line about the remote cache (and its QUANTMAKE_STATS line) */
void rc_summary(const Build *b);

/* shard.c */
/* --shard I/N: keep needed only the actions of the models in shard I
 * (say which on stdout); 0 */
int shard_select(Build *b);

/* loop.c */
/* resolve, start and reap until nothing more can run; the exit status
 * (0, 2 planning error, 128+signal) */
int loop_run(Build *b);
/* install the signal handlers and the self-pipe; 0 or -1 */
int loop_signals_init(void);
void loop_signals_close(void);
/* an action's cached result is gone or corrupt: forget it, so that it is
 * resolved (and run) again; the actions that took its outputs follow */
void loop_invalidate(Build *b, Action *a);

#endif
