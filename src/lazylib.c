/* lazylib.c — libgit2 and libarchive, loaded on first use.
 *
 * Like OpenBLAS (src/blas.c), these libraries are compiled against but not
 * linked: libgit2 alone pulls in Kerberos, mbedTLS, libssh2 and PCRE, and
 * loading them took longer than the rest of a no-op build (libarchive,
 * with libxml2 and ICU, 3-14 ms). Only `release`, `verify-release`, .npz
 * output and the rare .npz input minizip cannot read (a zip64 central
 * directory, bzip2 or lzma members: src/exec/dataio.c) touch them. Each
 * definition below has the library's own prototype (the headers are
 * included, so the compiler checks every signature) and forwards to the
 * real function, resolved once with dlsym(). A function used without a
 * forwarder here fails at link time. The sonames come from the Makefile
 * (the -dev packages' .so links). */
#include <archive.h>
#include <archive_entry.h>
#include <dlfcn.h>
#include <git2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef GIT2_SONAME
#define GIT2_SONAME "libgit2.so"
#endif
#ifndef ARCHIVE_SONAME
#define ARCHIVE_SONAME "libarchive.so.13"
#endif

static void *git2, *archive;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static void *lazy_sym(void **lib, const char *soname, const char *name)
{
	pthread_mutex_lock(&mu);
	if (!*lib) {
		*lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
		if (!*lib) {
			fprintf(stderr, "quantmake: cannot load %s: %s\n", soname, dlerror());
			exit(1);
		}
	}
	void *f = dlsym(*lib, name);
	pthread_mutex_unlock(&mu);
	if (!f) {
		fprintf(stderr, "quantmake: %s lacks %s\n", soname, name);
		exit(1);
	}
	return f;
}

struct archive_entry *archive_entry_clear(struct archive_entry *a0)
{
	static __typeof__(archive_entry_clear) *f;
	__typeof__(archive_entry_clear) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(archive_entry_clear) *)lazy_sym(&archive, ARCHIVE_SONAME, "archive_entry_clear");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0);
}

const char *archive_entry_hardlink(struct archive_entry *a0)
{
	static __typeof__(archive_entry_hardlink) *f;
	__typeof__(archive_entry_hardlink) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(archive_entry_hardlink) *)lazy_sym(&archive, ARCHIVE_SONAME, "archive_entry_hardlink");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0);
}

la_int64_t archive_entry_size(struct archive_entry *a0)
{
	static __typeof__(archive_entry_size) *f;
	__typeof__(archive_entry_size) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(archive_entry_size) *)lazy_sym(&archive, ARCHIVE_SONAME, "archive_entry_size");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0);
}

int archive_entry_size_is_set(struct archive_entry *a0)
{
	static __typeof__(archive_entry_size_is_set) *f;
	__typeof__(archive_entry_size_is_set) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(archive_entry_size_is_set) *)lazy_sym(&archive, ARCHIVE_SONAME, "archive_entry_size_is_set");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0);
}

__LA_MODE_T archive_entry_filetype(struct archive_entry *a0)
{
	static __typeof__(archive_entry_filetype) *f;
	__typeof__(archive_entry_filetype) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(archive_entry_filetype) *)lazy_sym(&archive, ARCHIVE_SONAME, "archive_entry_filetype");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0);
}

void archive_entry_free(struct archive_entry *a0)
{
	static __typeof__(archive_entry_free) *f;
	__typeof__(archive_entry_free) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(archive_entry_free) *)lazy_sym(&archive, ARCHIVE_SONAME, "archive_entry_free");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	g(a0);
}

struct archive_entry *archive_entry_new(void)
{
	static __typeof__(archive_entry_new) *f;
	__typeof__(archive_entry_new) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(archive_entry_new) *)lazy_sym(&archive, ARCHIVE_SONAME, "archive_entry_new");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g();
}

const char *archive_entry_pathname(struct archive_entry *a0)
{
	static __typeof__(archive_entry_pathname) *f;
	__typeof__(archive_entry_pathname) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(archive_entry_pathname) *)lazy_sym(&archive, ARCHIVE_SONAME, "archive_entry_pathname");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0);
}

void archive_entry_set_filetype(struct archive_entry *a0, unsigned int a1)
{
	static __typeof__(archive_entry_set_filetype) *f;
	__typeof__(archive_entry_set_filetype) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(archive_entry_set_filetype) *)lazy_sym(&archive, ARCHIVE_SONAME, "archive_entry_set_filetype");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	g(a0, a1);
}

