/*
 * fuzz_input.h - the fuzz input as a file for readers that take a path
 * (the spec, --catalog and report readers): an in-memory file
 * (memfd_create) rewritten for each input and named /proc/self/fd/N.
 */
#ifndef GM_FUZZ_INPUT_H
#define GM_FUZZ_INPUT_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* The path of a file holding data[0..size); aborts if it cannot. */
static const char *fuzz_input_path(const unsigned char *data, size_t size)
{
	static char path[64];
	static int fd = -1;

	if (fd < 0) {
		fd = memfd_create("fuzz-input", MFD_CLOEXEC);
		if (fd < 0)
			abort();
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	}
	if (ftruncate(fd, 0) != 0 ||
	    (size && pwrite(fd, data, size, 0) != (ssize_t)size))
		abort();
	return path;
}

#endif
