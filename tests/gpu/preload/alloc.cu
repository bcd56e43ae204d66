// alloc.cu - a CUDA C program for tests/gpu/run-preload.sh, built twice
// (nvcc's default static cudart, and -cudart shared). Prints one JSON
// line: what cudaMemGetInfo says, how much cudaMalloc / cudaMallocAsync
// got before the first error, and that error's code.
// Usage: alloc BYTES_TO_TRY   (0 = until the first failure)
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

int main(int argc, char **argv)
{
	size_t want = argc > 1 ? strtoull(argv[1], nullptr, 10) : 0;
	size_t free_b = 0, total_b = 0, got = 0, chunk = (size_t)1 << 30;
	void *ptrs[1024];
	int n = 0, err = 0, async_err;
	void *a = nullptr;
	cudaStream_t s;

	cudaMemGetInfo(&free_b, &total_b);
	while (n < 1024 && (want == 0 || got + chunk <= want)) {
		cudaError_t r = cudaMalloc(&ptrs[n], chunk);
		if (r != cudaSuccess) {
			err = r;
			break;
		}
		got += chunk;
		n++;
	}
	cudaStreamCreate(&s);
	// Stream-ordered: one more chunk, then free everything.
	async_err = cudaMallocAsync(&a, chunk, s);
	if (!async_err)
		cudaFreeAsync(a, s);
	cudaStreamSynchronize(s);
	for (int i = 0; i < n; i++)
		cudaFree(ptrs[i]);
	cudaGetLastError();
	printf("{\"total\": %zu, \"free\": %zu, \"allocated\": %zu, "
	       "\"error\": %d, \"async_error\": %d}\n",
	       total_b, free_b, got, err, async_err);
	return 0;
}