void archive_entry_set_gid(struct archive_entry *a0, la_int64_t a1)
{
	static __typeof__(archive_entry_set_gid) *f;
	__typeof__(archive_entry_set_gid) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(archive_entry_set_gid) *)lazy_sym(&archive, ARCHIVE_SONAME, "archive_entry_set_gid");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	g(a0, a1);
}

void archive_entry_set_mtime(struct archive_entry *a0, time_t a1, long a2)
{
	static __typeof__(archive_entry_set_mtime) *f;
	__typeof__(archive_entry_set_mtime) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(archive_entry_set_mtime) *)lazy_sym(&archive, ARCHIVE_SONAME, "archive_entry_set_mtime");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	g(a0, a1, a2);
}

void archive_entry_set_pathname(struct archive_entry *a0, const char *a1)
{
	static __typeof__(archive_entry_set_pathname) *f;
	__typeof__(archive_entry_set_pathname) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(archive_entry_set_pathname) *)lazy_sym(&archive, ARCHIVE_SONAME, "archive_entry_set_pathname");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	g(a0, a1);
}

void archive_entry_set_perm(struct archive_entry *a0, __LA_MODE_T a1)
{
	static __typeof__(archive_entry_set_perm) *f;
	__typeof__(archive_entry_set_perm) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(archive_entry_set_perm) *)lazy_sym(&archive, ARCHIVE_SONAME, "archive_entry_set_perm");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	g(a0, a1);
}

void archive_entry_set_size(struct archive_entry *a0, la_int64_t a1)
{
	static __typeof__(archive_entry_set_size) *f;
	__typeof__(archive_entry_set_size) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(archive_entry_set_size) *)lazy_sym(&archive, ARCHIVE_SONAME, "archive_entry_set_size");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	g(a0, a1);
}

void archive_entry_set_uid(struct archive_entry *a0, la_int64_t a1)
{
	static __typeof__(archive_entry_set_uid) *f;
	__typeof__(archive_entry_set_uid) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(archive_entry_set_uid) *)lazy_sym(&archive, ARCHIVE_SONAME, "archive_entry_set_uid");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	g(a0, a1);
}

const char *archive_error_string(struct archive *a0)
{
	static __typeof__(archive_error_string) *f;
	__typeof__(archive_error_string) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(archive_error_string) *)lazy_sym(&archive, ARCHIVE_SONAME, "archive_error_string");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0);
}

la_ssize_t archive_read_data(struct archive *a0, void *a1, size_t a2)
{
	static __typeof__(archive_read_data) *f;
	__typeof__(archive_read_data) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(archive_read_data) *)lazy_sym(&archive, ARCHIVE_SONAME, "archive_read_data");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0, a1, a2);
}

int archive_read_free(struct archive *a0)
{
	static __typeof__(archive_read_free) *f;
	__typeof__(archive_read_free) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(archive_read_free) *)lazy_sym(&archive, ARCHIVE_SONAME, "archive_read_free");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0);
}

struct archive *archive_read_new(void)
{
	static __typeof__(archive_read_new) *f;
	__typeof__(archive_read_new) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(archive_read_new) *)lazy_sym(&archive, ARCHIVE_SONAME, "archive_read_new");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g();
}

int archive_read_next_header(struct archive *a0, struct archive_entry **a1)
{
	static __typeof__(archive_read_next_header) *f;
	__typeof__(archive_read_next_header) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(archive_read_next_header) *)lazy_sym(&archive, ARCHIVE_SONAME, "archive_read_next_header");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0, a1);
}

int archive_read_open_filename(struct archive *a0, const char *a1, size_t a2)
{
	static __typeof__(archive_read_open_filename) *f;
	__typeof__(archive_read_open_filename) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(archive_read_open_filename) *)lazy_sym(&archive, ARCHIVE_SONAME, "archive_read_open_filename");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0, a1, a2);
}

int archive_read_open_memory(struct archive *a0, const void *a1, size_t a2)
{
	static __typeof__(archive_read_open_memory) *f;
	__typeof__(archive_read_open_memory) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(archive_read_open_memory) *)lazy_sym(&archive, ARCHIVE_SONAME, "archive_read_open_memory");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0, a1, a2);
}

int archive_read_support_filter_all(struct archive *a0)
{
	static __typeof__(archive_read_support_filter_all) *f;
	__typeof__(archive_read_support_filter_all) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(archive_read_support_filter_all) *)lazy_sym(&archive, ARCHIVE_SONAME, "archive_read_support_filter_all");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0);
}

