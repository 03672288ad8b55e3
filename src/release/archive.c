/* archive.c — reproducible archives with libarchive, and reading them back.
 *
 * Every entry gets the same metadata whatever the machine: its path under
 * the top directory, mode 0644 (files) or 0755 (directories), uid and gid 0
 * with no user or group names, the given mtime and no atime, ctime or
 * birthtime. tar archives are ustar as far as it goes (pax restricted adds
 * a pax header only for what ustar cannot hold, such as long paths); gzip
 * writes no timestamp; zip writes DOS times computed in UTC. Entries are
 * written in the order given (sorted by the caller). The archive is written
 * to a temporary name beside its final one and renamed into place when
 * complete; an error or a signal removes it. An archive already at the
 * final name stays when it holds the same bytes and is refused when it
 * does not, unless the caller forces the replacement. */
#include "release/release.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

const char *archive_ext(const char *format)
{
	if (!strcmp(format, "tar.gz") || !strcmp(format, "tar.zst") || !strcmp(format, "zip"))
		return format;
	return NULL;
}

/* the temporary file to remove if a signal arrives while writing */
static char tmp_path[PATH_MAX];
static volatile sig_atomic_t tmp_live;

static void on_signal(int sig)
{
	if (tmp_live)
		unlink(tmp_path);
	signal(sig, SIG_DFL);
	raise(sig);
}

static int aerr(struct archive *a, const char *what, const char *path)
{
	const char *m = archive_error_string(a);
	return error("cannot write archive '%s': %s: %s", path, what, m ? m : "unknown libarchive error");
}

static int setup_format(struct archive *a, const char *format, const char *path)
{
	int r;
	if (!strcmp(format, "zip")) {
		r = archive_write_set_format_zip(a);
		if (r == ARCHIVE_OK)
			r = archive_write_set_options(a, "zip:compression=deflate");
	} else {
		r = archive_write_set_format_pax_restricted(a);
		if (r == ARCHIVE_OK && !strcmp(format, "tar.gz")) {
			r = archive_write_add_filter_gzip(a);
			if (r == ARCHIVE_OK)
				r = archive_write_set_options(a, "gzip:!timestamp");
		} else if (r == ARCHIVE_OK) {
			r = archive_write_add_filter_zstd(a);
		}
	}
	/* write in 1 MiB blocks and never pad the last one: the bytes are
	 * the same as with any block size */
	if (r == ARCHIVE_OK)
		r = archive_write_set_bytes_per_block(a, 1 << 20);
	if (r == ARCHIVE_OK)
		r = archive_write_set_bytes_in_last_block(a, 1);
	if (r != ARCHIVE_OK)
		return aerr(a, format, path);
	return 0;
}

static int write_entry(struct archive *a, const char *top, Entry *e, int64_t mtime, const char *path,
		       uint8_t *buf)
{
	struct archive_entry *en = archive_entry_new();
	char *name = *e->name ? xasprintf("%s/%s", top, e->name) : xstrdup(top);
	archive_entry_set_pathname(en, name);
	archive_entry_set_filetype(en, e->kind == ENT_DIR ? AE_IFDIR : AE_IFREG);
	archive_entry_set_perm(en, e->kind == ENT_DIR ? 0755 : 0644);
	archive_entry_set_uid(en, 0);
	archive_entry_set_gid(en, 0);
	archive_entry_set_mtime(en, (time_t)mtime, 0);
	archive_entry_set_size(en, e->kind == ENT_DIR ? 0 : e->size);
	int r = archive_write_header(a, en);
	archive_entry_free(en);
	if (r != ARCHIVE_OK) {
		r = aerr(a, name, path);
		free(name);
		return r;
	}
	if (e->kind == ENT_DIR) {
		free(name);
		return 0;
	}
	if (e->data) {
		if (archive_write_data(a, e->data, e->datalen) != (la_ssize_t)e->datalen) {
			r = aerr(a, name, path);
			free(name);
			return r;
		}
		free(name);
		return 0;
	}
	int fd = open(e->src, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		free(name);
		return error("cannot open '%s':", e->src);
	}
	posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	HashState *h = hash_new();
	int64_t total = 0;
	int ret = 0;
	for (;;) {
		ssize_t n = read(fd, buf, 1 << 20);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = error("cannot read '%s':", e->src);
			break;
		}
		if (n == 0)
			break;
		hash_update(h, buf, (size_t)n);
		total += n;
		if (total + (int64_t)e->taillen > e->size) {
			ret = error("'%s' grew while the release was written", e->src);
			break;
		}
		if (archive_write_data(a, buf, (size_t)n) != n) {
			ret = aerr(a, name, path);
			break;
		}
	}
	close(fd);
	if (ret == 0 && e->tail) {
		hash_update(h, e->tail, e->taillen);
		total += (int64_t)e->taillen;
		if (archive_write_data(a, e->tail, e->taillen) != (la_ssize_t)e->taillen)
			ret = aerr(a, name, path);
	}
	Hash got = hash_final(h);
	if (ret == 0 && (total != e->size || !hash_eq(got, e->xxh)))
		ret = error("'%s' changed while the release was written", e->src);
	free(name);
	return ret;
}

