/* hashnote_check.c — hash_note_fd() / hash_noted() (src/hash.c): a file
 * noted as its writer hashed it is known again by its identity, after a
 * rename and a chmod too (what the cache does to a stage's output), but
 * not once changed in place, nor when a new file takes its inode number.
 * Prints PASS/FAIL/SKIP lines (tests/t_io_hashnote.sh). */
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hash.h"

static char dir[4096];

static char *at(const char *name)
{
	static char p[2][4200];
	static int k;
	k ^= 1;
	snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
	return p[k];
}

/* write s to path as a stage would: hashed as written, noted */
static int put(const char *path, const char *s)
{
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	if (fd < 0 || write(fd, s, strlen(s)) != (ssize_t)strlen(s))
		return -1;
	hash_note_fd(fd, hash_buf(s, strlen(s)));
	return close(fd);
}

/* 1 with *h when path is known by a note */
static int noted(const char *path, Hash *h)
{
	int fd = open(path, O_RDONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return -1;
	int r = hash_noted(fd, &st, h);
	close(fd);
	return r;
}

static void result(int ok, const char *name, const char *why)
{
	if (ok)
		printf("PASS: %s\n", name);
	else
		printf("FAIL: %s: %s\n", name, why);
}

int main(void)
{
	char name[32], body[64];
	const char *t = getenv("TMPDIR");
	snprintf(dir, sizeof dir, "%s/hashnote.XXXXXX", t && *t ? t : "/tmp");
	if (!mkdtemp(dir)) {
		printf("FAIL: hash notes: cannot make a directory\n");
		return 1;
	}
	const char *a = "the first model's bytes", *b = "THE FIRST MODEL'S BYTES";
	Hash h, want = hash_buf(a, strlen(a));
	if (put(at("a"), a) < 0) {
		printf("FAIL: hash notes: cannot write %s\n", at("a"));
		return 1;
	}
	int fd = open(at("a"), O_RDONLY);
	long gen = 0;
	int has_gen = fd >= 0 && ioctl(fd, FS_IOC_GETVERSION, &gen) == 0;
	if (fd >= 0)
		close(fd);
	if (!has_gen) {
		result(noted(at("a"), &h) == 0, "a file system without inode generations notes nothing",
		       "a note was found");
		printf("SKIP: hash notes: %s keeps no inode generations\n", dir);
		goto out;
	}
	result(noted(at("a"), &h) == 1 && hash_eq(h, want), "a file noted as written is known by its identity",
	       "no note, or another hash");
	/* what cache_put_move meets: the stage renamed it; the store chmods */
	rename(at("a"), at("b"));
	chmod(at("b"), 0444);
	result(noted(at("b"), &h) == 1 && hash_eq(h, want), "it is known after a rename and a chmod",
	       "no note, or another hash");
	/* changed in place, same size (the modification time moves: the
	 * note was taken with an fstat, after which Linux 6.13 and later
	 * give a change a fine-grained time) */
	chmod(at("b"), 0644);
	fd = open(at("b"), O_WRONLY);
	if (fd < 0 || pwrite(fd, b, strlen(b), 0) != (ssize_t)strlen(b))
		printf("FAIL: hash notes: cannot rewrite %s\n", at("b"));
	if (fd >= 0)
		close(fd);
	result(noted(at("b"), &h) == 0, "a file changed in place after its note is not known", "the old note was found");
	/* a new file in the inode number of one noted and removed */
	put(at("c"), a);
	struct stat sc, sd;
	stat(at("c"), &sc);
	unlink(at("c"));
	fd = open(at("d"), O_CREAT | O_WRONLY, 0644);
	if (fd < 0 || write(fd, a, strlen(a)) != (ssize_t)strlen(a))
		printf("FAIL: hash notes: cannot write %s\n", at("d"));
	if (fd >= 0)
		close(fd);
	stat(at("d"), &sd);
	if (sd.st_ino != sc.st_ino)
		printf("SKIP: hash notes: a new file in a reused inode: the file system gave another inode number\n");
	else
		result(noted(at("d"), &h) == 0, "a new file in a reused inode number is not known",
		       "the removed file's note was found");
	/* notes for many files: the latest ones are kept */
	for (int i = 0; i < 40; i++) {
		snprintf(name, sizeof name, "m%02d", i);
		snprintf(body, sizeof body, "model %d", i);
		put(at(name), body);
	}
	int last = 1;
	for (int i = 36; i < 40; i++) {
		snprintf(name, sizeof name, "m%02d", i);
		snprintf(body, sizeof body, "model %d", i);
		last &= noted(at(name), &h) == 1 && hash_eq(h, hash_buf(body, strlen(body)));
	}
	result(last, "the latest of many notes are kept", "one of the last four files is not known");
out:
	for (int i = 0; i < 40; i++) {
		snprintf(name, sizeof name, "m%02d", i);
		unlink(at(name));
	}
	unlink(at("a"));
	unlink(at("b"));
	unlink(at("d"));
	rmdir(dir);
	return 0;
}
