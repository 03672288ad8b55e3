/* rules.h — rule files: rules/NAME.rules at the project root, INI syntax read
 * with libinih.
 *
 *   [settings]            cache = DIR, jobs = N, build-dir = DIR,
 *                         remote-cache = URL, remote-cache.mode = read-write |
 *                         read-only, remote-cache.auth-env = VARIABLE,
 *                         remote-cache.timeout = SECONDS
 *   [model NAME]          source = PATH | @MODEL[:STAGE], or export = COMMAND,
 *                         plus the keys the registered stages declare
 *   [model NAME : BASE]   inherits BASE's keys; its own keys override
 *   [release NAME]        models = MODEL[:STAGE]..., files = PATHS/GLOBS,
 *                         format = tar.gz | tar.zst | zip, name = TEMPLATE
 *
 * Every key remembers its file and line, so later checks report file:line. */
#ifndef QM_RULES_RULES_H
#define QM_RULES_RULES_H

#include <stddef.h>

#include "strmap.h"

enum { SEC_SETTINGS, SEC_MODEL, SEC_RELEASE };

typedef struct KV {
	char *key, *value;
	const char *file;
	int line;
} KV;

typedef struct Section {
	int kind;
	char *name, *base;
	const char *file;
	int line;
	KV *kv;
	size_t nkv, cap;
	int resolved;         /* inheritance applied */
	void *user;           /* free for the build: its first action */
} Section;

typedef struct Project {
	char *root;           /* absolute project directory */
	char **files;         /* rule files read (project-relative) */
	size_t nfiles;
	Section settings;
	Section **models;
	size_t nmodels;
	Section **releases;
	size_t nreleases;
	StrMap index;         /* models by name */
} Project;

/* The keys of [settings] and [release NAME] sections, for the checks and
 * for `quantmake keys`: key, default (NULL: none) and one line. Ended by
 * a NULL key. (A model's keys are the stages' StageParam tables.) */
typedef struct RuleKeyDoc {
	const char *key, *dflt, *help;
} RuleKeyDoc;
extern const RuleKeyDoc rules_settings_doc[];
extern const RuleKeyDoc rules_release_doc[];

/* Read rules: FILE if given, else every ROOT/rules/NAME.rules in name order.
 * 0, or -1 with error() "file:line: message". */
int rules_load(const char *root, const char *file, Project **out);
void project_free(Project *p);

/* a key's value in a section, or NULL; kv_find also returns where it was set */
const char *sec_get(const struct Section *s, const char *key);
const KV *sec_find(const struct Section *s, const char *key);
Section *project_model(const Project *p, const char *name);
/* the closest name among candidates for "did you mean" (NULL if none near) */
const char *closest(const char *word, const char *const *cands, size_t n);

#endif
