/* hash.h — XXH3-128 content hashes of files and buffers. */
#ifndef QM_HASH_H
#define QM_HASH_H

#include <stddef.h>
#include <stdint.h>

struct stat;

/* 128-bit digest; hex form is 32 lower-case characters (big-endian canonical) */
typedef struct Hash {
	uint8_t b[16];
} Hash;
#define HASH_HEX_LEN 33

typedef struct HashState HashState;

HashState *hash_new(void);
void hash_update(HashState *s, const void *p, size_t n);
/* add a string followed by a NUL, so ("ab","c") and ("a","bc") differ */
void hash_str(HashState *s, const char *str);
Hash hash_final(HashState *s);   /* also frees s */

Hash hash_buf(const void *p, size_t n);
/* hash a file's contents; 0 or -1 with error() */
int hash_file(const char *path, Hash *out);
/* hash from an open fd at its current position until EOF */
int hash_fd(int fd, const char *path, Hash *out);
/* the same, but with size >= 0 it stops once size bytes are read (no
 * read(2) to find the end: the caller checks the size after with fstat) */
int hash_fd_size(int fd, const char *path, int64_t size, Hash *out);

/* Remember that the complete file open as fd holds bytes hashing to h:
 * its writer hashed them as it wrote them. hash_noted() finds h again by
 * the file's identity (device, inode number and generation, size and
 * modification time), so the cache storing a stage's output does not
 * read the file back. Nothing is noted where the file system keeps no
 * inode generation (a reused inode number could not be told apart). */
void hash_note_fd(int fd, Hash h);
/* 1 with *h when the file open as fd (st, its fstat) is one this process
 * noted and its identity is unchanged; 0 otherwise */
int hash_noted(int fd, const struct stat *st, Hash *h);

char *hash_hex(Hash h, char buf[HASH_HEX_LEN]);
/* parse 32 hex chars; 0 or -1 */
int hash_parse(const char *hex, Hash *out);
int hash_eq(Hash a, Hash b);

#endif
