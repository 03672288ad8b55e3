/* hash.c — XXH3-128 through libxxhash (see hash.h). */
#include "hash.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "hash_avx2.h"
#include "util.h"

struct HashState {
	XXH3_state_t *st;
};

HashState *hash_new(void)
{
	HashState *s = xmalloc(sizeof *s);
	s->st = XXH3_createState();
	if (!s->st)
		fatalx(1, "out of memory (XXH3 state)");
	XXH3_128bits_reset(s->st);
	return s;
}

void hash_update(HashState *s, const void *p, size_t n)
{
	XXH3_128bits_update(s->st, p, n);
}

void hash_str(HashState *s, const char *str)
{
	XXH3_128bits_update(s->st, str, strlen(str) + 1);
}

static Hash canon(XXH128_hash_t h)
{
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, h);
	Hash out;
	memcpy(out.b, c.digest, 16);
	return out;
}

Hash hash_final(HashState *s)
{
	Hash h = canon(XXH3_128bits_digest(s->st));
	XXH3_freeState(s->st);
	free(s);
	return h;
}

Hash hash_buf(const void *p, size_t n)
{
	return canon(XXH3_128bits(p, n));
}

static void xxh_update(void *st, const void *p, size_t n)
{
	XXH3_128bits_update(st, p, n);
}

int hash_fd(int fd, const char *path, Hash *out)
{
	return hash_fd_size(fd, path, -1, out);
}

int hash_fd_size(int fd, const char *path, int64_t size, Hash *out)
{
	/* 64 KiB: the block stays in L2 between read() and hashing */
	enum { BUFSZ = 1 << 16 };
	char *buf = aligned_alloc(4096, BUFSZ);
	if (!buf)
		fatalx(1, "out of memory");
	if (__builtin_cpu_supports("avx2")) {
		int r = hash_fd_avx2(fd, buf, BUFSZ, size, out->b);
		free(buf);
		return r < 0 ? error("cannot read '%s':", path) : 0;
	}
	XXH3_state_t *st = XXH3_createState();
	if (!st)
		fatalx(1, "out of memory (XXH3 state)");
	XXH3_128bits_reset(st);
	int r = read_blocks(fd, path, size, buf, BUFSZ, xxh_update, st);
	if (r == 0)
		*out = canon(XXH3_128bits_digest(st));
	XXH3_freeState(st);
	free(buf);
	return r;
}

int hash_file(const char *path, Hash *out)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return error("cannot open '%s':", path);
	posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	int r = hash_fd(fd, path, out);
	close(fd);
	return r;
}

/* Files this process wrote, with the hash of their bytes (hash_note_fd).
 * The generation tells a file from a later one that reused its inode
 * number; the modification time, a file changed since (it is taken
 * after the last write: fchmod and rename change only the ctime). A
 * stage saves a few files, so a short list will do; the oldest notes
 * make room. */
typedef struct Note {
	dev_t dev;
	ino_t ino;
	long gen;
	off_t size;
	struct timespec mtime;
	Hash h;
} Note;
enum { NNOTES = 16 };
static Note notes[NNOTES];
static size_t nnotes, nextnote;
static pthread_mutex_t notes_lock = PTHREAD_MUTEX_INITIALIZER;

/* the file's identity, or -1 where the file system gives no generation */
static int note_of(int fd, const struct stat *st, Note *n)
{
	long gen = 0;
	if (!S_ISREG(st->st_mode) || ioctl(fd, FS_IOC_GETVERSION, &gen) < 0)
		return -1;
	*n = (Note){.dev = st->st_dev, .ino = st->st_ino, .gen = gen, .size = st->st_size, .mtime = st->st_mtim};
	return 0;
}

static int note_same(const Note *a, const Note *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->gen == b->gen && a->size == b->size &&
	       a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

void hash_note_fd(int fd, Hash h)
{
	struct stat st;
	Note n;
	if (fstat(fd, &st) < 0 || note_of(fd, &st, &n) < 0)
		return;
	n.h = h;
	pthread_mutex_lock(&notes_lock);
	notes[nextnote] = n;
	nextnote = (nextnote + 1) % NNOTES;
	if (nnotes < NNOTES)
		nnotes++;
	pthread_mutex_unlock(&notes_lock);
}

int hash_noted(int fd, const struct stat *st, Hash *h)
{
	int found = 0;
	pthread_mutex_lock(&notes_lock);
	for (size_t i = 0; i < nnotes && !found; i++)
		found = notes[i].dev == st->st_dev && notes[i].ino == st->st_ino;
	pthread_mutex_unlock(&notes_lock);
	Note n;
	if (!found || note_of(fd, st, &n) < 0)
		return 0;
	found = 0;
	pthread_mutex_lock(&notes_lock);
	for (size_t i = 0; i < nnotes && !found; i++)
		if (note_same(&notes[i], &n)) {
			*h = notes[i].h;
			found = 1;
		}
	pthread_mutex_unlock(&notes_lock);
	return found;
}

char *hash_hex(Hash h, char buf[HASH_HEX_LEN])
{
	static const char hex[] = "0123456789abcdef";
	for (int i = 0; i < 16; i++) {
		buf[2 * i] = hex[h.b[i] >> 4];
		buf[2 * i + 1] = hex[h.b[i] & 15];
	}
	buf[32] = 0;
	return buf;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

int hash_parse(const char *hex, Hash *out)
{
	for (int i = 0; i < 16; i++) {
		int hi = hexval(hex[2 * i]), lo = hi < 0 ? -1 : hexval(hex[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -1;
		out->b[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

int hash_eq(Hash a, Hash b)
{
	return !memcmp(a.b, b.b, 16);
}
