/* The driver seam's declared types match cuda.h (built only where the
 * CUDA Toolkit is installed). A mismatch fails to compile. */
#include <cuda.h>
#include <stddef.h>
#include "cu.h"
_Static_assert(sizeof(CUmemAllocationProp) == sizeof(struct gm_cu_alloc_prop), "prop");
_Static_assert(offsetof(CUmemAllocationProp, allocFlags) == offsetof(struct gm_cu_alloc_prop, alloc_flags), "flags");
_Static_assert(sizeof(CUmemAccessDesc) == sizeof(struct gm_cu_access_desc), "acc");
_Static_assert((int)CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID == (int)GM_CU_ATTR_PCI_DEVICE_ID, "a");
_Static_assert((int)CU_DEVICE_ATTRIBUTE_PCI_BUS_ID == (int)GM_CU_ATTR_PCI_BUS_ID, "a");
_Static_assert((int)CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID == (int)GM_CU_ATTR_PCI_DOMAIN_ID, "a");
_Static_assert((int)CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR == (int)GM_CU_ATTR_COMPUTE_MAJOR, "a");
_Static_assert((int)CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED == (int)GM_CU_ATTR_VMM_SUPPORTED, "a");
_Static_assert((int)CU_EVENT_DISABLE_TIMING == (int)GM_CU_EVENT_DISABLE_TIMING, "a");
_Static_assert((int)CUDA_ERROR_NOT_READY == (int)GM_CU_ERROR_NOT_READY, "a");
_Static_assert((int)CUDA_ERROR_NOT_SUPPORTED == (int)GM_CU_ERROR_NOT_SUPPORTED, "a");
_Static_assert((int)CU_MEM_ACCESS_FLAGS_PROT_READWRITE == (int)GM_CU_MEM_ACCESS_READWRITE, "a");
_Static_assert((int)CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT == (int)GM_CU_ATTR_MULTIPROCESSOR_COUNT, "a");
_Static_assert((int)CU_MEMHOSTALLOC_PORTABLE == (int)GM_CU_MEMHOSTALLOC_PORTABLE, "a");
_Static_assert((int)CU_MEMHOSTALLOC_DEVICEMAP == (int)GM_CU_MEMHOSTALLOC_DEVICEMAP, "a");
_Static_assert((int)CU_MEMHOSTALLOC_WRITECOMBINED == (int)GM_CU_MEMHOSTALLOC_WRITECOMBINED, "a");
_Static_assert((int)CU_POINTER_ATTRIBUTE_CONTEXT == (int)GM_CU_POINTER_ATTRIBUTE_CONTEXT, "a");
_Static_assert((int)CU_POINTER_ATTRIBUTE_MEMORY_TYPE == (int)GM_CU_POINTER_ATTRIBUTE_MEMORY_TYPE, "a");
_Static_assert((int)CU_POINTER_ATTRIBUTE_DEVICE_POINTER == (int)GM_CU_POINTER_ATTRIBUTE_DEVICE_POINTER, "a");
_Static_assert((int)CU_POINTER_ATTRIBUTE_HOST_POINTER == (int)GM_CU_POINTER_ATTRIBUTE_HOST_POINTER, "a");
_Static_assert((int)CU_MEMORYTYPE_HOST == (int)GM_CU_MEMORYTYPE_HOST, "a");
_Static_assert((int)CU_MEMORYTYPE_DEVICE == (int)GM_CU_MEMORYTYPE_DEVICE, "a");
int main(void){return 0;}
