/*
 * pluggable_torch.cpp - libgpumem-torch.so: the CUDAPluggableAllocator
 * pair that raises on out-of-memory.
 *
 *   a = torch.cuda.memory.CUDAPluggableAllocator(
 *           "libgpumem-torch.so", "gpumem_torch_malloc",
 *           "gpumem_torch_free")
 *   torch.cuda.memory.change_current_allocator(a)
 *
 * PyTorch's pluggable allocator (torch/csrc/cuda/CUDAPluggableAllocator.cpp,
 * 2.x up to 2.11 at least) stores whatever the allocation function returns
 * and never checks it: the C pair's NULL (gpumem_malloc, pluggable.c)
 * becomes a tensor with no memory behind it. This pair calls the C pair
 * and, where it refuses, throws a std::bad_alloc whose what() is gpumem's
 * reason (gpumem_describe_oom). The exception leaves through PyTorch's
 * C++ frames (nothing is held yet when the allocation function runs) and
 * its Python bindings turn any std::exception they did not map otherwise
 * into RuntimeError with the what() text (torch/csrc/Exceptions.h,
 * CATCH_ALL_ERRORS). So Python sees RuntimeError("gpumem: CUDA out of
 * memory. ..."), not torch.cuda.OutOfMemoryError: that one is raised only
 * for c10::OutOfMemoryError, which cannot be thrown without linking
 * PyTorch's c10.
 *
 * A zero-byte request returns NULL without throwing (PyTorch asks for
 * zero bytes for empty tensors and never frees a NULL).
 *
 * Linked against libgpumem-preload.so (DT_NEEDED, found beside it through
 * $ORIGIN), so loading this library loads the allocator and its one
 * state; the GPUMEM_* variables apply as for the C pair. Needs the C++
 * runtime (libstdc++) for the exception only; libgpumem-preload.so itself
 * never links it. Sizes are bytes.
 */
#include <climits>
#include <cstddef>
#include <new>
#include <sys/types.h>

#define GM_EXPORT __attribute__((visibility("default")))

extern "C" {
/* pluggable.c, in libgpumem-preload.so */
void *gpumem_malloc(ssize_t size, int device, void *stream);
void gpumem_free(void *ptr, ssize_t size, int device, void *stream);
char *gpumem_describe_oom(ssize_t size, int device, char *buf,
			  size_t len);

/* PyTorch's signatures: void *(size_t, int, cudaStream_t) and
 * void (void *, size_t, int, cudaStream_t). */
GM_EXPORT void *gpumem_torch_malloc(size_t size, int device, void *stream);
GM_EXPORT void gpumem_torch_free(void *ptr, size_t size, int device,
				 void *stream);
}

namespace gpumem {

/* std::bad_alloc carrying gpumem's one-line reason as what(). */
class out_of_memory : public std::bad_alloc {
public:
	out_of_memory(ssize_t size, int device)
	{
		gpumem_describe_oom(size, device, msg_, sizeof msg_);
	}
	const char *what() const noexcept override { return msg_; }

private:
	char msg_[512] = {};
};

} // namespace gpumem

/*
 * size bytes on device, ordered on stream (as gpumem_malloc); NULL for
 * size 0. Throws gpumem::out_of_memory (a std::bad_alloc) when gpumem_malloc
 * refuses: over the cap, the driver out of memory, or no driver.
 */
GM_EXPORT void *gpumem_torch_malloc(size_t size, int device, void *stream)
{
	void *p;

	if (size == 0)
		return nullptr;
	if (size > static_cast<size_t>(SSIZE_MAX))
		throw gpumem::out_of_memory(-1, device);
	p = gpumem_malloc(static_cast<ssize_t>(size), device, stream);
	if (!p)
		throw gpumem::out_of_memory(static_cast<ssize_t>(size), device);
	return p;
}

/* Give back what gpumem_torch_malloc returned (gpumem_free). */
GM_EXPORT void gpumem_torch_free(void *ptr, size_t size, int device,
				 void *stream)
{
	gpumem_free(ptr, static_cast<ssize_t>(size), device, stream);
}
