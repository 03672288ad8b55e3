/* jobserver.c — GNU make's jobserver, client side (see action.h).
 *
 * Under `make -jN`, MAKEFLAGS carries --jobserver-auth=R,W (pipe file
 * descriptors, make before 4.4) or --jobserver-auth=fifo:PATH (make 4.4
 * and later): every job beyond our first needs a token read from it,
 * written back when the job ends. A pipe's read end is reopened through
 * /proc so that our non-blocking reads do not change its flags for make
 * and its other children. */
#include "build/action.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct {
	int r, w;
	char held[1024];
	size_t nheld;
} js = {-1, -1, {0}, 0};

static int open_fifo(const char *spec)
{
	size_t n = strcspn(spec, " ");
	char *path = xstrndup(spec, n);
	js.r = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	js.w = js.r < 0 ? -1 : open(path, O_WRONLY | O_CLOEXEC);
	free(path);
	if (js.w < 0 && js.r >= 0) {
		close(js.r);
		js.r = -1;
	}
	return js.r >= 0;
}

int jobserver_open(void)
{
	const char *mf = getenv("MAKEFLAGS");
	const char *a = mf ? strstr(mf, "--jobserver-auth=") : NULL;
	if (!a && mf)
		a = strstr(mf, "--jobserver-fds=");
	if (!a)
		return 0;
	a = strchr(a, '=') + 1;
	if (!strncmp(a, "fifo:", 5))
		return open_fifo(a + 5);
	int r, w;
	if (sscanf(a, "%d,%d", &r, &w) != 2 || fcntl(r, F_GETFD) < 0 || fcntl(w, F_GETFD) < 0)
		return 0; /* the fds were not passed to us (a recipe without '+') */
	char path[64];
	snprintf(path, sizeof path, "/proc/self/fd/%d", r);
	js.r = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (js.r < 0)
		return 0;
	js.w = w;
	fcntl(w, F_SETFD, FD_CLOEXEC);
	return 1;
}

int js_active(void)
{
	return js.r >= 0;
}

int js_fd(void)
{
	return js.r;
}

int js_take(void)
{
	if (js.r < 0 || js.nheld >= sizeof js.held)
		return 0;
	char c;
	if (read(js.r, &c, 1) != 1)
		return 0;
	js.held[js.nheld++] = c;
	return 1;
}

void js_give(void)
{
	if (js.nheld == 0)
		return;
	char c = js.held[--js.nheld];
	while (write(js.w, &c, 1) < 0 && errno == EINTR)
		;
}

void js_give_all(void)
{
	while (js.nheld)
		js_give();
}

size_t js_held(void)
{
	return js.nheld;
}
