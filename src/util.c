/* util.c — see util.h. */
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char *argv0 = "quantmake";
static _Thread_local char errbuf[2048];

__attribute__((format(printf, 3, 0)))
static void vmsg(FILE *f, const char *prefix, const char *fmt, va_list ap)
{
	int e = errno;
	size_t n = strlen(fmt);
	fprintf(f, "%s: %s", argv0, prefix);
	vfprintf(f, fmt, ap);
	if (n > 0 && fmt[n - 1] == ':')
		fprintf(f, " %s", strerror(e));
	fputc('\n', f);
}

void fatal(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmsg(stderr, "", fmt, ap);
	va_end(ap);
	exit(2);
}

void fatalx(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmsg(stderr, "", fmt, ap);
	va_end(ap);
	exit(code);
}

void warn(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmsg(stderr, "warning: ", fmt, ap);
	va_end(ap);
}

/* (the format attributes here let clang's -Wformat-nonliteral see that
 * fmt is a caller's checked format) */
__attribute__((format(printf, 1, 0)))
int verror(const char *fmt, va_list ap)
{
	int e = errno;
	size_t n = strlen(fmt);
	vsnprintf(errbuf, sizeof errbuf, fmt, ap);
	if (n > 0 && fmt[n - 1] == ':') {
		size_t l = strlen(errbuf);
		snprintf(errbuf + l, sizeof errbuf - l, " %s", strerror(e));
	}
	return -1;
}

int error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	verror(fmt, ap);
	va_end(ap);
	return -1;
}

const char *errmsg(void)
{
	return errbuf;
}

int error_prefix(const char *fmt, ...)
{
	char old[sizeof errbuf];
	va_list ap;
	memcpy(old, errbuf, sizeof old);
	va_start(ap, fmt);
	int n = vsnprintf(errbuf, sizeof errbuf, fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n + 2 < sizeof errbuf) {
		size_t left = sizeof errbuf - (size_t)n;
		errbuf[n] = ':';
		errbuf[n + 1] = ' ';
		memcpy(errbuf + n + 2, old, left - 2);
		errbuf[sizeof errbuf - 1] = 0;
	}
	return -1;
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		fatalx(1, "out of memory allocating %zu bytes", n);
	return p;
}

void *xcalloc(size_t n, size_t sz)
{
	void *p = calloc(n ? n : 1, sz ? sz : 1);
	if (!p)
		fatalx(1, "out of memory allocating %zu x %zu bytes", n, sz);
	return p;
}

void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		fatalx(1, "out of memory allocating %zu bytes", n);
	return p;
}

void *xreallocarray(void *p, size_t n, size_t sz)
{
	if (sz && n > SIZE_MAX / sz)
		fatalx(1, "allocation overflow (%zu x %zu)", n, sz);
	return xrealloc(p, n * sz);
}

char *xstrdup(const char *s)
{
	return xstrndup(s, strlen(s));
}

char *xstrndup(const char *s, size_t n)
{
	char *p = xmalloc(n + 1);
	memcpy(p, s, n);
	p[n] = 0;
	return p;
}

char *xasprintf(const char *fmt, ...)
{
	StrBuf sb = {0};
	va_list ap;
	va_start(ap, fmt);
	sb_vprintf(&sb, fmt, ap);
	va_end(ap);
	return sb_detach(&sb);
}

void sb_grow(StrBuf *sb, size_t extra)
{
	size_t need = sb->len + extra + 1;
	if (need <= sb->cap)
		return;
	size_t cap = sb->cap ? sb->cap : 64;
	while (cap < need)
		cap *= 2;
	sb->buf = xrealloc(sb->buf, cap);
	sb->cap = cap;
}

void sb_add(StrBuf *sb, const void *p, size_t n)
{
	sb_grow(sb, n);
	if (n) /* p may be NULL then (an empty StrBuf's buf) */
		memcpy(sb->buf + sb->len, p, n);
	sb->len += n;
	sb->buf[sb->len] = 0;
}

