/* util.h — allocation, diagnostics, string buffers, paths and atomic files.
 *
 * Two levels of errors (see STYLE.md): the driver may fatal(); library-like
 * code returns -1 after error(), which records the message in a thread-local
 * buffer readable with errmsg() so callers can decide whether to print it. */
#ifndef QM_UTIL_H
#define QM_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define QM_VERSION "0.1.0"
#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* target_clones: the function compiled once more per named target, the
 * copy chosen where the program loads (an ifunc: GCC on x86-64 Linux);
 * elsewhere one default copy */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__)
#define QM_CLONES(...) __attribute__((target_clones(__VA_ARGS__)))
#else
#define QM_CLONES(...)
#endif

/* program name used as the prefix of diagnostics */
extern const char *argv0;

/* print "argv0: msg" and exit 2 (usage/rule errors) or the given code */
_Noreturn void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
_Noreturn void fatalx(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* print "argv0: warning: msg"; a format ending in ':' appends strerror(errno) */
void warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* record a message for errmsg() and return -1; ':' suffix appends strerror */
int error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int verror(const char *fmt, va_list ap);
/* the last message recorded by error() in this thread ("" if none) */
const char *errmsg(void);
/* prefix the recorded message with "fmt: " (adds context while unwinding) */
int error_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t sz);
void *xrealloc(void *p, size_t n);
void *xreallocarray(void *p, size_t n, size_t sz);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Growable string. Invariant: buf is NUL-terminated when cap > 0; len excludes
 * the NUL. A zero-initialized StrBuf is empty and valid. */
typedef struct StrBuf {
	char *buf;
	size_t len, cap;
} StrBuf;
void sb_grow(StrBuf *sb, size_t extra);
void sb_add(StrBuf *sb, const void *p, size_t n);
void sb_puts(StrBuf *sb, const char *s);
void sb_putc(StrBuf *sb, char c);
void sb_printf(StrBuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_vprintf(StrBuf *sb, const char *fmt, va_list ap);
/* append s as a JSON string literal (quoted and escaped) */
void sb_json_str(StrBuf *sb, const char *s);
void sb_reset(StrBuf *sb);
/* hand over the buffer (never NULL) and leave sb empty */
char *sb_detach(StrBuf *sb);
void sb_release(StrBuf *sb);

/* Dynamic array of pointers. */
typedef struct PtrVec {
	void **v;
	size_t n, cap;
} PtrVec;
void pv_push(PtrVec *pv, void *p);
void pv_free(PtrVec *pv);
/* free every element, then the vector */
void pv_free_all(PtrVec *pv);
/* sort a vector of strings (strcmp order) */
void pv_sort_str(PtrVec *pv);
/* append the words of a rule-file list (split on blanks and commas; v may
 * be NULL) to out as malloc'd strings */
void split_words(const char *v, PtrVec *out);

/* path joining: a/b, never doubling '/'; result malloc'd */
char *path_join(const char *a, const char *b);
/* directory part of path ("." if none); malloc'd */
char *path_dir(const char *path);
/* does a project-relative path leave the project (absolute or through ..)? */
int path_outside(const char *p);
/* does path, with every symbolic link resolved (realpath), stay inside dir
 * (or is it dir)? 0 as well when either cannot be resolved */
int path_resolves_inside(const char *dir, const char *path);
/* mkdir -p; 0 or -1 with error() */
int mkdirs(const char *path);
/* Create a directory that quantmake owns (build/, cache/) with a
 * .gitignore holding '*', as Cargo, Bazel and DVC do, so a project needs
 * no edit to keep it out of git; an existing directory is left alone.
 * 0, or -1 with error(). */
int mkdir_ignored(const char *path);
/* rm -rf; 0 or -1 */
int rmtree(const char *path);

/* Read fd from its position to the end (with size >= 0, at most size
 * bytes) through buf (n bytes), handing each block read to fn; 0, or -1
 * with error() naming path */
int read_blocks(int fd, const char *path, int64_t size, void *buf, size_t n,
		void (*fn)(void *ud, const void *p, size_t n), void *ud);
/* Read a whole file into memory (NUL-terminated for convenience). */
int read_file(const char *path, char **data, size_t *len);
/* Write data to path atomically: temp file in the same directory, then
 * rename, so no process sees it half-written (not fsynced: what quantmake
 * writes is hashed again before use, see copy_hashing in cache.c). On any
 * failure nothing is left behind and -1 is returned. */
int write_file_atomic(const char *path, const void *data, size_t len);
/* write all of data to fd, resuming after EINTR and short writes; 0 or -1
 * with errno set */
int write_all(int fd, const void *data, size_t len);
/* 1 when the CPU runs AVX-512F (asked once; 0 off x86-64), for kernels
 * that pick an AVX-512 path at run time */
int cpu_avx512f(void);
/* Copy a file atomically (temp + rename), preserving nothing but content;
 * mode is applied to the result. */
int copy_file_atomic(const char *src, const char *dst, unsigned mode);

/* monotonic time in seconds */
double now_sec(void);
/* Levenshtein distance, for "did you mean" suggestions */
int edit_distance(const char *a, const char *b);
/* number of online CPUs (at least 1) */
int ncpus(void);
/* parse a size like "10G", "512M", "1000": bytes, or -1 */
int64_t parse_size(const char *s);

#endif
