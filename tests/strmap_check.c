/* strmap_check.c — src/strmap.c against a plain list, built and run by
 * tests/t_strmap.sh. Random adds, replacements and deletes of binary keys
 * (NUL bytes included), checked every so many steps against what a list
 * says is there; then iteration, reserve, emptying the map one key at a
 * time, prefixes, string keys and owned copies. Prints PASS/FAIL lines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strmap.h"
#include "util.h"

enum { NKEYS = 3000, STEPS = 60000 };

typedef struct Key {
	char b[24];
	size_t len;
	int in;          /* in the map, by the list */
	uint64_t val;
} Key;

static int failed;

static void check(int ok, const char *what)
{
	if (!ok && !failed)
		printf("FAIL: strmap: %s\n", what);
	failed |= !ok;
}

/* every key the list holds is found with its value, and no other */
static void agree(const StrMap *m, const Key *k, size_t nk, const char *when)
{
	size_t in = 0;
	for (size_t i = 0; i < nk; i++) {
		const StrMapEnt *e = strmap_findb(m, k[i].b, k[i].len);
		if (k[i].in) {
			in++;
			check(e && e->v.u == k[i].val && e->len == k[i].len && !memcmp(e->key, k[i].b, k[i].len),
			      when);
		} else {
			check(!e, when);
		}
	}
	check(m->n == in, when);
}

int main(void)
{
	static Key k[NKEYS];
	uint64_t seed = 88172645463325252ull;
#define RND() (seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17, seed)
	/* binary keys of 2 to 23 bytes, distinct by their first two (a
	 * counter), then random bytes among 0, 1 and 2 */
	for (size_t i = 0; i < NKEYS; i++) {
		k[i].len = 2 + i % 22;
		k[i].b[0] = (char)i;
		k[i].b[1] = (char)(i >> 8);
		for (size_t j = 2; j < k[i].len; j++)
			k[i].b[j] = (char)(RND() % 3);
	}
	StrMap m = {0};
	check(!strmap_findb(&m, "x", 1) && !strmap_get(&m, "x") && !strmap_del(&m, "x"), "an empty map");
	/* keys that are prefixes of others, with and without a NUL */
	StrMapEnt *p1 = strmap_addb(&m, "ab", 2, NULL), *p2 = strmap_addb(&m, "ab\0", 3, NULL),
		  *p3 = strmap_addb(&m, "abc", 3, NULL);
	p1->v.u = 1, p2->v.u = 2, p3->v.u = 3;
	check(m.n == 3 && strmap_findb(&m, "ab", 2)->v.u == 1 && strmap_findb(&m, "ab\0", 3)->v.u == 2 &&
		      strmap_find(&m, "abc")->v.u == 3 && !strmap_findb(&m, "a", 1),
	      "keys that are prefixes of one another are distinct");
	strmap_free(&m);
	for (long s = 0; s < STEPS && !failed; s++) {
		Key *x = &k[RND() % (s < STEPS / 2 ? NKEYS / 3 : NKEYS)];
		int op = (int)(RND() % 3), added;
		if (op < 2) {
			StrMapEnt *e = strmap_addb(&m, x->b, x->len, &added);
			check(added == !x->in, "add says whether the key was new");
			x->in = 1;
			e->v.u = x->val = RND();
		} else {
			check(strmap_delb(&m, x->b, x->len) == x->in, "delete says whether the key was there");
			x->in = 0;
		}
		if (s % 997 == 0)
			agree(&m, k, NKEYS, "after random adds and deletes, the map holds what the list does");
	}
	agree(&m, k, NKEYS, "after random adds and deletes, the map holds what the list does");
	size_t seen = 0;
	for (StrMapEnt *e = NULL; (e = strmap_next(&m, e));)
		seen++;
	check(seen == m.n, "iteration visits every key once");
	size_t cap = m.cap;
	strmap_reserve(&m, m.n);
	check(m.cap == cap, "reserve for the keys held changes nothing");
	for (size_t i = 0; i < NKEYS; i++)
		if (k[i].in) {
			check(strmap_delb(&m, k[i].b, k[i].len) == 1, "emptying the map");
			k[i].in = 0;
			if (i % 101 == 0)
				agree(&m, k, NKEYS, "while emptying the map");
		}
	check(m.n == 0 && !strmap_next(&m, NULL), "an emptied map has no entry");
	strmap_free(&m);
	/* string keys: put/get, owned copies replacing borrowed keys */
	StrMap s = {0};
	strmap_reserve(&s, 5000);
	size_t cap0 = s.cap;
	char buf[32];
	for (int i = 0; i < 5000; i++) {
		snprintf(buf, sizeof buf, "name/%d", i);
		int added;
		StrMapEnt *e = strmap_add(&s, buf, &added);
		check(added && !strcmp(strmap_own_key(e), buf), "an owned copy of a string key is that string");
		e->v.i = i;
	}
	check(s.cap == cap0, "reserve makes room for the keys asked for");
	int ok = 1;
	for (int i = 0; i < 5000; i++) {
		snprintf(buf, sizeof buf, "name/%d", i);
		StrMapEnt *e = strmap_find(&s, buf);
		ok &= e && e->v.i == i && e->key != (const void *)buf;
	}
	check(ok, "string keys found after their copies replaced the borrowed ones");
	check(!strmap_find(&s, "name/") && !strmap_find(&s, "name/5000") && !strmap_find(&s, ""),
	      "absent string keys");
	check(strmap_put(&s, "", (void *)"v") == NULL && !strcmp(strmap_get(&s, ""), "v") &&
		      !strcmp(strmap_put(&s, "", (void *)"w"), "v") && !strcmp(strmap_get(&s, ""), "w"),
	      "the empty string is a key; put returns the previous value");
	strmap_del(&s, "");
	char k1[] = "twice", k2[] = "twice";
	strmap_put(&s, k1, NULL);
	strmap_put(&s, k2, NULL);
	check(strmap_find(&s, "twice")->key == (const void *)k2, "put makes its own key the entry's");
	strmap_del(&s, "twice");
	strmap_free_keys(&s);
	check(s.cap == 0 && s.n == 0 && !s.e, "a freed map is empty");
	if (!failed)
		printf("PASS: strmap: adds, deletes and lookups of %d binary keys agree with a list; "
		       "string keys, reserve, iteration\n", NKEYS);
	return 0;
}
