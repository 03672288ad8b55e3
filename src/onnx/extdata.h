/* extdata.h — external tensor data and atomic output files for model I/O.
 *
 * A TensorProto with data_location = EXTERNAL keeps its bytes in a file
 * named by its external_data entries: "location" (a path relative to the
 * model's directory; absolute paths and ".." components are refused),
 * "offset" (default 0), "length" (default: the size implied by dims and
 * type) and "checksum" (ignored, as onnxruntime does). Any other key is an
 * error. Files are mapped read-only on first use and stay mapped until the
 * model is freed; because outputs are always replaced by rename(), a mapped
 * source stays valid even when a save overwrites the file it came from. */
#ifndef QM_ONNX_EXTDATA_H
#define QM_ONNX_EXTDATA_H

#include <stddef.h>
#include <stdint.h>

#include "onnx/model.h"

/* where one tensor's external bytes live (location borrowed from the proto) */
typedef struct ExtInfo {
	const char *location;
	int64_t offset;
	int64_t length;  /* -1 when absent */
} ExtInfo;

/* parse t's external_data entries; -1 names the tensor and the bad entry */
int ext_info(const Onnx__TensorProto *t, ExtInfo *info);
/* 0 if loc is a non-empty relative path without ".." components */
int ext_location_check(const char *loc);
/* map DIR/LOC once per list (cached by location); base may be NULL when
 * the file is empty */
int ext_map(ExtMap **list, const char *dir, const char *loc, const uint8_t **base,
	    size_t *size);
/* unmap and free every entry */
void ext_free(ExtMap *list);
/* give back the pages of n bytes at p, a range ext_map returned: a
 * converter done with a tensor's source keeps memory to one tensor's
 * worth. The mappings are private and never written, so a later read
 * faults the same bytes in again from the file. */
void ext_release(const void *p, size_t n);

/* Hard links instead of copies, for processes whose inputs are immutable
 * store objects (a build's stage child, src/build.c): while on, a data
 * file that is read-only (no write bit) and unchanged by a save is linked
 * to its new place rather than copied. Off by default, so a user's own
 * files are never shared with what quantmake writes. */
void ext_allow_links(int on);
/* whether ext_allow_links is on and the file open as fd may be linked */
int ext_linkable(int fd);

/* copy n bytes of in (named inpath, for errors) from inoff to out at
 * outoff, in the kernel (copy_file_range) when it can, else by read/write */
int ext_copy_range(int in, const char *inpath, uint64_t inoff, int out, const char *outpath,
		   uint64_t outoff, uint64_t n);
/* DST atomically becomes a copy of SRC (or a hard link, see
 * ext_allow_links), mode 0644 for a copy */
int ext_copy_file(const char *src, const char *dst);

/* A file written under a temporary name beside its path and renamed over it
 * on commit; abort (or a failed commit) removes the temporary file.
 * Initialize with OutFile f = {.fd = -1} so abort is safe before open. */
typedef struct OutFile {
	char *path, *tmp;
	int fd;
	int linked;   /* tmp is a hard link to an existing file (outfile_link) */
} OutFile;

/* make the temporary file a hard link to src instead of a new file, so the
 * commit publishes src's inode under path; 1 (f left closed) when the file
 * system refuses the link, so the caller copies instead */
int outfile_link(OutFile *f, const char *path, const char *src);

/* create PATH.tmp.XXXXXX; on failure f is left closed */
int outfile_open(OutFile *f, const char *path);
/* write n bytes at off (the file grows as needed; gaps read as zeros) */
int outfile_pwrite(OutFile *f, const void *p, size_t n, uint64_t off);
/* append n bytes at the current end of the sequential stream */
int outfile_write(OutFile *f, const void *p, size_t n);
/* mode 0644, rename over path (not fsynced); on failure the temp file is removed */
int outfile_commit(OutFile *f);
/* remove the temporary file (no-op when not open) */
void outfile_abort(OutFile *f);

#endif
