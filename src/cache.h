/* cache.h — the content-addressed store and action records.
 *
 * Layout under the cache directory (format version 1):
 *   objects/XX/HASH     file contents, read-only, named by XXH3-128
 *   actions/XX/KEY      action records (text, see cache.c), by action key
 *   epoch               "ID GENERATION": see cache_epoch
 *   lock                an action being built holds a write lock (open
 *                       file description lock) on one byte of it, at an
 *                       offset taken from its key (see cache_lock)
 *   tmp/                temporary files; everything enters by rename()
 *   tmp/act-N/          work directories (cache_workdir): each held by one
 *                       process at a time, through a lock on the lock
 *                       file, and kept for the next build when it ends
 * Caches made before the single lock file have a locks/ directory of one
 * file per key: nothing reads it (quantmake gc leaves it, rm -r is safe);
 * an older quantmake building in the same cache at the same time takes
 * those locks instead, so an action both run is built twice, and stored
 * once, the same bytes under the same names.
 * The cache stores bytes, not models: it knows nothing of ONNX. */
#ifndef QM_CACHE_H
#define QM_CACHE_H

#include <stdint.h>

#include "hash.h"
#include "util.h"

typedef struct Cache Cache;

typedef struct ActionOut {
	char *name;      /* file name inside the action's output directory */
	Hash h;
	int64_t size;
} ActionOut;

typedef struct ActionDep {
	char *path;      /* project-relative path discovered while running */
	Hash h;
} ActionDep;

typedef struct ActionRec {
	Hash key;
	char *stage, *model;
	char *keytext;   /* the canonical text the key was hashed from */
	ActionOut *outs;
	size_t nouts;
	ActionDep *deps;
	size_t ndeps;
	double seconds;  /* how long the action took when it ran */
} ActionRec;

/* open (creating) the cache at DIR; -1 with error() naming DIR if it cannot
 * be created or written */
Cache *cache_open(const char *dir);
void cache_close(Cache *c);
const char *cache_dir(const Cache *c);

/* store a file's bytes; sets its hash and size. Atomic and idempotent. */
int cache_put_file(Cache *c, const char *path, Hash *h, int64_t *size);
/* store a file by renaming it into the store (it must be on the cache's
 * file system and is gone afterwards, or left if the object existed); a
 * file linked by cache_fetch is not hashed again */
int cache_put_move(Cache *c, const char *path, Hash *h, int64_t *size);
/* store a file whose bytes the caller has hashed (to h) as it wrote them,
 * by renaming it into the store (on the cache's file system); the file is
 * gone afterwards, stored or not */
int cache_put_known(Cache *c, const char *path, Hash h);
/* cache_fetch's status when the object is corrupt (removed) or missing */
enum { CACHE_GONE = -2 };
/* copy object h to dst atomically, verifying its hash on the way; a
 * corrupt object is deleted and CACHE_GONE returned, as for a missing one (error()
 * says which). With mode 0444 (a stage's inputs, never written) dst is a
 * hard link to the object instead when the file system allows, verified
 * by reading it; cache_put_move of a file that is still that link then
 * knows its hash without reading it again. Such a dst must be in a
 * directory private to the process: it is linked under its own name
 * (replacing any file there) and removed if the check fails. Anything a
 * user may edit (build/) must be fetched writable, as a copy, so the store
 * is never changed through it. */
int cache_fetch(Cache *c, Hash h, const char *dst, unsigned mode);
/* path of object h (malloc'd) */
char *cache_object_path(const Cache *c, Hash h);
/* is object h in the store (not verified) */
int cache_has_object(const Cache *c, Hash h);
/* remove the record of an action, if any (its objects stay) */
void cache_drop_action(Cache *c, Hash key);
/* "ID GENERATION\n": changes when the cache is another or gc or fsck
 * removed something since (see cache.c) */
const char *cache_epoch(const Cache *c);
/* 1 found, 0 not found (or corrupt record, removed with a warning) */
int cache_get_action(Cache *c, Hash key, ActionRec *out);
int cache_put_action(Cache *c, const ActionRec *r);
/* mark an action used now (for least-recently-used eviction) */
void cache_touch_action(Cache *c, Hash key);
/* blocking exclusive lock for building KEY; returns fd or -1 */
int cache_lock(Cache *c, Hash key);
void cache_unlock(int fd);
/* a work directory tmp/act-N (malloc'd path), held by this process until
 * cache_close (and by its children while they run, should it die first):
 * the lowest N no other process holds, made if missing. It may hold what
 * an earlier holder left, a killed one included: the caller empties what
 * it uses. NULL with error() on failure. */
char *cache_workdir(Cache *c);
void action_rec_free(ActionRec *r);
/* a record as the cache stores it (appended to sb), and parsed back from
 * that text (modified in place): 0, or -1 when it does not parse */
void action_rec_text(const ActionRec *r, StrBuf *sb);
int action_rec_parse(char *text, ActionRec *r);
/* deep copy of src into dst (dst is overwritten, not freed) */
void action_rec_copy(ActionRec *dst, const ActionRec *src);

typedef struct CacheGcStats {
	size_t actions_removed, objects_removed;
	size_t kept_recent;     /* used or stored within the grace period */
	size_t kept_busy;       /* being built (their lock is held) */
	int64_t bytes_freed, bytes_left;
} CacheGcStats;

/* evict least recently used actions (and objects only they reference), and
 * unreferenced objects, until the objects total at most max_bytes; never
 * what was used or stored less than grace seconds ago, nor an action being
 * built, so a gc beside running builds never fails them; 0 or -1 */
int cache_gc(Cache *c, int64_t max_bytes, int64_t grace, CacheGcStats *st);

typedef struct CacheFsckStats {
	size_t objects, objects_damaged;   /* damaged: removed */
	size_t actions, actions_damaged;   /* damaged or dangling: removed */
} CacheFsckStats;

/* re-hash every object and check every action record: what is damaged
 * (or a record naming an object that is gone) is removed; 0 or -1 */
int cache_fsck(Cache *c, CacheFsckStats *st);

#endif
