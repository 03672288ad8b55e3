/* statcache.c — stat-keyed hash cache (see statcache.h).
 *
 * File format (version 1), little-endian:
 *   8 bytes  magic "QMSTAT1\n"
 *   then records of 56 bytes: u64 dev, u64 ino, i64 size, i64 mtime_ns,
 *   i64 ctime_ns, 16 bytes XXH3-128 digest.
 * A file whose length is not 8 + 56k, or with another magic, is ignored. */
#include "statcache.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "strmap.h"
#include "util.h"

typedef struct Entry {
	uint64_t id[2];      /* dev, ino: the entry's key in the table */
	int64_t size, mtime, ctime;
	Hash h;
	int fresh;           /* recorded since open */
} Entry;

struct StatCache {
	char *path;
	StrMap tab;          /* (dev, ino) -> Entry * */
	int dirty;
	int cold;            /* opened without entries: nearly every file is read */
	long reads;
	pthread_mutex_t mu;
};

static const char MAGIC[8] = "QMSTAT1\n";
enum { RECSZ = 56 };

/* the entry of (dev, ino), or NULL; with create, a new one (zero but for
 * its key) when there was none */
static Entry *find(StatCache *sc, uint64_t dev, uint64_t ino, int create)
{
	uint64_t id[2] = {dev, ino};
	if (!create) {
		const StrMapEnt *se = strmap_findb(&sc->tab, id, sizeof id);
		return se ? se->v.p : NULL;
	}
	int added;
	StrMapEnt *se = strmap_addb(&sc->tab, id, sizeof id, &added);
	if (added) {
		Entry *e = xcalloc(1, sizeof *e);
		memcpy(e->id, id, sizeof id);
		se->key = e->id;
		se->v.p = e;
	}
	return se->v.p;
}