/* 1 when files a and b hold the same bytes, 0 when not, -1 with error() */
static int same_bytes(const char *a, const char *b)
{
	Hash ha, hb;
	struct stat sa, sb;
	if (stat(a, &sa) < 0 || stat(b, &sb) < 0)
		return error("cannot read '%s':", stat(a, &sa) < 0 ? a : b);
	if (sa.st_size != sb.st_size)
		return 0;
	if (hash_file(a, &ha) < 0 || hash_file(b, &hb) < 0)
		return -1;
	return hash_eq(ha, hb);
}

int archive_write_release(const char *path, const char *format, const char *top, EntryList *l,
			  int64_t mtime, int force)
{
	char *dir = path_dir(path);
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	int n = snprintf(tmp_path, sizeof tmp_path, "%s/.%s.tmp-XXXXXX", dir, base);
	free(dir);
	if (n < 0 || (size_t)n >= sizeof tmp_path)
		return error("archive path too long: '%s'", path);
	struct sigaction sa = {.sa_handler = on_signal}, old[3];
	sigemptyset(&sa.sa_mask);
	int sigs[3] = {SIGINT, SIGTERM, SIGHUP};
	for (int i = 0; i < 3; i++)
		sigaction(sigs[i], &sa, &old[i]);
	int fd = mkstemp(tmp_path);
	if (fd < 0) {
		int err = errno;
		for (int i = 0; i < 3; i++)
			sigaction(sigs[i], &old[i], NULL);
		errno = err;
		char *d = path_dir(path);
		int r = error("cannot create a file in '%s/':", d);
		free(d);
		return r;
	}
	tmp_live = 1;
	/* zip stores DOS times in local time: compute them in UTC */
	char *oldtz = getenv("TZ") ? xstrdup(getenv("TZ")) : NULL;
	setenv("TZ", "UTC0", 1);
	tzset();
	struct archive *a = archive_write_new();
	uint8_t *buf = xmalloc(1 << 20);
	int ret = setup_format(a, format, path);
	if (ret == 0 && archive_write_open_fd(a, fd) != ARCHIVE_OK)
		ret = aerr(a, "open", path);
	for (size_t i = 0; ret == 0 && i < l->n; i++)
		ret = write_entry(a, top, &l->v[i], mtime, path, buf);
	if (ret == 0 && archive_write_close(a) != ARCHIVE_OK)
		ret = aerr(a, "close", path);
	archive_write_free(a);
	free(buf);
	if (oldtz) {
		setenv("TZ", oldtz, 1);
		free(oldtz);
	} else {
		unsetenv("TZ");
	}
	tzset();
	if (ret == 0) {
		mode_t um = umask(0);
		umask(um);
		if (fchmod(fd, 0666 & ~um) < 0)
			ret = error("cannot set the mode of '%s':", tmp_path);
		else if (fsync(fd) < 0)
			ret = error("cannot write '%s':", tmp_path);
	}
	if (close(fd) < 0 && ret == 0)
		ret = error("cannot write '%s':", tmp_path);
	struct stat st;
	if (ret == 0 && !force && lstat(path, &st) == 0) {
		int same = S_ISREG(st.st_mode) ? same_bytes(tmp_path, path) : 0;
		if (same == 1)
			ret = 1;
		else if (same == 0)
			ret = error("'%s' exists with other bytes (another commit, work tree or quantmake version made it): remove it, or give --force to replace it",
				    path);
		else
			ret = -1;
	}
	if (ret == 0 && rename(tmp_path, path) < 0)
		ret = error("cannot rename '%s' to '%s':", tmp_path, path);
	if (ret != 0)
		unlink(tmp_path);
	tmp_live = 0;
	for (int i = 0; i < 3; i++)
		sigaction(sigs[i], &old[i], NULL);
	return ret;
}

/* ---- reading ---- */

