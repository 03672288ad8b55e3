/* cache.c — content-addressed store and action records (see cache.h).
 *
 * Action record format, version 2 (text, one item per line):
 *   quantmake-action 2
 *   check HEX                  XXH3-128 of every byte after this line: a
 *                              record that fails it (an edit, a flipped
 *                              byte, a torn write) is removed as a miss
 *   key HEX
 *   stage NAME
 *   model NAME
 *   seconds FLOAT
 *   out HEX SIZE NAME          (one per output file, NAME last: may hold spaces)
 *   dep HEX PATH               (one per discovered input)
 *   keytext                    (the rest of the file is the canonical key text)
 * A record that does not parse or fails its check (version 1 had no
 * check: such records are misses too) is removed with a warning.
 *
 * The file "epoch" holds "ID GENERATION": a random id made with the cache
 * and a number that gc and fsck raise when they remove anything. A build
 * log (buildlog.h) stands in for the cache's records only while the epoch
 * it was written against is the cache's. */
#include "cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "util.h"

/* an object this process hard-linked out after verifying it (cache_fetch):
 * a file with the same inode and size holds exactly its bytes */
typedef struct Linked {
	dev_t dev;
	ino_t ino;
	int64_t size;
	Hash h;
} Linked;

struct Cache {
	char *dir;
	Linked *linked;
	size_t nlinked;
	int workfd;      /* the lock file, holding this process's work directories */
	uint64_t *work;  /* their numbers */
	size_t nwork;
	char *epoch;     /* "ID GENERATION\n" (see above) */
};

static char *epoch_read(const char *dir);

static char *sub(const Cache *c, const char *kind, Hash h)
{
	char hex[HASH_HEX_LEN];
	hash_hex(h, hex);
	return xasprintf("%s/%s/%.2s/%s", c->dir, kind, hex, hex);
}

Cache *cache_open(const char *dir)
{
	static const char *subdirs[] = {"objects", "actions", "tmp"};
	for (size_t i = 0; i < ARRAY_LEN(subdirs); i++) {
		char *p = path_join(dir, subdirs[i]);
		int r = mkdirs(p);
		free(p);
		if (r < 0) {
			error_prefix("cache directory '%s' is not usable", dir);
			return NULL;
		}
	}
	/* access(), not a probe file: a file created and removed on every
	 * run, no-op builds included, costs an inode allocation each time */
	char *tmp = path_join(dir, "tmp");
	int w = access(tmp, W_OK | X_OK);
	free(tmp);
	if (w < 0) {
		error("cache directory '%s' is not writable:", dir);
		return NULL;
	}
	Cache *c = xcalloc(1, sizeof *c);
	c->workfd = -1;
	/* absolute, so that $out stays valid for commands that change directory */
	char *abs = realpath(dir, NULL);
	c->dir = abs ? abs : xstrdup(dir);
	c->epoch = epoch_read(c->dir);
	return c;
}

void cache_close(Cache *c)
{
	if (!c)
		return;
	if (c->workfd >= 0)
		close(c->workfd); /* releases the work directories */
	free(c->dir);
	free(c->epoch);
	free(c->linked);
	free(c->work);
	free(c);
}

const char *cache_dir(const Cache *c)
{
	return c->dir;
}

char *cache_object_path(const Cache *c, Hash h)
{
	return sub(c, "objects", h);
}

/* Copy src to a fresh temp file in dstdir_tmp while hashing; returns the
 * temp path (malloc'd) or NULL.
 *
 * Nothing in the store is fsynced: every object is hashed again each time
 * a build uses it (cache_fetch), so an object a system crash left torn is
 * found, removed and made again by its action, and an action record that
 * does not parse counts as a miss. Waiting for the disk cost 0.4-4 ms per
 * file here, 12 files per model: up to half of a small model's build. */
int cache_has_object(const Cache *c, Hash h)
{
	char *p = cache_object_path(c, h);
	int ok = access(p, F_OK) == 0;
	free(p);
	return ok;
}