void sb_puts(StrBuf *sb, const char *s)
{
	sb_add(sb, s, strlen(s));
}

void sb_putc(StrBuf *sb, char c)
{
	sb_add(sb, &c, 1);
}

__attribute__((format(printf, 2, 0)))
void sb_vprintf(StrBuf *sb, const char *fmt, va_list ap)
{
	va_list ap2;
	sb_grow(sb, 64);
	va_copy(ap2, ap);
	int n = vsnprintf(sb->buf + sb->len, sb->cap - sb->len, fmt, ap2);
	va_end(ap2);
	if (n < 0)
		return;
	if ((size_t)n >= sb->cap - sb->len) {
		sb_grow(sb, (size_t)n);
		vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap);
	}
	sb->len += (size_t)n;
}

void sb_printf(StrBuf *sb, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	sb_vprintf(sb, fmt, ap);
	va_end(ap);
}

void sb_json_str(StrBuf *sb, const char *s)
{
	sb_putc(sb, '"');
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		/* a run of characters that need no escape goes in one piece
		 * (quant.json names every node of the model) */
		size_t n = 0;
		while (p[n] >= 0x20 && p[n] != '"' && p[n] != '\\')
			n++;
		if (n) {
			sb_add(sb, p, n);
			p += n - 1;
			continue;
		}
		switch (*p) {
		case '"': sb_puts(sb, "\\\""); break;
		case '\\': sb_puts(sb, "\\\\"); break;
		case '\n': sb_puts(sb, "\\n"); break;
		case '\t': sb_puts(sb, "\\t"); break;
		case '\r': sb_puts(sb, "\\r"); break;
		default: sb_printf(sb, "\\u%04x", *p); break; /* the other controls */
		}
	}
	sb_putc(sb, '"');
}

void sb_reset(StrBuf *sb)
{
	sb->len = 0;
	if (sb->buf)
		sb->buf[0] = 0;
}

char *sb_detach(StrBuf *sb)
{
	char *p = sb->buf ? sb->buf : xstrdup("");
	sb->buf = NULL;
	sb->len = sb->cap = 0;
	return p;
}

void sb_release(StrBuf *sb)
{
	free(sb->buf);
	sb->buf = NULL;
	sb->len = sb->cap = 0;
}

void pv_push(PtrVec *pv, void *p)
{
	if (pv->n == pv->cap) {
		pv->cap = pv->cap ? pv->cap * 2 : 8;
		pv->v = xreallocarray(pv->v, pv->cap, sizeof *pv->v);
	}
	pv->v[pv->n++] = p;
}

void pv_free(PtrVec *pv)
{
	free(pv->v);
	pv->v = NULL;
	pv->n = pv->cap = 0;
}

void pv_free_all(PtrVec *pv)
{
	for (size_t i = 0; i < pv->n; i++)
		free(pv->v[i]);
	pv_free(pv);
}

void split_words(const char *v, PtrVec *out)
{
	for (const char *s = v; s && *s;) {
		while (*s == ' ' || *s == '\t' || *s == ',')
			s++;
		const char *e = s;
		while (*e && *e != ' ' && *e != '\t' && *e != ',')
			e++;
		if (e > s)
			pv_push(out, xstrndup(s, (size_t)(e - s)));
		s = e;
	}
}

int path_outside(const char *p)
{
	return p[0] == '/' || !strcmp(p, "..") || !strncmp(p, "../", 3) || strstr(p, "/../") != NULL ||
	       (strlen(p) >= 3 && !strcmp(p + strlen(p) - 3, "/.."));
}

int path_resolves_inside(const char *dir, const char *path)
{
	char *rd = realpath(dir, NULL), *rp = realpath(path, NULL);
	int in = 0;
	if (rd && rp) {
		size_t n = strlen(rd);
		in = !strncmp(rd, rp, n) && (rp[n] == '/' || rp[n] == 0 || (n == 1 && rd[0] == '/'));
	}
	free(rd);
	free(rp);
	return in;
}