static int is_manifest(const char *name)
{
	const char *slash = strchr(name, '/');
	if (!slash)
		return !strcmp(name, "MANIFEST.json");
	return !strcmp(slash + 1, "MANIFEST.json");
}

/* what a non-regular entry is (NULL: a regular file, read) */
static const char *entry_kind(struct archive_entry *en)
{
	if (archive_entry_hardlink(en))
		return "a hard link";
	switch (archive_entry_filetype(en)) {
	case AE_IFREG:
		return NULL;
	case AE_IFDIR:
		return "a directory";
	case AE_IFLNK:
		return "a symbolic link";
	case AE_IFCHR:
	case AE_IFBLK:
		return "a device node";
	case AE_IFIFO:
		return "a fifo";
	case AE_IFSOCK:
		return "a socket";
	default:
		return "not a regular file";
	}
}

int archive_read_all(const char *path, ReadEntry **out, size_t *nout, char **manifest, char **manifest_name)
{
	*out = NULL;
	*nout = 0;
	*manifest = NULL;
	*manifest_name = NULL;
	struct archive *a = archive_read_new();
	archive_read_support_filter_all(a);
	archive_read_support_format_all(a);
	if (archive_read_open_filename(a, path, 1 << 16) != ARCHIVE_OK) {
		const char *m = archive_error_string(a);
		error("cannot read archive '%s': %s", path, m ? m : "unknown libarchive error");
		archive_read_free(a);
		return -1;
	}
	uint8_t *buf = xmalloc(1 << 20);
	ReadEntry *v = NULL;
	size_t n = 0, cap = 0;
	int ret = 0;
	struct archive_entry *en;
	for (;;) {
		int r = archive_read_next_header(a, &en);
		if (r == ARCHIVE_EOF)
			break;
		if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
			const char *m = archive_error_string(a);
			ret = error("cannot read archive '%s': %s", path, m ? m : "unknown libarchive error");
			break;
		}
		const char *name = archive_entry_pathname(en);
		if (!name || !*name) {
			ret = error("cannot read archive '%s': an entry has no name", path);
			break;
		}
		if (path_outside(name)) {
			ret = error("archive '%s': entry '%s' is an absolute path or leads through '..' (refused)",
				    path, name);
			break;
		}
		const char *kind = entry_kind(en);
		int keep = !kind && is_manifest(name);
		if (keep && *manifest_name) {
			ret = error("archive '%s': two MANIFEST.json entries ('%s' and '%s')", path, *manifest_name,
				    name);
			break;
		}
		if (keep && archive_entry_size_is_set(en) && archive_entry_size(en) > MANIFEST_MAX_BYTES) {
			ret = error("archive '%s': '%s' declares %lld bytes, over the limit of %lld MiB for a manifest",
				    path, name, (long long)archive_entry_size(en), (long long)(MANIFEST_MAX_BYTES >> 20));
			break;
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 32;
			v = xreallocarray(v, cap, sizeof *v);
		}
		ReadEntry *e = &v[n++];
		memset(e, 0, sizeof *e);
		e->name = xstrdup(name);
		e->kind = kind;
		if (kind)
			continue;
		if (keep)
			*manifest_name = xstrdup(name);
		StrBuf content = {0};
		HashState *h = hash_new();
		void *sha = sha_begin();
		for (;;) {
			la_ssize_t got = archive_read_data(a, buf, 1 << 20);
			if (got < 0) {
				const char *m = archive_error_string(a);
				ret = error("cannot read '%s' in archive '%s': %s", name, path,
					    m ? m : "unknown libarchive error");
				break;
			}
			if (got == 0)
				break;
			hash_update(h, buf, (size_t)got);
			sha_add(sha, buf, (size_t)got);
			e->size += got;
			if (keep && e->size > MANIFEST_MAX_BYTES) {
				ret = error("archive '%s': '%s' is larger than the limit of %lld MiB for a manifest",
					    path, name, (long long)(MANIFEST_MAX_BYTES >> 20));
				break;
			}
			if (keep)
				sb_add(&content, buf, (size_t)got);
		}
		e->xxh = hash_final(h);
		sha_end(sha, e->sha);
		if (ret < 0) {
			sb_release(&content);
			break;
		}
		if (keep)
			*manifest = sb_detach(&content);
	}
	free(buf);
	archive_read_free(a);
	if (ret < 0) {
		for (size_t i = 0; i < n; i++)
			free(v[i].name);
		free(v);
		free(*manifest);
		free(*manifest_name);
		*manifest = *manifest_name = NULL;
		return -1;
	}
	*out = v;
	*nout = n;
	return 0;
}
