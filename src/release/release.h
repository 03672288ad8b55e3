/* release.h — release archives: git stamps, the manifest, reproducible
 * archives (see doc/quantmake.1, RELEASES).
 *
 * Flow of `quantmake release` (cmd.c): build the release's models with
 * build_run(), list the files (entries) the archive will hold, read the git
 * stamp (stamp.c), hash every entry as it will appear in the archive and
 * describe every model (manifest.c), then write the archive with sorted
 * entries and fixed metadata to a temporary name in dist/ and rename it
 * (archive.c). Stamps go only into the released copy of each model (its
 * metadata_props) and the manifest, never into a cache key. */
#ifndef QM_RELEASE_RELEASE_H
#define QM_RELEASE_RELEASE_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "hash.h"

/* ---- stamp.c: git state of the project, read with libgit2 ---- */

typedef struct Stamp {
	int in_git;          /* 0: not in a git repository (fields "unknown") */
	char *commit;        /* 40 hex digits, or "unknown" */
	char *shortc;        /* first 7 hex digits, or "unknown" */
	char *describe;      /* `git describe --tags --always` (stamp_read leaves
				out -dirty: cmd.c adds it per release), or "unknown" */
	int dirty;           /* tracked files differ from HEAD */
	int64_t commit_time; /* committer time, seconds since the epoch (0 if none) */
	char **modified;     /* modified tracked paths, project-relative, sorted */
	size_t nmodified;
	char **untracked;    /* untracked, not ignored files, project-relative, sorted */
	size_t nuntracked;
} Stamp;

/* Read the stamp of the repository holding ROOT. Outside a repository (or
 * with no commit yet) fills "unknown" fields, sets in_git = 0 and returns 0
 * with why set to a one-line reason (static string or errmsg copy, malloc'd).
 * -1 with error() when the repository exists but cannot be read. */
int stamp_read(const char *root, Stamp *s, char **why);
void stamp_free(Stamp *s);

/* ---- manifest.c: entries, their digests, model descriptions ---- */

enum { ENT_FILE, ENT_DIR };

typedef struct Entry {
	char *name;          /* path inside the archive (below the top directory) */
	int kind;            /* ENT_FILE or ENT_DIR */
	char *src;           /* file on disk (ENT_FILE), or NULL for data */
	uint8_t *data;       /* the whole content in memory (MANIFEST.json, a
				re-serialized model), or NULL */
	size_t datalen;
	uint8_t *tail;       /* bytes appended after src's content (a stamp) */
	size_t taillen;
	int64_t size;        /* filled by entries_digest() */
	Hash xxh;
	uint8_t sha[32];
	Hash expect;         /* if has_expect: XXH3 of src the build recorded */
	int has_expect;
} Entry;

typedef struct EntryList {
	Entry *v;
	size_t n, cap;
} EntryList;

/* add an entry (copies name and src); returns it */
Entry *entry_add(EntryList *l, const char *name, int kind, const char *src);
/* the entry called name, or NULL */
Entry *entry_find(EntryList *l, const char *name);
/* sort by name (bytewise) */
void entries_sort(EntryList *l);
void entries_free(EntryList *l);

/* Fill size, XXH3-128 and SHA-256 of every file entry, reading them with up
 * to nthreads threads; checks has_expect entries against the build's
 * record. 0, or -1 with error() naming the file. */
int entries_digest(EntryList *l, int nthreads);
/* incremental SHA-256 (nettle): begin, add bytes, end (frees the state) */
void *sha_begin(void);
void sha_add(void *st, const void *p, size_t n);
void sha_end(void *st, uint8_t out[32]);
/* lower-case hex of a SHA-256 digest (65 bytes with the NUL) */
char *sha256_hex(const uint8_t sha[32], char out[65]);

/* Stamp written into a released model's metadata_props: n keys (static
 * strings) and their values (malloc'd). */
typedef struct StampProps {
	const char *key[8];
	char *val[8];
	size_t n;
} StampProps;
void stamp_props(const Stamp *s, const char *release, StampProps *out);
void stamp_props_free(StampProps *p);

/* Describe the model file PATH for the manifest (opset imports, IR version,
 * producer, inputs and outputs with types and shapes) into obj, and prepare
 * its stamped copy in e: either a tail of metadata_props fields appended to
 * the unchanged bytes (protobuf merges repeated fields), or, when the model
 * already carries quantmake.* properties, a re-serialized model with them
 * replaced (e->data). 0, or -1 with error(). */
int model_describe_stamp(const char *path, const StampProps *props, json_t *obj, Entry *e);

/* ---- archive.c: writing and reading archives with libarchive ---- */

/* archive file extension for a format ("tar.gz", "tar.zst", "zip"), or NULL */
const char *archive_ext(const char *format);
/* Write the sorted entries under top/ into dist/NAME atomically (temp file
 * in dist, then rename), every entry with mtime, uid/gid 0, modes 0644 and
 * 0755 and nothing else; XXH3 of file contents is checked against the
 * digest pass while writing. A file already at path stays when it has the
 * same bytes (returns 1); with other bytes it is an error unless force
 * (then replaced). 0 written, 1 unchanged, or -1 with error() and no file
 * left. */
int archive_write_release(const char *path, const char *format, const char *top,
			  EntryList *l, int64_t mtime, int force);

/* the largest MANIFEST.json archive_read_all reads (doc/quantmake.1) */
#define MANIFEST_MAX_BYTES ((int64_t)64 << 20)

/* One entry read back from an archive. */
typedef struct ReadEntry {
	char *name;
	/* NULL for a regular file, else what the entry is ("a directory",
	 * "a symbolic link", "a hard link", "a device node", "a fifo", ...):
	 * its content is not read */
	const char *kind;
	int64_t size;
	Hash xxh;
	uint8_t sha[32];
} ReadEntry;
/* Read every entry of ARCHIVE (any format libarchive knows), hashing the
 * content of regular files; the content of a top-level or depth-1
 * MANIFEST.json is kept in *manifest (malloc'd, NUL-terminated) with its
 * path in *manifest_name. An entry named by an absolute path or through
 * '..', a second MANIFEST.json and one larger than MANIFEST_MAX_BYTES are
 * errors (reading stops there). 0, or -1 with error(). */
int archive_read_all(const char *path, ReadEntry **out, size_t *n, char **manifest,
		     char **manifest_name);

#endif