void cache_drop_action(Cache *c, Hash key)
{
	char *p = sub(c, "actions", key);
	unlink(p);
	free(p);
}

const char *cache_epoch(const Cache *c)
{
	return c->epoch;
}

/* raise the generation of the epoch: what was removed may be named by a
 * build log */
static void epoch_bump(Cache *c)
{
	char id[64] = "";
	unsigned long long gen = 0;
	sscanf(c->epoch, "%63s %llu", id, &gen);
	char *text = xasprintf("%s %llu\n", id, gen + 1);
	char *p = path_join(c->dir, "epoch");
	if (write_file_atomic(p, text, strlen(text)) == 0) {
		free(c->epoch);
		c->epoch = text;
	} else {
		free(text);
	}
	free(p);
}

/* read the epoch, making it (a random id, generation 0) if missing */
static char *epoch_read(const char *dir)
{
	char *p = path_join(dir, "epoch"), *text = NULL;
	size_t len;
	if (read_file(p, &text, &len) < 0 || len == 0 || text[len - 1] != '\n') {
		free(text);
		unsigned char rnd[16];
		char hex[33];
		int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
		ssize_t n = fd >= 0 ? read(fd, rnd, sizeof rnd) : -1;
		if (fd >= 0)
			close(fd);
		if (n != (ssize_t)sizeof rnd) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			Hash h = hash_buf(&ts, sizeof ts);
			memcpy(rnd, h.b, sizeof rnd);
		}
		for (size_t i = 0; i < sizeof rnd; i++)
			snprintf(hex + 2 * i, 3, "%02x", rnd[i]);
		text = xasprintf("%s 0\n", hex);
		/* two processes making it at once: the last rename wins, and the
		 * loser's builds just trust their logs one time less */
		write_file_atomic(p, text, strlen(text));
	}
	free(p);
	return text;
}

static char *copy_hashing(const char *src, const char *tmpl, Hash *h, int64_t *size)
{
	/* 64 KiB, as hash_fd: a 1 MiB buffer was mapped afresh by malloc and
	 * faulted in page by page on every call (256 faults per copy) */
	enum { BUFSZ = 1 << 16 };
	int in = open(src, O_RDONLY | O_CLOEXEC);
	if (in < 0) {
		error("cannot open '%s':", src);
		return NULL;
	}
	char *tmp = xstrdup(tmpl);
	int out = mkostemp(tmp, O_CLOEXEC);
	if (out < 0) {
		error("cannot create '%s':", tmp);
		free(tmp);
		close(in);
		return NULL;
	}
	char *buf = xmalloc(BUFSZ);
	XXH3_state_t *st = XXH3_createState();
	XXH3_128bits_reset(st);
	int64_t total = 0;
	int ok = 1;
	for (;;) {
		ssize_t n = read(in, buf, BUFSZ);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			error("cannot read '%s':", src);
			ok = 0;
			break;
		}
		if (n == 0)
			break;
		XXH3_128bits_update(st, buf, (size_t)n);
		if (write_all(out, buf, (size_t)n) < 0) {
			error("cannot write '%s':", tmp);
			ok = 0;
			break;
		}
		total += n;
	}
	if (ok && close(out) < 0) {
		error("cannot write '%s':", tmp);
		ok = 0;
	} else if (!ok) {
		close(out);
	}
	close(in);
	free(buf);
	XXH128_canonical_t cn;
	XXH128_canonicalFromHash(&cn, XXH3_128bits_digest(st));
	XXH3_freeState(st);
	if (!ok) {
		unlink(tmp);
		free(tmp);
		return NULL;
	}
	memcpy(h->b, cn.digest, 16);
	*size = total;
	return tmp;
}