int archive_read_support_format_all(struct archive *a0)
{
	static __typeof__(archive_read_support_format_all) *f;
	__typeof__(archive_read_support_format_all) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(archive_read_support_format_all) *)lazy_sym(&archive, ARCHIVE_SONAME, "archive_read_support_format_all");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0);
}

int archive_read_support_format_zip(struct archive *a0)
{
	static __typeof__(archive_read_support_format_zip) *f;
	__typeof__(archive_read_support_format_zip) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(archive_read_support_format_zip) *)lazy_sym(&archive, ARCHIVE_SONAME, "archive_read_support_format_zip");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0);
}

int archive_write_add_filter_gzip(struct archive *a0)
{
	static __typeof__(archive_write_add_filter_gzip) *f;
	__typeof__(archive_write_add_filter_gzip) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(archive_write_add_filter_gzip) *)lazy_sym(&archive, ARCHIVE_SONAME, "archive_write_add_filter_gzip");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0);
}

int archive_write_add_filter_zstd(struct archive *a0)
{
	static __typeof__(archive_write_add_filter_zstd) *f;
	__typeof__(archive_write_add_filter_zstd) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(archive_write_add_filter_zstd) *)lazy_sym(&archive, ARCHIVE_SONAME, "archive_write_add_filter_zstd");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0);
}

int archive_write_close(struct archive *a0)
{
	static __typeof__(archive_write_close) *f;
	__typeof__(archive_write_close) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(archive_write_close) *)lazy_sym(&archive, ARCHIVE_SONAME, "archive_write_close");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0);
}

la_ssize_t archive_write_data(struct archive *a0, const void *a1, size_t a2)
{
	static __typeof__(archive_write_data) *f;
	__typeof__(archive_write_data) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(archive_write_data) *)lazy_sym(&archive, ARCHIVE_SONAME, "archive_write_data");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0, a1, a2);
}

int archive_write_free(struct archive *a0)
{
	static __typeof__(archive_write_free) *f;
	__typeof__(archive_write_free) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(archive_write_free) *)lazy_sym(&archive, ARCHIVE_SONAME, "archive_write_free");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0);
}

int archive_write_header(struct archive *a0, struct archive_entry *a1)
{
	static __typeof__(archive_write_header) *f;
	__typeof__(archive_write_header) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(archive_write_header) *)lazy_sym(&archive, ARCHIVE_SONAME, "archive_write_header");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0, a1);
}

struct archive *archive_write_new(void)
{
	static __typeof__(archive_write_new) *f;
	__typeof__(archive_write_new) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(archive_write_new) *)lazy_sym(&archive, ARCHIVE_SONAME, "archive_write_new");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g();
}

int archive_write_open2(struct archive *a0, void *a1, archive_open_callback *a2, archive_write_callback *a3, archive_close_callback *a4, archive_free_callback *a5)
{
	static __typeof__(archive_write_open2) *f;
	__typeof__(archive_write_open2) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(archive_write_open2) *)lazy_sym(&archive, ARCHIVE_SONAME, "archive_write_open2");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0, a1, a2, a3, a4, a5);
}

int archive_write_open_fd(struct archive *a0, int a1)
{
	static __typeof__(archive_write_open_fd) *f;
	__typeof__(archive_write_open_fd) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(archive_write_open_fd) *)lazy_sym(&archive, ARCHIVE_SONAME, "archive_write_open_fd");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0, a1);
}

int archive_write_set_bytes_in_last_block(struct archive *a0, int a1)
{
	static __typeof__(archive_write_set_bytes_in_last_block) *f;
	__typeof__(archive_write_set_bytes_in_last_block) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(archive_write_set_bytes_in_last_block) *)lazy_sym(&archive, ARCHIVE_SONAME, "archive_write_set_bytes_in_last_block");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0, a1);
}

int archive_write_set_bytes_per_block(struct archive *a0, int a1)
{
	static __typeof__(archive_write_set_bytes_per_block) *f;
	__typeof__(archive_write_set_bytes_per_block) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(archive_write_set_bytes_per_block) *)lazy_sym(&archive, ARCHIVE_SONAME, "archive_write_set_bytes_per_block");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0, a1);
}

int archive_write_set_format_pax_restricted(struct archive *a0)
{
	static __typeof__(archive_write_set_format_pax_restricted) *f;
	__typeof__(archive_write_set_format_pax_restricted) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(archive_write_set_format_pax_restricted) *)lazy_sym(&archive, ARCHIVE_SONAME, "archive_write_set_format_pax_restricted");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0);
}

