/*
 * The pinned cache on a real device: buffers carved out of shared driver
 * chunks must behave like buffers of their own.
 * - cuPointerGetAttribute on a buffer (and inside it) says host memory,
 *   host pointer = the address, and for mapped memory device pointer =
 *   gm_pinned_device_pointer() = cuMemHostGetDevicePointer_v2();
 * - cuMemHostGetFlags on a buffer has the flags it was asked with;
 * - async copies host->device->host on several streams at once, from and
 *   to sub-allocated buffers of every flag set, give the bytes back.
 * Prints one JSON object; exit 0 pass, 1 fail, 77 no device.
 */
#include "error.h"
#include "pinned.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NSTREAMS 4
#define PER_STREAM 6

static int failures;

#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                        \
			fputc('\n', stderr);                                 \
			failures++;                                          \
		}                                                            \
	} while (0)

static const unsigned flag_sets[] = {
	0, GM_CU_MEMHOSTALLOC_PORTABLE, GM_CU_MEMHOSTALLOC_DEVICEMAP,
	GM_CU_MEMHOSTALLOC_DEVICEMAP | GM_CU_MEMHOSTALLOC_PORTABLE,
	GM_CU_MEMHOSTALLOC_WRITECOMBINED,
};
#define NFLAGS (sizeof(flag_sets) / sizeof(flag_sets[0]))

/* Attributes of p, p + off. */
static void check_queries(struct gm_cu *cu, struct gm_pinned *pc, char *p,
			  size_t size, unsigned flags)
{
	size_t offs[] = { 0, size / 2, size - 1 };

	for (int i = 0; i < 3; i++) {
		char *q = p + offs[i];
		unsigned type = 0, got_flags = 0;
		void *hp = NULL;
		gm_cu_ptr dp = 0, want = 0, dp2 = 0;

		CHECK(cu->pointer_get_attribute(&type,
			GM_CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
			(gm_cu_ptr)(uintptr_t)q) == 0 &&
		      type == GM_CU_MEMORYTYPE_HOST,
		      "memory type of %p+%zu: %u", (void *)p, offs[i], type);
		CHECK(cu->pointer_get_attribute(&hp,
			GM_CU_POINTER_ATTRIBUTE_HOST_POINTER,
			(gm_cu_ptr)(uintptr_t)q) == 0 && hp == q,
		      "host pointer of %p: %p", (void *)q, hp);
		if (!(flags & GM_CU_MEMHOSTALLOC_DEVICEMAP))
			continue;
		CHECK(gm_pinned_device_pointer(pc, q, &want) == 0,
		      "no cached device pointer for %p", (void *)q);
		CHECK(cu->pointer_get_attribute(&dp,
			GM_CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
			(gm_cu_ptr)(uintptr_t)q) == 0 && dp == want,
		      "device pointer of %p: driver %llx, cache %llx",
		      (void *)q, dp, want);
		CHECK(cu->mem_host_get_device_pointer(&dp2, q, 0) == 0 &&
		      dp2 == want,
		      "cuMemHostGetDevicePointer(%p): %llx, cache %llx",
		      (void *)q, dp2, want);
		if (offs[i] == 0)
			CHECK(cu->mem_host_get_flags(&got_flags, q) == 0 &&
			      (got_flags & flags) == flags,
			      "cuMemHostGetFlags(%p) = %#x, asked %#x",
			      (void *)q, got_flags, flags);
	}
}

int main(void)
{
	struct gm_cu cu;
	struct gm_diag d;
	struct gm_pinned *pc;
	struct gm_pinned_stats s = { 0 };
	gm_cu_device dev;
	gm_cu_ctx ctx;
	gm_cu_stream st[NSTREAMS];
	char *src[NSTREAMS][PER_STREAM], *dst[NSTREAMS][PER_STREAM];
	gm_cu_ptr dbuf[NSTREAMS][PER_STREAM];
	size_t len[NSTREAMS][PER_STREAM];
	unsigned long long bytes = 0;
	int n = 0;

	if (gm_cu_open(&cu, NULL, &d) != 0 || cu.init(0) != 0 ||
	    cu.device_count(&n) != 0 || n == 0) {
		printf("{\"skipped\": \"no CUDA device\"}\n");
		return 77;
	}
	if (cu.device_get(&dev, 0) || cu.primary_ctx_retain(&ctx, dev) ||
	    cu.ctx_set_current(ctx) || !cu.pointer_get_attribute ||
	    !cu.memcpy_htod_async || !cu.stream_create) {
		fprintf(stderr, "driver set-up failed\n");
		return 1;
	}
	if (gm_pinned_create(&pc, &cu, NULL, &d) != 0) {
		fprintf(stderr, "%s\n", d.msg);
		return 1;
	}
	for (int k = 0; k < NSTREAMS; k++)
		CHECK(cu.stream_create(&st[k], 1 /* non-blocking */) == 0,
		      "stream");
	/* Buffers of many sizes from shared chunks; every flag set. */
	for (int k = 0; k < NSTREAMS; k++)
		for (int j = 0; j < PER_STREAM; j++) {
			unsigned f = flag_sets[(k * PER_STREAM + j) % NFLAGS];
			size_t sz = ((size_t)1000 << ((k + 2 * j) % 14)) + 37 * j;

			len[k][j] = sz;
			CHECK(gm_pinned_alloc(pc, (void **)&src[k][j], sz, f,
					      NULL) == 0, "alloc src");
			/* Destinations are read back: never write-combined. */
			CHECK(gm_pinned_alloc(pc, (void **)&dst[k][j], sz,
				f & ~GM_CU_MEMHOSTALLOC_WRITECOMBINED,
				NULL) == 0, "alloc dst");
			CHECK(cu.mem_alloc(&dbuf[k][j], sz) == 0, "cuMemAlloc");
			if (failures)
				goto out;
			check_queries(&cu, pc, src[k][j], sz, f);
			for (size_t i = 0; i < sz; i++)
				src[k][j][i] = (char)(i * 7 + k * 13 + j);
			memset(dst[k][j], 0, sz);
			bytes += sz;
		}
	for (int k = 0; k < NSTREAMS; k++)
		for (int j = 0; j < PER_STREAM; j++) {
			CHECK(cu.memcpy_htod_async(dbuf[k][j], src[k][j],
				len[k][j], st[k]) == 0, "HtoD");
			CHECK(cu.memcpy_dtoh_async(dst[k][j], dbuf[k][j],
				len[k][j], st[k]) == 0, "DtoH");
		}
	for (int k = 0; k < NSTREAMS; k++)
		CHECK(cu.stream_synchronize(st[k]) == 0, "sync");
	for (int k = 0; k < NSTREAMS; k++)
		for (int j = 0; j < PER_STREAM; j++)
			CHECK(memcmp(src[k][j], dst[k][j], len[k][j]) == 0,
			      "stream %d buffer %d (%zu bytes) differs", k, j,
			      len[k][j]);
	gm_pinned_stats(pc, &s);
	for (int k = 0; k < NSTREAMS; k++)
		for (int j = 0; j < PER_STREAM; j++) {
			gm_pinned_free(pc, src[k][j]);
			gm_pinned_free(pc, dst[k][j]);
			cu.mem_free(dbuf[k][j]);
		}
out:
	printf("{\"buffers\": %llu, \"chunks\": %llu, \"copied_bytes\": %llu, "
	       "\"streams\": %d, \"failures\": %d}\n",
	       (unsigned long long)s.allocs, (unsigned long long)s.chunks,
	       bytes * 2, NSTREAMS, failures);
	gm_pinned_destroy(pc);
	return failures ? 1 : 0;
}