int cache_put_file(Cache *c, const char *path, Hash *h, int64_t *size)
{
	char *tmpl = xasprintf("%s/tmp/obj.XXXXXX", c->dir);
	char *tmp = copy_hashing(path, tmpl, h, size);
	free(tmpl);
	if (!tmp)
		return -1;
	char *dst = cache_object_path(c, *h);
	char *dir = path_dir(dst);
	int r = mkdirs(dir);
	free(dir);
	if (r == 0) {
		chmod(tmp, 0444);
		if (rename(tmp, dst) < 0)
			r = error("cannot store '%s' in the cache:", path);
	}
	unlink(tmp);
	free(tmp);
	free(dst);
	return r;
}

int cache_put_known(Cache *c, const char *path, Hash h)
{
	char *dst = cache_object_path(c, h);
	char *dir = path_dir(dst);
	int r = mkdirs(dir);
	free(dir);
	if (r == 0 && (chmod(path, 0444) < 0 || rename(path, dst) < 0))
		r = error("cannot store '%s' in the cache:", path);
	if (r < 0)
		unlink(path);
	free(dst);
	return r;
}

/* the hash of a file that is a verified object linked by this process */
static const Linked *linked_find(const Cache *c, const struct stat *st)
{
	for (size_t i = 0; i < c->nlinked; i++)
		if (c->linked[i].dev == st->st_dev && c->linked[i].ino == st->st_ino &&
		    c->linked[i].size == st->st_size)
			return &c->linked[i];
	return NULL;
}

int cache_put_move(Cache *c, const char *path, Hash *h, int64_t *size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return error("cannot open '%s':", path);
	struct stat st;
	if (fstat(fd, &st) < 0) {
		close(fd);
		return error("cannot stat '%s':", path);
	}
	/* a stage that kept its input's file (a hard link to the object,
	 * see ext_allow_links) stores nothing new: its hash is known; so
	 * is that of a file the stage hashed as it wrote it (a saved
	 * model: hash_note_fd), which is not read again */
	const Linked *k = linked_find(c, &st);
	int r = 0;
	if (k) {
		*h = k->h;
	} else if (!hash_noted(fd, &st, h)) {
		posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
		r = hash_fd(fd, path, h);
	}
	close(fd);
	if (r < 0)
		return -1;
	*size = st.st_size;
	char *dst = cache_object_path(c, *h);
	char *dir = path_dir(dst);
	r = mkdirs(dir);
	free(dir);
	/* an existing object of that name is replaced, not trusted: these
	 * bytes were just hashed, the old ones may be damaged (-B repairs) */
	if (r == 0 && (chmod(path, 0444) < 0 || rename(path, dst) < 0))
		r = error("cannot store '%s' in the cache:", path);
	free(dst);
	return r;
}

static int missing(Hash h)
{
	char hex[HASH_HEX_LEN];
	error("cache object %s is missing", hash_hex(h, hex));
	return CACHE_GONE;
}

static int corrupt(const char *obj, Hash h)
{
	char hex[HASH_HEX_LEN];
	unlink(obj);
	error("corrupt cache object %s (content does not match its name): removed", hash_hex(h, hex));
	return CACHE_GONE;
}

/* Read-only fetch: dst becomes a hard link to the object, whose bytes are
 * hashed (read, not copied) to verify them. dst is named directly, with no
 * temporary name: read-only fetches go to a stage's private input directory
 * (cache.h), where nobody sees dst before it is verified, and a failed
 * check removes it. A name left there by a killed run is replaced. 1 when
 * the file system refuses the link (the caller copies instead). */
