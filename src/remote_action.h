/* remote_action.h — quantmake's actions in a remote cache (remote.h).
 *
 * An action's entry lives at {URL}/ac/{SHA-256 of its canonical key text}:
 * the same text the local key (XXH3-128) is made from, so clones and
 * branches share remote hits as they share local ones. The entry is a REAPI
 * ActionResult (src/reapi.proto) with exit_code 0 and one output file per
 * output of the action (path: its name; digest: SHA-256 and size of its
 * bytes, a blob at {URL}/cas/...), plus one more, RECORD_PATH, whose blob
 * is the action record as the local cache stores it (cache.c: key text,
 * discovered inputs, outputs with their XXH3-128). bazel-remote accepts such
 * an entry with its default validation and serves it only while every blob
 * it names is present.
 *
 * Nothing the remote answers is trusted: the entry must parse, name safe
 * relative paths, agree with the record on every output's name and size,
 * and the record's key text must be this action's; each blob's size and
 * SHA-256, and its XXH3-128 against the record, are checked before it
 * enters the local cache. */
#ifndef QM_REMOTE_ACTION_H
#define QM_REMOTE_ACTION_H

#include "cache.h"
#include "remote.h"

/* the entry's output file that carries the action record */
#define RECORD_PATH ".quantmake/action"

typedef struct RemoteAction {
	ActionRec rec;        /* the record the entry carries */
	char (*sha)[65];      /* SHA-256 (hex) of each of rec.outs */
} RemoteAction;

/* the key of an action's entry: SHA-256 hex of its key text */
void remote_action_key(const char *keytext, char hex[65]);
/* Look up the action of key text keytext (local key key; its model and
 * stage) and read its record: REMOTE_FOUND with *out filled (free with
 * remote_action_free), REMOTE_MISSING, or an error of remote.h (an entry or
 * record that is not what it should be is REMOTE_EBAD). */
int remote_action_get(Remote *r, const char *keytext, Hash key, const char *model, const char *stage,
		      RemoteAction *out);
/* Download the outputs of ra that cache c lacks into it, each through a
 * temporary file in tmpdir (on the cache's file system) and verified;
 * REMOTE_FOUND when all are there, else an error (nothing unverified is
 * stored). */
int remote_action_fetch(Remote *r, Cache *c, const RemoteAction *ra, const char *tmpdir);
void remote_action_free(RemoteAction *ra);
/* Upload the action of record rec, whose objects are in c: each output
 * the remote lacks (HEAD first), the record, then the entry.
 * REMOTE_FOUND, or an error. */
int remote_action_put(Remote *r, Cache *c, const ActionRec *rec);

#endif
