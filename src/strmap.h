/* strmap.h — the one hash map of the tree: keys are byte strings (a name,
 * or fixed bytes such as a device and inode), values a pointer or a number.
 *
 * Open addressing with linear probing, at most half full. A probe reads a
 * 4-byte tag per slot (high bits of the key's XXH3-64 hash; 0: free) and
 * touches an entry only on an equal tag: the tags of 10,000 names fit in a
 * core's cache where the 32-byte entries would not (the entries alone made
 * inference of a 10,000-node model 5-10% slower than a table of key
 * pointers). Entries keep the whole hash, so growing never hashes again.
 * Keys are borrowed: the bytes must stay
 * valid and unchanged while they are in the map. A caller that must own
 * them copies after strmap_add*() says the key was added, pointing the
 * entry's key at its copy (strmap_own_key(): equal bytes, so the entry
 * stays where it is).
 * A zeroed StrMap is empty. Iteration follows the table: the same order
 * for the same keys added in the same order, never a sorted one. */
#ifndef QM_STRMAP_H
#define QM_STRMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct StrMapEnt {
	const void *key;        /* NULL: a free slot */
	size_t len;
	uint64_t hash;
	union {
		void *p;
		int64_t i;
		uint64_t u;
	} v;                    /* zero when added */
} StrMapEnt;

typedef struct StrMap {
	StrMapEnt *e;
	uint32_t *tag;          /* per slot: 0 free, else from the entry's hash */
	size_t cap, n;          /* cap: 0 or a power of two; n: keys held */
} StrMap;

/* make room for n keys in all, so that adding them never grows the table */
void strmap_reserve(StrMap *m, size_t n);
/* the entry of key[0..len), or NULL */
StrMapEnt *strmap_findb(const StrMap *m, const void *key, size_t len);
/* the entry of key[0..len); added with a zero value when absent (*added,
 * if given, says which); pointers to entries stay valid until the next add
 * or delete */
StrMapEnt *strmap_addb(StrMap *m, const void *key, size_t len, int *added);
/* remove key[0..len); 1 if it was there */
int strmap_delb(StrMap *m, const void *key, size_t len);
/* the same for a NUL-terminated key (its bytes without the NUL) */
StrMapEnt *strmap_find(const StrMap *m, const char *key);
StrMapEnt *strmap_add(StrMap *m, const char *key, int *added);
int strmap_del(StrMap *m, const char *key);
/* key's pointer value, or NULL when absent */
void *strmap_get(const StrMap *m, const char *key);
/* key's pointer value becomes v, and key (not a copy) its key: the bytes
 * a present entry borrowed may go; the previous value, or NULL */
void *strmap_put(StrMap *m, const char *key, void *v);
/* the used entry after e (the first when e is NULL), or NULL after the last:
 *     for (StrMapEnt *e = NULL; (e = strmap_next(m, e));) */
StrMapEnt *strmap_next(const StrMap *m, const StrMapEnt *e);
/* make e's key a malloc'd copy of its bytes (with a NUL after them, so a
 * string key stays a string), for a map that owns its keys; the copy */
const void *strmap_own_key(StrMapEnt *e);
/* free the table (not keys or values) and leave m empty */
void strmap_free(StrMap *m);
/* free every key (a map that owns them), then the table */
void strmap_free_keys(StrMap *m);

#endif
