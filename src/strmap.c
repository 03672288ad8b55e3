/* strmap.c — string-keyed hash map (see strmap.h). */
#include "strmap.h"

#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "util.h"

enum { MIN_CAP = 16 };

static uint32_t tag_of(uint64_t h)
{
	return (uint32_t)(h >> 32) | 1;
}

/* the slot holding key (hash h), or the free slot where it would go */
static size_t slot(const StrMap *m, const void *key, size_t len, uint64_t h)
{
	size_t mask = m->cap - 1;
	uint32_t t = tag_of(h);
	for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
		if (!m->tag[i])
			return i;
		const StrMapEnt *e = &m->e[i];
		if (m->tag[i] == t && e->hash == h && e->len == len && !memcmp(e->key, key, len))
			return i;
	}
}

/* move every entry into a table of cap slots */
static void resize(StrMap *m, size_t cap)
{
	StrMapEnt *old = m->e;
	uint32_t *otag = m->tag;
	size_t ocap = m->cap;
	m->e = xcalloc(cap, sizeof *m->e);
	m->tag = xcalloc(cap, sizeof *m->tag);
	m->cap = cap;
	for (size_t i = 0; i < ocap; i++) {
		if (!otag[i])
			continue;
		size_t j = (size_t)old[i].hash & (cap - 1);
		while (m->tag[j])
			j = (j + 1) & (cap - 1);
		m->e[j] = old[i];
		m->tag[j] = otag[i];
	}
	free(old);
	free(otag);
}

void strmap_reserve(StrMap *m, size_t n)
{
	size_t cap = m->cap ? m->cap : MIN_CAP;
	while (cap < 2 * n)
		cap *= 2;
	if (cap != m->cap)
		resize(m, cap);
}

StrMapEnt *strmap_findb(const StrMap *m, const void *key, size_t len)
{
	if (!m->n)
		return NULL;
	size_t i = slot(m, key, len, XXH3_64bits(key, len));
	return m->tag[i] ? &m->e[i] : NULL;
}

StrMapEnt *strmap_addb(StrMap *m, const void *key, size_t len, int *added)
{
	if (2 * (m->n + 1) > m->cap)
		resize(m, m->cap ? 2 * m->cap : MIN_CAP);
	uint64_t h = XXH3_64bits(key, len);
	size_t i = slot(m, key, len, h);
	StrMapEnt *e = &m->e[i];
	if (added)
		*added = !m->tag[i];
	if (!m->tag[i]) {
		*e = (StrMapEnt){.key = key, .len = len, .hash = h};
		m->tag[i] = tag_of(h);
		m->n++;
	}
	return e;
}

int strmap_delb(StrMap *m, const void *key, size_t len)
{
	StrMapEnt *e = strmap_findb(m, key, len);
	if (!e)
		return 0;
	/* backward shift: pull each later entry of the probe run into the
	 * hole unless its home slot lies cyclically in (hole, its slot] */
	size_t mask = m->cap - 1, hole = (size_t)(e - m->e);
	for (size_t j = (hole + 1) & mask; m->tag[j]; j = (j + 1) & mask) {
		size_t home = (size_t)m->e[j].hash & mask;
		if (((j - home) & mask) >= ((j - hole) & mask)) {
			m->e[hole] = m->e[j];
			m->tag[hole] = m->tag[j];
			hole = j;
		}
	}
	m->e[hole] = (StrMapEnt){0};
	m->tag[hole] = 0;
	m->n--;
	return 1;
}

StrMapEnt *strmap_find(const StrMap *m, const char *key)
{
	return strmap_findb(m, key, strlen(key));
}

StrMapEnt *strmap_add(StrMap *m, const char *key, int *added)
{
	return strmap_addb(m, key, strlen(key), added);
}

int strmap_del(StrMap *m, const char *key)
{
	return strmap_delb(m, key, strlen(key));
}

void *strmap_get(const StrMap *m, const char *key)
{
	StrMapEnt *e = strmap_find(m, key);
	return e ? e->v.p : NULL;
}

void *strmap_put(StrMap *m, const char *key, void *v)
{
	StrMapEnt *e = strmap_add(m, key, NULL);
	void *old = e->v.p;
	e->key = key;
	e->v.p = v;
	return old;
}

StrMapEnt *strmap_next(const StrMap *m, const StrMapEnt *e)
{
	for (size_t i = e ? (size_t)(e - m->e) + 1 : 0; i < m->cap; i++)
		if (m->tag[i])
			return &m->e[i];
	return NULL;
}

const void *strmap_own_key(StrMapEnt *e)
{
	char *k = xmalloc(e->len + 1);
	memcpy(k, e->key, e->len);
	k[e->len] = 0;
	return e->key = k;
}

void strmap_free(StrMap *m)
{
	free(m->e);
	free(m->tag);
	*m = (StrMap){0};
}

void strmap_free_keys(StrMap *m)
{
	for (size_t i = 0; i < m->cap; i++)
		free((void *)m->e[i].key);
	strmap_free(m);
}