static void put_stat(StatCache *sc, const struct stat *st, Hash h)
{
	Entry *e = find(sc, (uint64_t)st->st_dev, (uint64_t)st->st_ino, 1);
	e->size = st->st_size;
	e->mtime = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
	e->ctime = (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec;
	e->h = h;
	e->fresh = 1;
	sc->dirty = 1;
}

/* one record of the file format: the entry it holds, made or replaced */
static Entry *get_rec(StatCache *sc, const char *r)
{
	uint64_t dev, ino;
	memcpy(&dev, r, 8);
	memcpy(&ino, r + 8, 8);
	Entry *e = find(sc, dev, ino, 1);
	memcpy(&e->size, r + 16, 8);
	memcpy(&e->mtime, r + 24, 8);
	memcpy(&e->ctime, r + 32, 8);
	memcpy(e->h.b, r + 40, 16);
	return e;
}

static void put_rec(StrBuf *sb, const Entry *e)
{
	sb_add(sb, &e->id[0], 8);
	sb_add(sb, &e->id[1], 8);
	sb_add(sb, &e->size, 8);
	sb_add(sb, &e->mtime, 8);
	sb_add(sb, &e->ctime, 8);
	sb_add(sb, e->h.b, 16);
}

StatCache *statcache_open(const char *path)
{
	StatCache *sc = xcalloc(1, sizeof *sc);
	pthread_mutex_init(&sc->mu, NULL);
	sc->path = path ? xstrdup(path) : NULL;
	char *data;
	size_t len;
	sc->cold = 1;
	if (!path || access(path, F_OK) != 0 || read_file(path, &data, &len) < 0)
		return sc;
	if (len < 8 || memcmp(data, MAGIC, 8) || (len - 8) % RECSZ) {
		warn("ignoring corrupt stat cache '%s'", path);
		free(data);
		return sc;
	}
	for (size_t off = 8; off < len; off += RECSZ)
		get_rec(sc, data + off);
	sc->cold = len == 8;
	free(data);
	return sc;
}

int statcache_hash(StatCache *sc, const char *path, Hash *out)
{
	struct stat st;
	int fd = -1;
	/* A cold cache (a fresh project or build directory) has the file read
	 * anyway: open it first and take its times from the descriptor, and
	 * stop reading at its size, 4 system calls a file instead of 6 (a
	 * thousand calibration samples hashed 8.3 -> 6.3 ms). */
	if (sc->cold) {
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
			return error("cannot open '%s':", path);
		if (fstat(fd, &st) < 0) {
			close(fd);
			return error("cannot stat '%s':", path);
		}
	} else if (stat(path, &st) < 0) {
		return error("cannot stat '%s':", path);
	}
	int64_t mt = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	int64_t ct = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
	pthread_mutex_lock(&sc->mu);
	Entry *e = find(sc, (uint64_t)st.st_dev, (uint64_t)st.st_ino, 0);
	if (e && e->size == st.st_size && e->mtime == mt && e->ctime == ct) {
		*out = e->h;
		pthread_mutex_unlock(&sc->mu);
		if (fd >= 0)
			close(fd);
		return 0;
	}
	sc->reads++;
	pthread_mutex_unlock(&sc->mu);
	if (fd < 0 && (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return error("cannot open '%s':", path);
	/* read-ahead advice pays for a model, not for a sample of a few KiB */
	if (st.st_size >= (1 << 20))
		posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	struct stat st2;
	/* a file that grew meanwhile is hashed as far as its size said, and
	 * the fstat after tells: not kept */
	int r = hash_fd_size(fd, path, S_ISREG(st.st_mode) ? st.st_size : -1, out);
	int same = r == 0 && fstat(fd, &st2) == 0;
	close(fd);
	if (r < 0)
		return -1;
	/* A file modified within the last few milliseconds may change again
	 * without a visible timestamp change: do not trust such entries. */
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	int64_t nowns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
	if (same && st2.st_mtim.tv_sec == st.st_mtim.tv_sec &&
	    st2.st_mtim.tv_nsec == st.st_mtim.tv_nsec && st2.st_size == st.st_size &&
	    nowns - mt > 10000000) {
		pthread_mutex_lock(&sc->mu);
		put_stat(sc, &st, *out);
		pthread_mutex_unlock(&sc->mu);
	}
	return 0;
}

void statcache_put(StatCache *sc, const char *path, Hash h)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return;
	pthread_mutex_lock(&sc->mu);
	put_stat(sc, &st, h);
	pthread_mutex_unlock(&sc->mu);
}

long statcache_reads(const StatCache *sc)
{
	return sc->reads;
}

/* the count of files read (8 bytes), then the fresh entries' records */
char *statcache_fresh(const StatCache *sc, size_t *len)
{
	StrBuf sb = {0};
	int64_t reads = sc->reads;
	sb_add(&sb, &reads, 8);
	for (StrMapEnt *se = NULL; (se = strmap_next(&sc->tab, se));)
		if (((const Entry *)se->v.p)->fresh)
			put_rec(&sb, se->v.p);
	*len = sb.len;
	return sb_detach(&sb);
}

int statcache_merge(StatCache *sc, const char *data, size_t len)
{
	if (len < 8 || (len - 8) % RECSZ)
		return -1;
	int64_t reads;
	memcpy(&reads, data, 8);
	pthread_mutex_lock(&sc->mu);
	sc->reads += (long)reads;
	for (size_t off = 8; off < len; off += RECSZ)
		get_rec(sc, data + off)->fresh = 1;
	if (len > 8)
		sc->dirty = 1;
	pthread_mutex_unlock(&sc->mu);
	return 0;
}

int statcache_save(StatCache *sc)
{
	if (!sc->path || !sc->dirty)
		return 0;
	StrBuf sb = {0};
	sb_add(&sb, MAGIC, 8);
	for (StrMapEnt *se = NULL; (se = strmap_next(&sc->tab, se));)
		put_rec(&sb, se->v.p);
	char *dir = path_dir(sc->path);
	int r = mkdirs(dir);
	free(dir);
	if (r == 0)
		r = write_file_atomic(sc->path, sb.buf, sb.len);
	sb_release(&sb);
	if (r == 0)
		sc->dirty = 0;
	return r;
}

void statcache_close(StatCache *sc)
{
	if (!sc)
		return;
	pthread_mutex_destroy(&sc->mu);
	for (StrMapEnt *se = NULL; (se = strmap_next(&sc->tab, se));)
		free(se->v.p);
	strmap_free(&sc->tab);
	free(sc->path);
	free(sc);
}
