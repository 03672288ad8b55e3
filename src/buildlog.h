/* buildlog.h — the project's record of what it last built, per action:
 * key, outputs, discovered dependencies and key text (for --explain).
 *
 * Like ninja's .ninja_log: one file read at start and written at the end,
 * so a no-op build resolves every action from memory and stat() calls,
 * without opening the cache. The cache stays the source of truth: an entry
 * is only trusted when its key equals the action's freshly computed key. */
#ifndef QM_BUILDLOG_H
#define QM_BUILDLOG_H

#include <stdint.h>

#include "cache.h"

typedef struct BuildLog BuildLog;

typedef struct LogEntry {
	char *id;            /* "model\tstage" */
	ActionRec rec;       /* rec.key is the action key */
	int64_t touched;     /* last time the cache record's LRU time was bumped */
} LogEntry;

/* load PATH (missing: empty; corrupt: empty with a warning) */
BuildLog *buildlog_open(const char *path);
/* the entry of an action, or NULL */
LogEntry *buildlog_get(BuildLog *l, const char *model, const char *stage);
/* record (a deep copy of) rec for the action */
LogEntry *buildlog_put(BuildLog *l, const char *model, const char *stage, const ActionRec *rec);
void buildlog_drop(BuildLog *l, const char *model, const char *stage);
/* write back atomically if anything changed; 0 or -1 */
int buildlog_save(BuildLog *l);
void buildlog_close(BuildLog *l);

#endif