int archive_write_set_format_zip(struct archive *a0)
{
	static __typeof__(archive_write_set_format_zip) *f;
	__typeof__(archive_write_set_format_zip) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(archive_write_set_format_zip) *)lazy_sym(&archive, ARCHIVE_SONAME, "archive_write_set_format_zip");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0);
}

int archive_write_set_options(struct archive *a0, const char *a1)
{
	static __typeof__(archive_write_set_options) *f;
	__typeof__(archive_write_set_options) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(archive_write_set_options) *)lazy_sym(&archive, ARCHIVE_SONAME, "archive_write_set_options");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0, a1);
}

void git_buf_dispose(git_buf *a0)
{
	static __typeof__(git_buf_dispose) *f;
	__typeof__(git_buf_dispose) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(git_buf_dispose) *)lazy_sym(&git2, GIT2_SONAME, "git_buf_dispose");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	g(a0);
}

void git_commit_free(git_commit *a0)
{
	static __typeof__(git_commit_free) *f;
	__typeof__(git_commit_free) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(git_commit_free) *)lazy_sym(&git2, GIT2_SONAME, "git_commit_free");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	g(a0);
}

const git_oid *git_commit_id(const git_commit *a0)
{
	static __typeof__(git_commit_id) *f;
	__typeof__(git_commit_id) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(git_commit_id) *)lazy_sym(&git2, GIT2_SONAME, "git_commit_id");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0);
}

int git_commit_lookup(git_commit **a0, git_repository *a1, const git_oid *a2)
{
	static __typeof__(git_commit_lookup) *f;
	__typeof__(git_commit_lookup) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(git_commit_lookup) *)lazy_sym(&git2, GIT2_SONAME, "git_commit_lookup");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0, a1, a2);
}

git_time_t git_commit_time(const git_commit *a0)
{
	static __typeof__(git_commit_time) *f;
	__typeof__(git_commit_time) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(git_commit_time) *)lazy_sym(&git2, GIT2_SONAME, "git_commit_time");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0);
}

int git_describe_commit(git_describe_result **a0, git_object *a1, git_describe_options *a2)
{
	static __typeof__(git_describe_commit) *f;
	__typeof__(git_describe_commit) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(git_describe_commit) *)lazy_sym(&git2, GIT2_SONAME, "git_describe_commit");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0, a1, a2);
}

int git_describe_format(git_buf *a0, const git_describe_result *a1, const git_describe_format_options *a2)
{
	static __typeof__(git_describe_format) *f;
	__typeof__(git_describe_format) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(git_describe_format) *)lazy_sym(&git2, GIT2_SONAME, "git_describe_format");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0, a1, a2);
}

int git_describe_format_options_init(git_describe_format_options *a0, unsigned int a1)
{
	static __typeof__(git_describe_format_options_init) *f;
	__typeof__(git_describe_format_options_init) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(git_describe_format_options_init) *)lazy_sym(&git2, GIT2_SONAME, "git_describe_format_options_init");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0, a1);
}

int git_describe_options_init(git_describe_options *a0, unsigned int a1)
{
	static __typeof__(git_describe_options_init) *f;
	__typeof__(git_describe_options_init) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(git_describe_options_init) *)lazy_sym(&git2, GIT2_SONAME, "git_describe_options_init");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0, a1);
}

void git_describe_result_free(git_describe_result *a0)
{
	static __typeof__(git_describe_result_free) *f;
	__typeof__(git_describe_result_free) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(git_describe_result_free) *)lazy_sym(&git2, GIT2_SONAME, "git_describe_result_free");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	g(a0);
}

const git_error *git_error_last(void)
{
	static __typeof__(git_error_last) *f;
	__typeof__(git_error_last) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(git_error_last) *)lazy_sym(&git2, GIT2_SONAME, "git_error_last");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g();
}

int git_libgit2_init(void)
{
	static __typeof__(git_libgit2_init) *f;
	__typeof__(git_libgit2_init) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(git_libgit2_init) *)lazy_sym(&git2, GIT2_SONAME, "git_libgit2_init");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g();
}

int git_libgit2_shutdown(void)
{
	static __typeof__(git_libgit2_shutdown) *f;
	__typeof__(git_libgit2_shutdown) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(git_libgit2_shutdown) *)lazy_sym(&git2, GIT2_SONAME, "git_libgit2_shutdown");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g();
}