static int fetch_link(Cache *c, const char *obj, Hash h, const char *dst)
{
	if (link(obj, dst) < 0 && !(errno == EEXIST && unlink(dst) == 0 && link(obj, dst) == 0))
		return errno == ENOENT && access(obj, F_OK) != 0 ? missing(h) : 1;
	int r = 0;
	struct stat st;
	Hash got;
	int fd = open(dst, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0)
		r = error("cannot read cache object '%s':", obj);
	if (r == 0) {
		posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
		r = hash_fd(fd, obj, &got);
	}
	if (fd >= 0)
		close(fd);
	if (r == 0 && !hash_eq(got, h))
		r = corrupt(obj, h);
	if (r < 0) {
		unlink(dst);
		return r;
	}
	c->linked = xreallocarray(c->linked, c->nlinked + 1, sizeof *c->linked);
	c->linked[c->nlinked++] = (Linked){.dev = st.st_dev, .ino = st.st_ino, .size = st.st_size, .h = h};
	return 0;
}

int cache_fetch(Cache *c, Hash h, const char *dst, unsigned mode)
{
	char *obj = cache_object_path(c, h);
	if (mode != 0444 && access(obj, F_OK) != 0) {
		int r = missing(h);
		free(obj);
		return r;
	}
	if (mode == 0444) {
		int lr = fetch_link(c, obj, h, dst);
		if (lr != 1) {
			free(obj);
			return lr;
		}
	}
	char *tmpl = xasprintf("%s.tmp.XXXXXX", dst);
	Hash got;
	int64_t size;
	/* No fsync (see copy_hashing): a copy in build/ is renamed into place
	 * only when complete, so no process ever sees it half-written; after a
	 * system crash the next build finds it changed (stat cache, then its
	 * hash) and copies it again. Waiting for the disk here cost 30 s per
	 * 4 GiB. */
	char *tmp = copy_hashing(obj, tmpl, &got, &size);
	free(tmpl);
	if (!tmp) {
		free(obj);
		return -1;
	}
	if (!hash_eq(got, h)) {
		unlink(tmp);
		free(tmp);
		int r = corrupt(obj, h);
		free(obj);
		return r;
	}
	free(obj);
	int r = 0;
	if (chmod(tmp, mode) < 0 || rename(tmp, dst) < 0) {
		r = error("cannot write '%s':", dst);
		unlink(tmp);
	}
	free(tmp);
	return r;
}

void action_rec_free(ActionRec *r)
{
	for (size_t i = 0; i < r->nouts; i++)
		free(r->outs[i].name);
	for (size_t i = 0; i < r->ndeps; i++)
		free(r->deps[i].path);
	free(r->outs);
	free(r->deps);
	free(r->stage);
	free(r->model);
	free(r->keytext);
	memset(r, 0, sizeof *r);
}

void action_rec_copy(ActionRec *d, const ActionRec *s)
{
	memset(d, 0, sizeof *d);
	d->key = s->key;
	d->stage = xstrdup(s->stage ? s->stage : "");
	d->model = xstrdup(s->model ? s->model : "");
	d->keytext = xstrdup(s->keytext ? s->keytext : "");
	d->seconds = s->seconds;
	d->outs = xcalloc(s->nouts + 1, sizeof *d->outs);
	for (size_t i = 0; i < s->nouts; i++) {
		d->outs[i] = s->outs[i];
		d->outs[i].name = xstrdup(s->outs[i].name);
	}
	d->nouts = s->nouts;
	d->deps = xcalloc(s->ndeps + 1, sizeof *d->deps);
	for (size_t i = 0; i < s->ndeps; i++) {
		d->deps[i] = s->deps[i];
		d->deps[i].path = xstrdup(s->deps[i].path);
	}
	d->ndeps = s->ndeps;
}

