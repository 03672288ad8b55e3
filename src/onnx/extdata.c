/* extdata.c — external tensor data and atomic output files (see extdata.h). */
#include "onnx/extdata.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

struct ExtMap {
	char *location;
	const uint8_t *base;  /* NULL for an empty file */
	size_t size;
	struct ExtMap *next;
};

static int parse_i64(const char *s, int64_t *out)
{
	if (!*s)
		return -1;
	int64_t v = 0;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		if (v > (INT64_MAX - (*p - '0')) / 10)
			return -1;
		v = v * 10 + (*p - '0');
	}
	*out = v;
	return 0;
}

int ext_info(const Onnx__TensorProto *t, ExtInfo *info)
{
	const char *name = t->name ? t->name : "";
	info->location = NULL;
	info->offset = 0;
	info->length = -1;
	for (size_t i = 0; i < t->n_external_data; i++) {
		const char *k = t->external_data[i]->key, *v = t->external_data[i]->value;
		if (!k)
			return error("tensor '%s': external_data entry %zu has no key", name, i);
		if (!v)
			v = "";
		if (!strcmp(k, "location"))
			info->location = v;
		else if (!strcmp(k, "offset")) {
			if (parse_i64(v, &info->offset) < 0)
				return error("tensor '%s': external data offset '%s' is not a non-negative integer",
					     name, v);
		} else if (!strcmp(k, "length")) {
			if (parse_i64(v, &info->length) < 0)
				return error("tensor '%s': external data length '%s' is not a non-negative integer",
					     name, v);
		} else if (strcmp(k, "checksum"))
			return error("tensor '%s': unknown external_data key '%s' (expected location, offset, length or checksum)",
				     name, k);
	}
	if (!info->location)
		return error("tensor '%s': external data without location", name);
	if (ext_location_check(info->location) < 0)
		return error_prefix("tensor '%s'", name);
	return 0;
}

int ext_location_check(const char *loc)
{
	if (!*loc)
		return error("external data location is empty");
	if (loc[0] == '/')
		return error("external data location '%s' is an absolute path (expected a path relative to the model)",
			     loc);
	for (const char *p = loc; *p;) {
		size_t n = strcspn(p, "/\\");
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return error("external data location '%s' leaves the model's directory", loc);
		p += n;
		if (*p)
			p++;
	}
	return 0;
}


static int map_locked(ExtMap **list, const char *dir, const char *loc, const uint8_t **base,
		      size_t *size)
{
	for (ExtMap *e = *list; e; e = e->next)
		if (!strcmp(e->location, loc)) {
			*base = e->base;
			*size = e->size;
			return 0;
		}
	if (ext_location_check(loc) < 0)
		return -1;
	char *p = path_join(dir, loc);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		error("cannot open external data '%s':", p);
		free(p);
		return -1;
	}
	/* what was opened, not the name again (it may be swapped meanwhile) */
	char fdp[64];
	snprintf(fdp, sizeof fdp, "/proc/self/fd/%d", fd);
	if (!path_resolves_inside(dir, fdp)) {
		error("external data location '%s' leads outside the model's directory through a "
		      "symbolic link", loc);
		close(fd);
		free(p);
		return -1;
	}
	struct stat st;
	int bad = fstat(fd, &st) < 0 ? error("cannot stat external data '%s':", p)
		: !S_ISREG(st.st_mode) ? error("external data '%s' is not a regular file", p) : 0;
	if (bad < 0) {
		close(fd);
		free(p);
		return -1;
	}
	const uint8_t *b = NULL;
	if (st.st_size > 0) {
		void *mp = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (mp == MAP_FAILED) {
			error("cannot map external data '%s':", p);
			close(fd);
			free(p);
			return -1;
		}
		b = mp;
	}
	close(fd);
	free(p);
	ExtMap *e = xcalloc(1, sizeof *e);
	e->location = xstrdup(loc);
	e->base = b;
	e->size = (size_t)st.st_size;
	e->next = *list;
	*list = e;
	*base = b;
	*size = e->size;
	return 0;
}

/* kernels may read initializers from several threads */
static pthread_mutex_t map_lock = PTHREAD_MUTEX_INITIALIZER;

int ext_map(ExtMap **list, const char *dir, const char *loc, const uint8_t **base,
	    size_t *size)
{
	pthread_mutex_lock(&map_lock);
	int r = map_locked(list, dir, loc, base, size);
	pthread_mutex_unlock(&map_lock);
	return r;
}

void ext_free(ExtMap *list)
{
	for (ExtMap *e = list, *n; e; e = n) {
		n = e->next;
		if (e->base)
			munmap((void *)e->base, e->size);
		free(e->location);
		free(e);
	}
}

void ext_release(const void *p, size_t n)
{
	long pg = sysconf(_SC_PAGESIZE);
	if (!p || !n || pg <= 0)
		return;
	/* whole pages around the range: a mapping covers whole pages, and
	 * dropping a neighbour's page costs it only a fault from the file */
	uintptr_t a = (uintptr_t)p & ~(uintptr_t)(pg - 1);
	uintptr_t e = ((uintptr_t)p + n + (uintptr_t)pg - 1) & ~(uintptr_t)(pg - 1);
	madvise((void *)a, e - a, MADV_DONTNEED);
}

static int allow_links;

void ext_allow_links(int on)
{
	allow_links = on;
}

int ext_linkable(int fd)
{
	struct stat st;
	return allow_links && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && !(st.st_mode & 0222);
}