char *git_oid_tostr(char *a0, size_t a1, const git_oid *a2)
{
	static __typeof__(git_oid_tostr) *f;
	__typeof__(git_oid_tostr) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(git_oid_tostr) *)lazy_sym(&git2, GIT2_SONAME, "git_oid_tostr");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0, a1, a2);
}

void git_reference_free(git_reference *a0)
{
	static __typeof__(git_reference_free) *f;
	__typeof__(git_reference_free) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(git_reference_free) *)lazy_sym(&git2, GIT2_SONAME, "git_reference_free");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	g(a0);
}

int git_reference_resolve(git_reference **a0, const git_reference *a1)
{
	static __typeof__(git_reference_resolve) *f;
	__typeof__(git_reference_resolve) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(git_reference_resolve) *)lazy_sym(&git2, GIT2_SONAME, "git_reference_resolve");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0, a1);
}

const char *git_reference_shorthand(const git_reference *a0)
{
	static __typeof__(git_reference_shorthand) *f;
	__typeof__(git_reference_shorthand) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(git_reference_shorthand) *)lazy_sym(&git2, GIT2_SONAME, "git_reference_shorthand");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0);
}

const git_oid *git_reference_target(const git_reference *a0)
{
	static __typeof__(git_reference_target) *f;
	__typeof__(git_reference_target) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(git_reference_target) *)lazy_sym(&git2, GIT2_SONAME, "git_reference_target");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0);
}

void git_repository_free(git_repository *a0)
{
	static __typeof__(git_repository_free) *f;
	__typeof__(git_repository_free) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(git_repository_free) *)lazy_sym(&git2, GIT2_SONAME, "git_repository_free");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	g(a0);
}

int git_repository_head(git_reference **a0, git_repository *a1)
{
	static __typeof__(git_repository_head) *f;
	__typeof__(git_repository_head) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(git_repository_head) *)lazy_sym(&git2, GIT2_SONAME, "git_repository_head");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0, a1);
}

int git_repository_head_detached(git_repository *a0)
{
	static __typeof__(git_repository_head_detached) *f;
	__typeof__(git_repository_head_detached) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(git_repository_head_detached) *)lazy_sym(&git2, GIT2_SONAME, "git_repository_head_detached");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0);
}

int git_repository_open_ext(git_repository **a0, const char *a1, unsigned int a2, const char *a3)
{
	static __typeof__(git_repository_open_ext) *f;
	__typeof__(git_repository_open_ext) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(git_repository_open_ext) *)lazy_sym(&git2, GIT2_SONAME, "git_repository_open_ext");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0, a1, a2, a3);
}

const char *git_repository_workdir(const git_repository *a0)
{
	static __typeof__(git_repository_workdir) *f;
	__typeof__(git_repository_workdir) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(git_repository_workdir) *)lazy_sym(&git2, GIT2_SONAME, "git_repository_workdir");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0);
}

const git_status_entry *git_status_byindex(git_status_list *a0, size_t a1)
{
	static __typeof__(git_status_byindex) *f;
	__typeof__(git_status_byindex) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(git_status_byindex) *)lazy_sym(&git2, GIT2_SONAME, "git_status_byindex");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0, a1);
}

size_t git_status_list_entrycount(git_status_list *a0)
{
	static __typeof__(git_status_list_entrycount) *f;
	__typeof__(git_status_list_entrycount) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(git_status_list_entrycount) *)lazy_sym(&git2, GIT2_SONAME, "git_status_list_entrycount");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0);
}

void git_status_list_free(git_status_list *a0)
{
	static __typeof__(git_status_list_free) *f;
	__typeof__(git_status_list_free) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(git_status_list_free) *)lazy_sym(&git2, GIT2_SONAME, "git_status_list_free");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	g(a0);
}

int git_status_list_new(git_status_list **a0, git_repository *a1, const git_status_options *a2)
{
	static __typeof__(git_status_list_new) *f;
	__typeof__(git_status_list_new) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(git_status_list_new) *)lazy_sym(&git2, GIT2_SONAME, "git_status_list_new");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0, a1, a2);
}

int git_status_options_init(git_status_options *a0, unsigned int a1)
{
	static __typeof__(git_status_options_init) *f;
	__typeof__(git_status_options_init) *g = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (!g) {
		g = (__typeof__(git_status_options_init) *)lazy_sym(&git2, GIT2_SONAME, "git_status_options_init");
		__atomic_store_n(&f, g, __ATOMIC_RELEASE);
	}
	return g(a0, a1);
}
