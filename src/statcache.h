/* statcache.h — (dev, inode, size, mtime, ctime) -> content hash, so files
 * whose metadata has not changed are not read again.
 *
 * The table lives in memory and is persisted with statcache_save() to a
 * binary file (format documented in statcache.c), written to a temp name
 * and renamed. A lost or corrupt file only costs re-hashing. */
#ifndef QM_STATCACHE_H
#define QM_STATCACHE_H

#include "hash.h"

typedef struct StatCache StatCache;

/* load PATH if it exists (missing or corrupt: start empty, with a warning
 * for corruption); PATH may be NULL for a purely in-memory cache */
StatCache *statcache_open(const char *path);
/* content hash of PATH, from the table when its metadata is unchanged;
 * 0 or -1 with error() */
int statcache_hash(StatCache *sc, const char *path, Hash *out);
/* record that PATH (just written by us) has hash h */
void statcache_put(StatCache *sc, const char *path, Hash h);
/* number of files actually read since open (for tests and --explain) */
long statcache_reads(const StatCache *sc);
/* The entries recorded since open, and the count of files read, as bytes
 * statcache_merge takes: what a child process that hashed files for its
 * parent hands over (the build's hashing ahead, src/build.c) */
char *statcache_fresh(const StatCache *sc, size_t *len);
/* take in statcache_fresh's bytes; -1 (nothing taken) when malformed */
int statcache_merge(StatCache *sc, const char *data, size_t len);
/* persist if changed; 0 or -1 */
int statcache_save(StatCache *sc);
void statcache_close(StatCache *sc);

#endif