char *path_join(const char *a, const char *b)
{
	if (!a || !*a || b[0] == '/')
		return xstrdup(b);
	size_t la = strlen(a), lb = strlen(b);
	int slash = a[la - 1] != '/';
	char *p = xmalloc(la + slash + lb + 1);
	memcpy(p, a, la);
	if (slash)
		p[la] = '/';
	memcpy(p + la + slash, b, lb + 1);
	return p;
}

char *path_dir(const char *path)
{
	const char *s = strrchr(path, '/');
	if (!s)
		return xstrdup(".");
	if (s == path)
		return xstrdup("/");
	return xstrndup(path, (size_t)(s - path));
}

int mkdirs(const char *path)
{
	/* usually only the last component is new, or none is */
	if (mkdir(path, 0777) == 0 || errno == EEXIST)
		return 0;
	char *p = xstrdup(path);
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = 0;
		if (mkdir(p, 0777) < 0 && errno != EEXIST) {
			error("cannot create directory '%s':", p);
			free(p);
			return -1;
		}
		*s = '/';
	}
	int r = 0;
	if (mkdir(p, 0777) < 0 && errno != EEXIST)
		r = error("cannot create directory '%s':", p);
	free(p);
	return r;
}

int mkdir_ignored(const char *path)
{
	struct stat st;
	if (stat(path, &st) == 0)
		return 0;
	if (errno != ENOENT)
		return error("cannot read '%s':", path);
	if (mkdirs(path) < 0)
		return -1;
	char *gi = path_join(path, ".gitignore");
	static const char text[] = "# made by quantmake: everything here is generated\n*\n";
	int r = write_file_atomic(gi, text, sizeof text - 1);
	free(gi);
	return r;
}

int rmtree(const char *path)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : error("cannot stat '%s':", path);
	if (!S_ISDIR(st.st_mode)) {
		if (unlink(path) < 0)
			return error("cannot remove '%s':", path);
		return 0;
	}
	DIR *d = opendir(path);
	if (!d)
		return error("cannot open directory '%s':", path);
	struct dirent *e;
	int r = 0;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char *c = path_join(path, e->d_name);
		if (rmtree(c) < 0)
			r = -1;
		free(c);
	}
	closedir(d);
	if (r == 0 && rmdir(path) < 0)
		r = error("cannot remove directory '%s':", path);
	return r;
}