int action_rec_parse(char *text, ActionRec *r)
{
	memset(r, 0, sizeof *r);
	static const char head[] = "quantmake-action 2\ncheck ";
	size_t hl = sizeof head - 1;
	Hash want;
	if (strncmp(text, head, hl) || strlen(text) < hl + 33 || text[hl + 32] != '\n')
		return -1;
	text[hl + 32] = 0;
	int bad = hash_parse(text + hl, &want) < 0;
	text += hl + 33;
	if (bad || !hash_eq(want, hash_buf(text, strlen(text))))
		return -1;
	char *save = NULL, *line = NULL;
	size_t capo = 0, capd = 0;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (!strncmp(line, "key ", 4)) {
			if (hash_parse(line + 4, &r->key) < 0)
				return -1;
		} else if (!strncmp(line, "stage ", 6)) {
			free(r->stage);
			r->stage = xstrdup(line + 6);
		} else if (!strncmp(line, "model ", 6)) {
			free(r->model);
			r->model = xstrdup(line + 6);
		} else if (!strncmp(line, "seconds ", 8)) {
			r->seconds = strtod(line + 8, NULL);
		} else if (!strncmp(line, "out ", 4)) {
			ActionOut o;
			char *p = line + 4, *end;
			if (strlen(p) < 34 || hash_parse(p, &o.h) < 0)
				return -1;
			o.size = strtoll(p + 33, &end, 10);
			if (*end != ' ')
				return -1;
			o.name = xstrdup(end + 1);
			if (r->nouts == capo) {
				capo = capo ? capo * 2 : 4;
				r->outs = xreallocarray(r->outs, capo, sizeof *r->outs);
			}
			r->outs[r->nouts++] = o;
		} else if (!strncmp(line, "dep ", 4)) {
			ActionDep d;
			char *p = line + 4;
			if (strlen(p) < 34 || hash_parse(p, &d.h) < 0)
				return -1;
			d.path = xstrdup(p + 33);
			if (r->ndeps == capd) {
				capd = capd ? capd * 2 : 4;
				r->deps = xreallocarray(r->deps, capd, sizeof *r->deps);
			}
			r->deps[r->ndeps++] = d;
		} else if (!strcmp(line, "keytext")) {
			r->keytext = xstrdup(save ? save : "");
			break;
		} else {
			return -1;
		}
	}
	return r->stage && r->model && r->keytext ? 0 : -1;
}

int cache_get_action(Cache *c, Hash key, ActionRec *out)
{
	char *p = sub(c, "actions", key);
	char *text;
	size_t len;
	if (access(p, F_OK) != 0) {
		free(p);
		return 0;
	}
	if (read_file(p, &text, &len) < 0) {
		free(p);
		return -1;
	}
	int r = action_rec_parse(text, out);
	free(text);
	if (r < 0 || !hash_eq(out->key, key)) {
		warn("removing corrupt action record '%s'", p);
		unlink(p);
		action_rec_free(out);
		free(p);
		return 0;
	}
	free(p);
	return 1;
}

void action_rec_text(const ActionRec *r, StrBuf *out)
{
	StrBuf sb = {0};
	char hex[HASH_HEX_LEN];
	sb_printf(&sb, "key %s\nstage %s\nmodel %s\nseconds %.3f\n", hash_hex(r->key, hex), r->stage, r->model,
		  r->seconds);
	for (size_t i = 0; i < r->nouts; i++)
		sb_printf(&sb, "out %s %lld %s\n", hash_hex(r->outs[i].h, hex),
			  (long long)r->outs[i].size, r->outs[i].name);
	for (size_t i = 0; i < r->ndeps; i++)
		sb_printf(&sb, "dep %s %s\n", hash_hex(r->deps[i].h, hex), r->deps[i].path);
	sb_printf(&sb, "keytext\n%s", r->keytext);
	sb_printf(out, "quantmake-action 2\ncheck %s\n", hash_hex(hash_buf(sb.buf, sb.len), hex));
	sb_add(out, sb.buf, sb.len);
	sb_release(&sb);
}

int cache_put_action(Cache *c, const ActionRec *r)
{
	StrBuf sb = {0};
	action_rec_text(r, &sb);
	char *p = sub(c, "actions", r->key);
	char *dir = path_dir(p);
	int ret = mkdirs(dir);
	if (ret == 0)
		ret = write_file_atomic(p, sb.buf, sb.len);
	free(dir);
	free(p);
	sb_release(&sb);
	return ret;
}