int ext_copy_range(int in, const char *inpath, uint64_t inoff, int out, const char *outpath,
		   uint64_t outoff, uint64_t n)
{
	int kernel = 1;
	char *buf = NULL;
	while (n > 0) {
		size_t chunk = n > (1u << 30) ? (1u << 30) : (size_t)n;
		ssize_t w;
		if (kernel) {
			loff_t io = (loff_t)inoff, oo = (loff_t)outoff;
			w = copy_file_range(in, &io, out, &oo, chunk, 0);
			if (w < 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL ||
				      errno == EOPNOTSUPP)) {
				kernel = 0;
				continue;
			}
			if (w == 0) {
				free(buf);
				errno = EIO;
				return error("cannot read '%s': file ends early", inpath);
			}
		} else {
			if (!buf)
				buf = xmalloc(1 << 20);
			if (chunk > (1u << 20))
				chunk = 1u << 20;
			w = pread(in, buf, chunk, (off_t)inoff);
			if (w == 0) {
				free(buf);
				return error("cannot read '%s': file ends early", inpath);
			}
			if (w > 0) {
				const char *p = buf;
				for (ssize_t left = w; left > 0;) {
					ssize_t k = pwrite(out, p, (size_t)left, (off_t)(outoff + (uint64_t)(p - buf)));
					if (k < 0 && errno == EINTR)
						continue;
					if (k <= 0) {
						free(buf);
						return error("cannot write '%s':", outpath);
					}
					p += k;
					left -= k;
				}
			}
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			free(buf);
			return error("cannot copy '%s' to '%s':", inpath, outpath);
		}
		inoff += (uint64_t)w;
		outoff += (uint64_t)w;
		n -= (uint64_t)w;
	}
	free(buf);
	return 0;
}

int ext_copy_file(const char *src, const char *dst)
{
	int in = open(src, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return error("cannot open '%s':", src);
	struct stat st;
	if (fstat(in, &st) < 0) {
		close(in);
		return error("cannot stat '%s':", src);
	}
	OutFile f = {.fd = -1};
	int r = ext_linkable(in) ? outfile_link(&f, dst, src) : 1;
	if (r == 1) {
		r = outfile_open(&f, dst);
		if (r == 0)
			r = ext_copy_range(in, src, 0, f.fd, dst, 0, (uint64_t)st.st_size);
	}
	close(in);
	if (r == 0)
		return outfile_commit(&f);
	outfile_abort(&f);
	return -1;
}

int outfile_link(OutFile *f, const char *path, const char *src)
{
	/* reserve a unique name, then put the link in its place */
	if (outfile_open(f, path) < 0)
		return -1;
	close(f->fd);
	f->fd = -1;
	unlink(f->tmp);
	if (link(src, f->tmp) < 0) {
		int e = errno;
		free(f->tmp);
		free(f->path);
		f->tmp = f->path = NULL;
		if (e == EXDEV || e == EPERM || e == EMLINK || e == EEXIST || e == ENOTSUP)
			return 1;
		errno = e;
		return error("cannot link '%s' to '%s':", src, path);
	}
	f->linked = 1;
	return 0;
}

int outfile_open(OutFile *f, const char *path)
{
	f->path = xstrdup(path);
	f->tmp = xasprintf("%s.tmp.XXXXXX", path);
	f->fd = mkostemp(f->tmp, O_CLOEXEC);
	if (f->fd < 0) {
		char *dir = path_dir(path);
		error("cannot create a file in '%s':", dir);
		free(dir);
		free(f->path);
		free(f->tmp);
		f->path = f->tmp = NULL;
		return -1;
	}
	return 0;
}

int outfile_pwrite(OutFile *f, const void *p, size_t n, uint64_t off)
{
	const uint8_t *b = p;
	while (n > 0) {
		size_t chunk = n > (1u << 30) ? (1u << 30) : n;
		ssize_t w = pwrite(f->fd, b, chunk, (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (w == 0)
				errno = EIO;
			return error("cannot write '%s':", f->path);
		}
		b += w;
		n -= (size_t)w;
		off += (uint64_t)w;
	}
	return 0;
}

int outfile_write(OutFile *f, const void *p, size_t n)
{
	const uint8_t *b = p;
	while (n > 0) {
		size_t chunk = n > (1u << 30) ? (1u << 30) : n;
		ssize_t w = write(f->fd, b, chunk);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (w == 0)
				errno = EIO;
			return error("cannot write '%s':", f->path);
		}
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

int outfile_commit(OutFile *f)
{
	if (f->linked) {
		/* the linked file is complete already: publish it under its name */
		if (rename(f->tmp, f->path) < 0) {
			error("cannot rename '%s' to '%s':", f->tmp, f->path);
			outfile_abort(f);
			return -1;
		}
		free(f->tmp);
		free(f->path);
		f->tmp = f->path = NULL;
		f->linked = 0;
		return 0;
	}
	if (fchmod(f->fd, 0644) < 0) { /* not fsynced: see write_file_atomic */
		error("cannot write '%s':", f->path);
		outfile_abort(f);
		return -1;
	}
	int r = close(f->fd);
	f->fd = -1;
	if (r < 0) {
		error("cannot write '%s':", f->path);
		outfile_abort(f);
		return -1;
	}
	if (rename(f->tmp, f->path) < 0) {
		error("cannot rename '%s' to '%s':", f->tmp, f->path);
		outfile_abort(f);
		return -1;
	}
	free(f->tmp);
	free(f->path);
	f->tmp = f->path = NULL;
	return 0;
}

void outfile_abort(OutFile *f)
{
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
	if (f->tmp)
		unlink(f->tmp);
	free(f->tmp);
	free(f->path);
	f->tmp = f->path = NULL;
	f->linked = 0;
}
