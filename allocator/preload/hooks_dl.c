/*
 * hooks_dl.c - the dlsym and dlvsym overrides.
 *
 * The CUDA runtime (static or shared), CuPy and JAX reach libcuda with
 * dlopen + dlsym on its handle, which symbol interposition never sees;
 * so dlsym itself is overridden. For a libcuda handle and a symbol gpumem
 * wraps (hooks.h), the answer is the wrapper; everything else goes to the
 * real dlsym.
 *
 * The override must keep RTLD_NEXT right: glibc finds "the next object"
 * from dlsym's return address, so the real dlsym has to be entered with
 * the caller's return address, not ours. On x86-64 the entry points are
 * therefore small assembly trampolines: they save the arguments, ask
 * gm__pl_dlsym_decide(), and either return the wrapper or jump (not call)
 * to the real dlsym with the original arguments and return address. Other
 * targets use a C override, where RTLD_NEXT lookups made through it
 * resolve relative to this library (documented in allocator/README.md).
 */
/* POSIX (dlsym) guarantees data and function pointers convert. */
#pragma GCC diagnostic ignored "-Wpedantic"

#include "account.h"
#include "hooks.h"
#include "log.h"

#include <dlfcn.h>
#include <stdlib.h>

void *gm__pl_dlsym_decide(void *handle, const char *symbol);
void *gm__pl_dlvsym_decide(void *handle, const char *symbol,
			   const char *version);

/* Ensure the real dlsym/dlvsym are known before anyone jumps there. */
static void need_real(void)
{
	if (gm__pl_resolve_dl() != 0) {
		gm_error("cannot find the C library's dlsym; giving up");
		abort();
	}
}

/*
 * The wrapper for symbol looked up in handle, or NULL to let the real
 * dlsym answer. found: what the real lookup gave (NULL: not there).
 */
static void *decide(void *handle, const char *symbol, void *found)
{
	int id;
	void *init;

	if (!found)
		return NULL;
	id = gm_pl_hook_find(symbol);
	if (id < 0)
		return NULL;
	/* Only a CUDA driver library (one that has cuInit) is wrapped. */
	gm__pl_guard_enter();
	init = gm__pl_real_dlsym(handle, "cuInit");
	gm__pl_guard_leave();
	if (!init)
		return NULL;
	if (found != gm__pl_hook_fn[id] &&
	    !__atomic_load_n(&gm__pl_real[id], __ATOMIC_ACQUIRE))
		__atomic_store_n(&gm__pl_real[id], found, __ATOMIC_RELEASE);
	return gm__pl_hook_fn[id];
}

static int skip(void *handle, const char *symbol)
{
	return !symbol || symbol[0] != 'c' || symbol[1] != 'u' ||
	       handle == RTLD_NEXT || handle == RTLD_DEFAULT ||
	       gm__pl_tls.guard;
}

void *gm__pl_dlsym_decide(void *handle, const char *symbol)
{
	void *found;

	need_real();
	if (skip(handle, symbol))
		return NULL;
	gm__pl_guard_enter();
	found = gm__pl_real_dlsym(handle, symbol);
	gm__pl_guard_leave();
	return decide(handle, symbol, found);
}

void *gm__pl_dlvsym_decide(void *handle, const char *symbol,
			   const char *version)
{
	void *found;

	need_real();
	if (skip(handle, symbol))
		return NULL;
	gm__pl_guard_enter();
	found = gm__pl_real_dlvsym(handle, symbol, version);
	gm__pl_guard_leave();
	return decide(handle, symbol, found);
}

#if defined(__x86_64__)
/*
 * dlsym(handle, symbol): rdi, rsi. Two pushes and 8 bytes keep the stack
 * 16-byte aligned at the call; the real dlsym is entered by a jump, so
 * it sees our caller's return address.
 */
__asm__(".text\n"
	".globl dlsym\n"
	".type dlsym, @function\n"
	"dlsym:\n"
	".cfi_startproc\n"
	"	endbr64\n"
	"	pushq %rdi\n"
	".cfi_adjust_cfa_offset 8\n"
	"	pushq %rsi\n"
	".cfi_adjust_cfa_offset 8\n"
	"	subq $8, %rsp\n"
	".cfi_adjust_cfa_offset 8\n"
	"	call gm__pl_dlsym_decide\n"
	"	addq $8, %rsp\n"
	".cfi_adjust_cfa_offset -8\n"
	"	popq %rsi\n"
	".cfi_adjust_cfa_offset -8\n"
	"	popq %rdi\n"
	".cfi_adjust_cfa_offset -8\n"
	"	testq %rax, %rax\n"
	"	jz 1f\n"
	"	ret\n"
	"1:	jmpq *gm__pl_real_dlsym(%rip)\n"
	".cfi_endproc\n"
	".size dlsym, .-dlsym\n"
	/* dlvsym(handle, symbol, version): rdi, rsi, rdx; three pushes
	 * keep the alignment. */
	".globl dlvsym\n"
	".type dlvsym, @function\n"
	"dlvsym:\n"
	".cfi_startproc\n"
	"	endbr64\n"
	"	pushq %rdi\n"
	".cfi_adjust_cfa_offset 8\n"
	"	pushq %rsi\n"
	".cfi_adjust_cfa_offset 8\n"
	"	pushq %rdx\n"
	".cfi_adjust_cfa_offset 8\n"
	"	call gm__pl_dlvsym_decide\n"
	"	popq %rdx\n"
	".cfi_adjust_cfa_offset -8\n"
	"	popq %rsi\n"
	".cfi_adjust_cfa_offset -8\n"
	"	popq %rdi\n"
	".cfi_adjust_cfa_offset -8\n"
	"	testq %rax, %rax\n"
	"	jz 2f\n"
	"	ret\n"
	"2:	jmpq *gm__pl_real_dlvsym(%rip)\n"
	".cfi_endproc\n"
	".size dlvsym, .-dlvsym\n");
#else
__attribute__((visibility("default"))) void *dlsym(void *handle,
						   const char *symbol)
{
	void *w = gm__pl_dlsym_decide(handle, symbol);

	return w ? w : gm__pl_real_dlsym(handle, symbol);
}

__attribute__((visibility("default"))) void *
dlvsym(void *handle, const char *symbol, const char *version)
{
	void *w = gm__pl_dlvsym_decide(handle, symbol, version);

	return w ? w : gm__pl_real_dlvsym(handle, symbol, version);
}
#endif