void cache_touch_action(Cache *c, Hash key)
{
	char *p = sub(c, "actions", key);
	utimensat(AT_FDCWD, p, NULL, 0);
	free(p);
}

/* One lock file for every action: an action being built holds a write
 * lock on one byte of it, at an offset taken from its key (62 bits; keys
 * that share them only wait for each other). An open file description
 * lock, like flock(), belongs to the open file and goes with the process
 * that holds it, SIGKILL included; unlike a lock file per key, it creates
 * no inode per action (a fresh build made one per action, and locks/ only
 * ever grew). lock_key returns the lock's fd, or -1 (with error() when
 * it cannot be taken, or silently when !wait and another process holds
 * it). */
static int lock_key(Cache *c, Hash key, int wait)
{
	char *p = path_join(c->dir, "lock");
	int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
	if (fd < 0) {
		error("cannot create lock '%s':", p);
		free(p);
		return -1;
	}
	uint64_t off;
	memcpy(&off, key.b, sizeof off);
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = (off_t)(off >> 2), .l_len = 1};
	while (fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl) < 0) {
		if (errno != EINTR) {
			if (wait)
				error("cannot lock '%s':", p);
			free(p);
			close(fd);
			return -1;
		}
	}
	free(p);
	return fd;
}

int cache_lock(Cache *c, Hash key)
{
	return lock_key(c, key, 1);
}

void cache_unlock(int fd)
{
	/* closing the only descriptor of the open file releases its lock */
	if (fd >= 0)
		close(fd);
}

/* Work directory N is held by a lock on byte 2^62 + N of the lock file,
 * above every action's byte. Directories are never removed: an idle one is
 * taken by the next build, so a build in a used cache makes none, and
 * removing a directory frees its block, which on a file system mounted
 * with -o discard waits for the device (1-3 ms per directory here). */
char *cache_workdir(Cache *c)
{
	if (c->workfd < 0) {
		char *p = path_join(c->dir, "lock");
		c->workfd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
		if (c->workfd < 0) {
			error("cannot create lock '%s':", p);
			free(p);
			return NULL;
		}
		free(p);
	}
	for (uint64_t n = 0;; n++) {
		/* a lock of ours would be granted again: skip our own */
		int ours = 0;
		for (size_t i = 0; i < c->nwork; i++)
			ours |= c->work[i] == n;
		if (ours)
			continue;
		struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET,
				   .l_start = (off_t)((UINT64_C(1) << 62) + n), .l_len = 1};
		int r;
		while ((r = fcntl(c->workfd, F_OFD_SETLK, &fl)) < 0 && errno == EINTR)
			;
		if (r < 0 && (errno == EAGAIN || errno == EACCES))
			continue; /* another process's */
		if (r < 0)
			return error("cannot lock a work directory in '%s/tmp':", c->dir), NULL;
		char *dir = xasprintf("%s/tmp/act-%llu", c->dir, (unsigned long long)n);
		if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
			error("cannot create directory '%s':", dir);
			free(dir);
			fl.l_type = F_UNLCK;
			fcntl(c->workfd, F_OFD_SETLK, &fl);
			return NULL;
		}
		c->work = xreallocarray(c->work, c->nwork + 1, sizeof *c->work);
		c->work[c->nwork++] = n;
		return dir;
	}
}

/* ---- garbage collection ---- */

typedef struct GcAct {
	char *path;
	struct timespec used;
	ActionRec rec;
} GcAct;

typedef struct GcObj {
	Hash h;
	int64_t size;
	int refs;
} GcObj;

static int cmp_act(const void *a, const void *b)
{
	const GcAct *x = a, *y = b;
	if (x->used.tv_sec != y->used.tv_sec)
		return x->used.tv_sec < y->used.tv_sec ? -1 : 1;
	if (x->used.tv_nsec != y->used.tv_nsec)
		return x->used.tv_nsec < y->used.tv_nsec ? -1 : 1;
	return strcmp(x->path, y->path);
}

