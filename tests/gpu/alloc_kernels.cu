// alloc_kernels.cu - device kernels for the allocator core's GPU tests,
// loaded at run time with cuModuleLoadData (through the seam).

// Spin for about `cycles` clock ticks, then write tag into p[0..n).
// Models a kernel that still writes a block after the host freed it.
extern "C" __global__ void spin_write(unsigned *p, unsigned long long n,
				      long long cycles, unsigned tag)
{
	unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x +
			       threadIdx.x;
	long long t0 = clock64();

	while (clock64() - t0 < cycles)
		;
	for (; i < n; i += (unsigned long long)gridDim.x * blockDim.x)
		p[i] = tag;
}

// Write tag into p[0..n) at once.
extern "C" __global__ void fill(unsigned *p, unsigned long long n,
				unsigned tag)
{
	unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x +
			       threadIdx.x;

	for (; i < n; i += (unsigned long long)gridDim.x * blockDim.x)
		p[i] = tag;
}