int read_blocks(int fd, const char *path, int64_t size, void *buf, size_t n,
		void (*fn)(void *ud, const void *p, size_t n), void *ud)
{
	for (int64_t got = 0; size < 0 || got < size;) {
		ssize_t r = read(fd, buf, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return error("cannot read '%s':", path);
		if (r == 0)
			break;
		fn(ud, buf, (size_t)r);
		got += r;
	}
	return 0;
}

int read_file(const char *path, char **data, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return error("cannot open '%s':", path);
	struct stat st;
	if (fstat(fd, &st) < 0) {
		close(fd);
		return error("cannot stat '%s':", path);
	}
	/* a byte more than the size: a read short of it is the end, no
	 * second read(2) to find it (calibration reads thousands of small files) */
	size_t cap = st.st_size > 0 ? (size_t)st.st_size + 1 : 4096, n = 0;
	char *buf = xmalloc(cap + 1);
	for (;;) {
		if (n == cap) {
			cap *= 2;
			buf = xrealloc(buf, cap + 1);
		}
		ssize_t r = read(fd, buf + n, cap - n);
		if (r >= 0 && (size_t)r < cap - n && S_ISREG(st.st_mode) && n + (size_t)r >= (size_t)st.st_size) {
			n += (size_t)r;
			break;
		}
		if (r < 0) {
			if (errno == EINTR)
				continue;
			free(buf);
			close(fd);
			return error("cannot read '%s':", path);
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	buf[n] = 0;
	*data = buf;
	*len = n;
	return 0;
}

int write_all(int fd, const void *data, size_t len)
{
	const char *p = data;
	while (len > 0) {
		ssize_t w = write(fd, p, len > (1u << 30) ? (1u << 30) : len);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

/* Opens a unique temp file beside path; returns fd and sets *tmp. */
static int open_temp_beside(const char *path, char **tmp)
{
	*tmp = xasprintf("%s.tmp.XXXXXX", path);
	int fd = mkostemp(*tmp, O_CLOEXEC);
	if (fd < 0) {
		error("cannot create '%s':", *tmp);
		free(*tmp);
		*tmp = NULL;
	}
	return fd;
}

static int finish_temp(int fd, char *tmp, const char *path, unsigned mode)
{
	if (fchmod(fd, mode) < 0) {
		error("cannot write '%s':", path);
		close(fd);
		goto fail;
	}
	if (close(fd) < 0) {
		error("cannot write '%s':", path);
		goto fail;
	}
	if (rename(tmp, path) < 0) {
		error("cannot rename to '%s':", path);
		goto fail;
	}
	free(tmp);
	return 0;
fail:
	unlink(tmp);
	free(tmp);
	return -1;
}

int write_file_atomic(const char *path, const void *data, size_t len)
{
	char *tmp;
	int fd = open_temp_beside(path, &tmp);
	if (fd < 0)
		return -1;
	if (write_all(fd, data, len) < 0) {
		error("cannot write '%s':", path);
		close(fd);
		unlink(tmp);
		free(tmp);
		return -1;
	}
	return finish_temp(fd, tmp, path, 0644);
}

int copy_file_atomic(const char *src, const char *dst, unsigned mode)
{
	int in = open(src, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return error("cannot open '%s':", src);
	char *tmp;
	int fd = open_temp_beside(dst, &tmp);
	if (fd < 0) {
		close(in);
		return -1;
	}
	static _Thread_local char buf[1 << 16];
	for (;;) {
		ssize_t r = read(in, buf, sizeof buf);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 || (r > 0 && write_all(fd, buf, (size_t)r) < 0)) {
			error(r < 0 ? "cannot read '%s':" : "cannot write '%s':", r < 0 ? src : dst);
			close(in);
			close(fd);
			unlink(tmp);
			free(tmp);
			return -1;
		}
		if (r == 0)
			break;
	}
	close(in);
	return finish_temp(fd, tmp, dst, mode);
}

double now_sec(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	if (la > 64 || lb > 64)
		return 1000;
	int d[65][65];
	for (size_t i = 0; i <= la; i++)
		d[i][0] = (int)i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = (int)j;
	for (size_t i = 1; i <= la; i++)
		for (size_t j = 1; j <= lb; j++) {
			int c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
			if (d[i - 1][j] + 1 < c)
				c = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < c)
				c = d[i][j - 1] + 1;
			d[i][j] = c;
		}
	return d[la][lb];
}

int ncpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int)n : 1;
}

int64_t parse_size(const char *s)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || v < 0)
		return -1;
	int64_t mul = 1;
	switch (*end) {
	case 0: break;
	case 'k': case 'K': mul = 1LL << 10; end++; break;
	case 'm': case 'M': mul = 1LL << 20; end++; break;
	case 'g': case 'G': mul = 1LL << 30; end++; break;
	case 't': case 'T': mul = 1LL << 40; end++; break;
	default: return -1;
	}
	if (*end == 'i')
		end++;
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end)
		return -1;
	return (int64_t)(v * (double)mul);
}

int cpu_avx512f(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
	static int avail = -1;
	int a = __atomic_load_n(&avail, __ATOMIC_RELAXED);
	if (a < 0) {
		__builtin_cpu_init();
		a = __builtin_cpu_supports("avx512f") ? 1 : 0;
		__atomic_store_n(&avail, a, __ATOMIC_RELAXED);
	}
	return a;
#else
	return 0;
#endif
}

static int strp_cmp(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

void pv_sort_str(PtrVec *pv)
{
	if (pv->n > 1)
		qsort(pv->v, pv->n, sizeof *pv->v, strp_cmp);
}