static int cmp_obj(const void *a, const void *b)
{
	return memcmp(((const GcObj *)a)->h.b, ((const GcObj *)b)->h.b, 16);
}

/* calls fn(path, name) for every file two levels below dir */
static void walk2(const char *dir, void (*fn)(void *, const char *, const char *), void *ud)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char *sd = path_join(dir, e->d_name);
		DIR *d2 = opendir(sd);
		if (d2) {
			struct dirent *f;
			while ((f = readdir(d2))) {
				if (f->d_name[0] == '.')
					continue;
				char *fp = path_join(sd, f->d_name);
				fn(ud, fp, f->d_name);
				free(fp);
			}
			closedir(d2);
		}
		free(sd);
	}
	closedir(d);
}

typedef struct GcState {
	GcAct *acts;
	size_t nacts, capacts;
	GcObj *objs;
	size_t nobjs, capobjs;
} GcState;

static void gc_act(void *ud, const char *path, const char *name)
{
	GcState *s = ud;
	Hash key;
	struct stat st;
	if (strlen(name) != 32 || hash_parse(name, &key) < 0 || stat(path, &st) < 0)
		return;
	char *text;
	size_t len;
	if (read_file(path, &text, &len) < 0)
		return;
	GcAct a = {.path = xstrdup(path), .used = st.st_mtim};
	if (action_rec_parse(text, &a.rec) < 0 || !hash_eq(a.rec.key, key)) {
		action_rec_free(&a.rec);
		memset(&a.rec, 0, sizeof a.rec);
	}
	a.rec.key = key;
	free(text);
	if (s->nacts == s->capacts) {
		s->capacts = s->capacts ? s->capacts * 2 : 64;
		s->acts = xreallocarray(s->acts, s->capacts, sizeof *s->acts);
	}
	s->acts[s->nacts++] = a;
}

static void gc_obj(void *ud, const char *path, const char *name)
{
	GcState *s = ud;
	GcObj o = {0};
	struct stat st;
	if (strlen(name) != 32 || hash_parse(name, &o.h) < 0 || stat(path, &st) < 0)
		return;
	o.size = st.st_size;
	if (s->nobjs == s->capobjs) {
		s->capobjs = s->capobjs ? s->capobjs * 2 : 64;
		s->objs = xreallocarray(s->objs, s->capobjs, sizeof *s->objs);
	}
	s->objs[s->nobjs++] = o;
}

static GcObj *gc_find(GcState *s, Hash h)
{
	GcObj k = {.h = h};
	return s->nobjs ? bsearch(&k, s->objs, s->nobjs, sizeof *s->objs, cmp_obj) : NULL;
}


static int recent(struct timespec t, time_t now, int64_t grace)
{
	return (int64_t)(now - t.tv_sec) < grace;
}

static void gc_free(GcState *s)
{
	for (size_t i = 0; i < s->nacts; i++) {
		free(s->acts[i].path);
		action_rec_free(&s->acts[i].rec);
	}
	free(s->acts);
	free(s->objs);
}

