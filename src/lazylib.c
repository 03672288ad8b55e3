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
 * real function, resolved once with dlsym() by one macro (LAZY). A function
 * used without a forwarder here fails at link time. The sonames come from the Makefile
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

/* the function NAME of a library, resolved by dlsym() on its first call
 * (a GNU statement expression: the pointer is kept per call site, which is
 * one per function here) */
#define LAZY(lib, soname, name)                                                   \
	({                                                                        \
		static __typeof__(name) *f_;                                      \
		__typeof__(name) *g_ = __atomic_load_n(&f_, __ATOMIC_ACQUIRE);    \
		if (!g_) {                                                        \
			g_ = (__typeof__(name) *)lazy_sym(&lib, soname, #name);   \
			__atomic_store_n(&f_, g_, __ATOMIC_RELEASE);              \
		}                                                                 \
		g_;                                                               \
	})
#define ARCHIVE(name) LAZY(archive, ARCHIVE_SONAME, name)
#define GIT2(name) LAZY(git2, GIT2_SONAME, name)

/* The forwarders: each has the library's own prototype and calls the
 * real function. */

struct archive_entry *archive_entry_clear(struct archive_entry *a0)
{
	return ARCHIVE(archive_entry_clear)(a0);
}

const char *archive_entry_hardlink(struct archive_entry *a0)
{
	return ARCHIVE(archive_entry_hardlink)(a0);
}

la_int64_t archive_entry_size(struct archive_entry *a0)
{
	return ARCHIVE(archive_entry_size)(a0);
}

int archive_entry_size_is_set(struct archive_entry *a0)
{
	return ARCHIVE(archive_entry_size_is_set)(a0);
}

__LA_MODE_T archive_entry_filetype(struct archive_entry *a0)
{
	return ARCHIVE(archive_entry_filetype)(a0);
}

void archive_entry_free(struct archive_entry *a0)
{
	ARCHIVE(archive_entry_free)(a0);
}

struct archive_entry *archive_entry_new(void)
{
	return ARCHIVE(archive_entry_new)();
}

const char *archive_entry_pathname(struct archive_entry *a0)
{
	return ARCHIVE(archive_entry_pathname)(a0);
}

void archive_entry_set_filetype(struct archive_entry *a0, unsigned int a1)
{
	ARCHIVE(archive_entry_set_filetype)(a0, a1);
}

void archive_entry_set_gid(struct archive_entry *a0, la_int64_t a1)
{
	ARCHIVE(archive_entry_set_gid)(a0, a1);
}

void archive_entry_set_mtime(struct archive_entry *a0, time_t a1, long a2)
{
	ARCHIVE(archive_entry_set_mtime)(a0, a1, a2);
}

void archive_entry_set_pathname(struct archive_entry *a0, const char *a1)
{
	ARCHIVE(archive_entry_set_pathname)(a0, a1);
}

void archive_entry_set_perm(struct archive_entry *a0, __LA_MODE_T a1)
{
	ARCHIVE(archive_entry_set_perm)(a0, a1);
}

void archive_entry_set_size(struct archive_entry *a0, la_int64_t a1)
{
	ARCHIVE(archive_entry_set_size)(a0, a1);
}

void archive_entry_set_uid(struct archive_entry *a0, la_int64_t a1)
{
	ARCHIVE(archive_entry_set_uid)(a0, a1);
}

const char *archive_error_string(struct archive *a0)
{
	return ARCHIVE(archive_error_string)(a0);
}

la_ssize_t archive_read_data(struct archive *a0, void *a1, size_t a2)
{
	return ARCHIVE(archive_read_data)(a0, a1, a2);
}

int archive_read_free(struct archive *a0)
{
	return ARCHIVE(archive_read_free)(a0);
}

struct archive *archive_read_new(void)
{
	return ARCHIVE(archive_read_new)();
}

int archive_read_next_header(struct archive *a0, struct archive_entry **a1)
{
	return ARCHIVE(archive_read_next_header)(a0, a1);
}

int archive_read_open_filename(struct archive *a0, const char *a1, size_t a2)
{
	return ARCHIVE(archive_read_open_filename)(a0, a1, a2);
}

int archive_read_open_memory(struct archive *a0, const void *a1, size_t a2)
{
	return ARCHIVE(archive_read_open_memory)(a0, a1, a2);
}

int archive_read_support_filter_all(struct archive *a0)
{
	return ARCHIVE(archive_read_support_filter_all)(a0);
}

int archive_read_support_format_all(struct archive *a0)
{
	return ARCHIVE(archive_read_support_format_all)(a0);
}

int archive_read_support_format_zip(struct archive *a0)
{
	return ARCHIVE(archive_read_support_format_zip)(a0);
}

int archive_write_add_filter_gzip(struct archive *a0)
{
	return ARCHIVE(archive_write_add_filter_gzip)(a0);
}

int archive_write_add_filter_zstd(struct archive *a0)
{
	return ARCHIVE(archive_write_add_filter_zstd)(a0);
}

int archive_write_close(struct archive *a0)
{
	return ARCHIVE(archive_write_close)(a0);
}

la_ssize_t archive_write_data(struct archive *a0, const void *a1, size_t a2)
{
	return ARCHIVE(archive_write_data)(a0, a1, a2);
}

int archive_write_free(struct archive *a0)
{
	return ARCHIVE(archive_write_free)(a0);
}

int archive_write_header(struct archive *a0, struct archive_entry *a1)
{
	return ARCHIVE(archive_write_header)(a0, a1);
}

struct archive *archive_write_new(void)
{
	return ARCHIVE(archive_write_new)();
}

int archive_write_open2(struct archive *a0, void *a1, archive_open_callback *a2, archive_write_callback *a3, archive_close_callback *a4, archive_free_callback *a5)
{
	return ARCHIVE(archive_write_open2)(a0, a1, a2, a3, a4, a5);
}

int archive_write_open_fd(struct archive *a0, int a1)
{
	return ARCHIVE(archive_write_open_fd)(a0, a1);
}

int archive_write_set_bytes_in_last_block(struct archive *a0, int a1)
{
	return ARCHIVE(archive_write_set_bytes_in_last_block)(a0, a1);
}

int archive_write_set_bytes_per_block(struct archive *a0, int a1)
{
	return ARCHIVE(archive_write_set_bytes_per_block)(a0, a1);
}

int archive_write_set_format_pax_restricted(struct archive *a0)
{
	return ARCHIVE(archive_write_set_format_pax_restricted)(a0);
}

int archive_write_set_format_zip(struct archive *a0)
{
	return ARCHIVE(archive_write_set_format_zip)(a0);
}

int archive_write_set_options(struct archive *a0, const char *a1)
{
	return ARCHIVE(archive_write_set_options)(a0, a1);
}

void git_buf_dispose(git_buf *a0)
{
	GIT2(git_buf_dispose)(a0);
}

void git_commit_free(git_commit *a0)
{
	GIT2(git_commit_free)(a0);
}

const git_oid *git_commit_id(const git_commit *a0)
{
	return GIT2(git_commit_id)(a0);
}

int git_commit_lookup(git_commit **a0, git_repository *a1, const git_oid *a2)
{
	return GIT2(git_commit_lookup)(a0, a1, a2);
}

git_time_t git_commit_time(const git_commit *a0)
{
	return GIT2(git_commit_time)(a0);
}

int git_describe_commit(git_describe_result **a0, git_object *a1, git_describe_options *a2)
{
	return GIT2(git_describe_commit)(a0, a1, a2);
}

int git_describe_format(git_buf *a0, const git_describe_result *a1, const git_describe_format_options *a2)
{
	return GIT2(git_describe_format)(a0, a1, a2);
}

int git_describe_format_options_init(git_describe_format_options *a0, unsigned int a1)
{
	return GIT2(git_describe_format_options_init)(a0, a1);
}

int git_describe_options_init(git_describe_options *a0, unsigned int a1)
{
	return GIT2(git_describe_options_init)(a0, a1);
}

void git_describe_result_free(git_describe_result *a0)
{
	GIT2(git_describe_result_free)(a0);
}

const git_error *git_error_last(void)
{
	return GIT2(git_error_last)();
}

int git_libgit2_init(void)
{
	return GIT2(git_libgit2_init)();
}

int git_libgit2_shutdown(void)
{
	return GIT2(git_libgit2_shutdown)();
}

char *git_oid_tostr(char *a0, size_t a1, const git_oid *a2)
{
	return GIT2(git_oid_tostr)(a0, a1, a2);
}

void git_reference_free(git_reference *a0)
{
	GIT2(git_reference_free)(a0);
}

int git_reference_resolve(git_reference **a0, const git_reference *a1)
{
	return GIT2(git_reference_resolve)(a0, a1);
}

const char *git_reference_shorthand(const git_reference *a0)
{
	return GIT2(git_reference_shorthand)(a0);
}

const git_oid *git_reference_target(const git_reference *a0)
{
	return GIT2(git_reference_target)(a0);
}

void git_repository_free(git_repository *a0)
{
	GIT2(git_repository_free)(a0);
}

int git_repository_head(git_reference **a0, git_repository *a1)
{
	return GIT2(git_repository_head)(a0, a1);
}

int git_repository_head_detached(git_repository *a0)
{
	return GIT2(git_repository_head_detached)(a0);
}

int git_repository_open_ext(git_repository **a0, const char *a1, unsigned int a2, const char *a3)
{
	return GIT2(git_repository_open_ext)(a0, a1, a2, a3);
}

const char *git_repository_workdir(const git_repository *a0)
{
	return GIT2(git_repository_workdir)(a0);
}

const git_status_entry *git_status_byindex(git_status_list *a0, size_t a1)
{
	return GIT2(git_status_byindex)(a0, a1);
}

size_t git_status_list_entrycount(git_status_list *a0)
{
	return GIT2(git_status_list_entrycount)(a0);
}

void git_status_list_free(git_status_list *a0)
{
	GIT2(git_status_list_free)(a0);
}

int git_status_list_new(git_status_list **a0, git_repository *a1, const git_status_options *a2)
{
	return GIT2(git_status_list_new)(a0, a1, a2);
}

int git_status_options_init(git_status_options *a0, unsigned int a1)
{
	return GIT2(git_status_options_init)(a0, a1);
}