int cache_gc(Cache *c, int64_t max_bytes, int64_t grace, CacheGcStats *st)
{
	GcState s = {0};
	memset(st, 0, sizeof *st);
	char *adir = path_join(c->dir, "actions"), *odir = path_join(c->dir, "objects");
	walk2(adir, gc_act, &s);
	walk2(odir, gc_obj, &s);
	free(adir);
	free(odir);
	if (s.nacts > 1)
		qsort(s.acts, s.nacts, sizeof *s.acts, cmp_act);
	if (s.nobjs > 1)
		qsort(s.objs, s.nobjs, sizeof *s.objs, cmp_obj);
	time_t now = time(NULL);
	int64_t total = 0;
	for (size_t i = 0; i < s.nobjs; i++)
		total += s.objs[i].size;
	for (size_t i = 0; i < s.nacts; i++)
		for (size_t j = 0; j < s.acts[i].rec.nouts; j++) {
			GcObj *o = gc_find(&s, s.acts[i].rec.outs[j].h);
			if (o)
				o->refs++;
		}
	/* unreferenced objects first (left by interrupted builds or old
	 * evictions), but not those stored within the grace period: a build
	 * running now may be about to write the record naming them */
	for (size_t i = 0; i < s.nobjs && total > max_bytes; i++) {
		if (s.objs[i].refs)
			continue;
		char *p = cache_object_path(c, s.objs[i].h);
		struct stat sb;
		if (stat(p, &sb) == 0 && recent(sb.st_mtim, now, grace)) {
			st->kept_recent++;
		} else if (unlink(p) == 0) {
			total -= s.objs[i].size;
			st->bytes_freed += s.objs[i].size;
			st->objects_removed++;
			s.objs[i].refs = -1;
		}
		free(p);
	}
	/* then actions, least recently used first: never one used within the
	 * grace period, nor one being built (its lock is held) */
	for (size_t i = 0; i < s.nacts && total > max_bytes; i++) {
		GcAct *a = &s.acts[i];
		if (recent(a->used, now, grace)) {
			st->kept_recent++;
			continue;
		}
		int lk = lock_key(c, a->rec.key, 0);
		if (lk < 0 && a->rec.nouts) {
			st->kept_busy++;
			continue;
		}
		unlink(a->path);
		st->actions_removed++;
		for (size_t j = 0; j < a->rec.nouts; j++) {
			GcObj *o = gc_find(&s, a->rec.outs[j].h);
			if (o && o->refs > 0 && --o->refs == 0) {
				char *p = cache_object_path(c, o->h);
				if (unlink(p) == 0) {
					total -= o->size;
					st->bytes_freed += o->size;
					st->objects_removed++;
				}
				o->refs = -1;
				free(p);
			}
		}
		cache_unlock(lk);
	}
	st->bytes_left = total;
	if (st->actions_removed || st->objects_removed)
		epoch_bump(c);
	gc_free(&s);
	return 0;
}

int cache_fsck(Cache *c, CacheFsckStats *st)
{
	GcState s = {0};
	memset(st, 0, sizeof *st);
	char *adir = path_join(c->dir, "actions"), *odir = path_join(c->dir, "objects");
	walk2(odir, gc_obj, &s);
	walk2(adir, gc_act, &s);
	free(adir);
	free(odir);
	/* every object re-hashed: a damaged one is removed (its actions then
	 * miss, and rebuild it) */
	for (size_t i = 0; i < s.nobjs; i++) {
		char *p = cache_object_path(c, s.objs[i].h);
		Hash h;
		st->objects++;
		if (hash_file(p, &h) < 0 || !hash_eq(h, s.objs[i].h)) {
			if (unlink(p) == 0) {
				st->objects_damaged++;
				s.objs[i].refs = -1;
			}
		}
		free(p);
	}
	if (s.nobjs > 1)
		qsort(s.objs, s.nobjs, sizeof *s.objs, cmp_obj);
	/* records: gc_act kept those that parse and pass their check with
	 * outputs; one that does not, or names an object that is gone, is
	 * removed */
	for (size_t i = 0; i < s.nacts; i++) {
		GcAct *a = &s.acts[i];
		st->actions++;
		int bad = a->rec.nouts == 0;
		for (size_t j = 0; !bad && j < a->rec.nouts; j++) {
			GcObj *o = gc_find(&s, a->rec.outs[j].h);
			bad = !o || o->refs < 0;
		}
		if (!bad)
			continue;
		int lk = lock_key(c, a->rec.key, 0);
		if (unlink(a->path) == 0)
			st->actions_damaged++;
		cache_unlock(lk);
	}
	if (st->objects_damaged || st->actions_damaged)
		epoch_bump(c);
	gc_free(&s);
	return 0;
}
