/* A fake CUDA driver for fa3rt_unit.c (included by it once): the driver
 * calls fa3rt.c makes, defined in the test program itself, so that they
 * take the place of the link stub's (the program's own definitions win
 * over libcuda's). Off (g_gpu 0) every call fails as without a driver:
 * cuInit is CUDA_ERROR_NO_DEVICE, as the stub's. On, it is one H100 of
 * compute capability 9.0 that loads any cubin and records what fa3rt_fwd
 * encodes and launches: each tensor map's arguments (g_maps) and the
 * forward kernel's parameters by the names of fa3rt_abi.def (g_fwd).
 * No device memory exists: pointers are only numbers. */
#include <cuda.h>

static int g_gpu;          /* 0: no driver; 1: the fake H100 */
static const char *g_missing; /* a kernel-name suffix the module lacks, or NULL */
static int g_param_count;  /* parameters the main kernel reports (cuFuncGetParamInfo) */

/* handles: the module, its functions by suffix, events, a context */
enum { H_MAIN, H_COMBINE, H_APPEND, H_PRE, H_POST, H_QUANTIZE, NH };
static char g_fn_obj[NH], g_mod_obj, g_ctx_obj, g_event_obj[64];
#define FAKE_FN(i) ((CUfunction)(void *)&g_fn_obj[i])

/* the tensor maps of the last fa3rt_fwd, in encoding order */
typedef struct fake_map {
  CUtensorMapDataType type;
  cuuint32_t rank;
  uint64_t addr;
  cuuint64_t dims[4], strides[3];
  cuuint32_t box[4];
  CUtensorMapSwizzle swizzle;
} fake_map;
static fake_map g_maps[8];
static int g_nmaps;

/* the forward kernel's parameters of its last launch, by name */
typedef struct fwd_params {
#define FA3RT_KERNEL_PARAM(name, c_type, mlir_type, value_bytes, value_align, meaning) c_type name;
#include "fa3rt_abi.def"
} fwd_params;
static fwd_params g_fwd;
/* the FP8 kernels' _quantize: its parameters at each of its last two
   launches (per head: modes 1 then 2), and its launch shape */
typedef struct quantize_params {
#define FA3RT_FP8_QUANTIZE_PARAM(name, c_type, mlir_type, value_bytes, value_align, meaning) \
  c_type name;
#include "fa3rt_abi.def"
} quantize_params;
static quantize_params g_quantize[2];
/* the decoding kernels' _append: its parameters at its last launch */
typedef struct append_params {
#define FA3RT_FWD_APPEND_PARAM(name, c_type, mlir_type, value_bytes, value_align, meaning) \
  c_type name;
#include "fa3rt_abi.def"
} append_params;
static append_params g_append;
static unsigned g_q_grid[3], g_q_block[3];
/* the last cuMemsetD32Async's value and count */
static unsigned g_memset32_value;
static size_t g_memset32_count;
static int g_event_records; /* cuEventRecord calls */
static int g_launches[NH];
static unsigned g_grids[NH];  /* each handle's last grid (x) */
static int g_main_is_bwd;     /* the main kernel takes the backward's params */
static unsigned g_grid[3], g_block[3], g_smem;
static int g_max_dynamic_smem; /* the main kernel's limit, as last set */

/* the forward ABI's parameter sizes and alignments, as the compiler lays
   them out (a by-value map 64-byte aligned), and the backward kernel's, for
   a main kernel loaded with g_main_is_bwd */
#define FAKE_SIZE(name, c_type, mlir_type, value_bytes, value_align, meaning) sizeof(c_type),
#define FAKE_ALIGN(name, c_type, mlir_type, value_bytes, value_align, meaning) \
  (value_bytes) ? (value_align) : sizeof(c_type),
static const size_t kFakeSizes[] = {
#define FA3RT_KERNEL_PARAM FAKE_SIZE
#include "fa3rt_abi.def"
};
static const size_t kFakeAligns[] = {
#define FA3RT_KERNEL_PARAM FAKE_ALIGN
#include "fa3rt_abi.def"
};
static const size_t kFakeBwdSizes[] = {
#define FA3RT_BWD_KERNEL_PARAM FAKE_SIZE
#include "fa3rt_abi.def"
};
static const size_t kFakeBwdAligns[] = {
#define FA3RT_BWD_KERNEL_PARAM FAKE_ALIGN
#include "fa3rt_abi.def"
};
#define FAKE_NPARAMS (sizeof kFakeSizes / sizeof kFakeSizes[0])
#define FAKE_NBWDPARAMS (sizeof kFakeBwdSizes / sizeof kFakeBwdSizes[0])
/* and by position: each scalar or pointer parameter's bytes (size at most
   8, zero-extended) and size, as the array holds them */
static uint64_t g_raw[FAKE_NPARAMS];
static size_t g_raw_size[FAKE_NPARAMS];

static void fake_reset(int gpu) {
  g_gpu = gpu;
  g_param_count = (int)FAKE_NPARAMS;
  g_nmaps = 0;
  memset(g_maps, 0, sizeof g_maps);
  memset(&g_fwd, 0, sizeof g_fwd);
  memset(g_raw, 0, sizeof g_raw);
  memset(g_raw_size, 0, sizeof g_raw_size);
  memset(g_launches, 0, sizeof g_launches);
  memset(g_grids, 0, sizeof g_grids);
  g_main_is_bwd = 0;
  memset(g_quantize, 0, sizeof g_quantize);
  g_memset32_value = 0, g_memset32_count = 0;
  g_event_records = 0;
  g_missing = NULL;
}

#define FAKE_ON() \
  do { if (!g_gpu) return CUDA_ERROR_NO_DEVICE; } while (0)

CUresult CUDAAPI cuGetErrorName(CUresult error, const char **pStr) {
  *pStr = error == CUDA_ERROR_NO_DEVICE ? "CUDA_ERROR_NO_DEVICE" : "CUDA_ERROR_INVALID_VALUE";
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGetErrorString(CUresult error, const char **pStr) {
  *pStr = error == CUDA_ERROR_NO_DEVICE ? "no CUDA-capable device is detected (fake driver)"
                                        : "invalid argument (fake driver)";
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuInit(unsigned int Flags) {
  (void)Flags;
  FAKE_ON();
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx) {
  FAKE_ON();
  *pctx = (CUcontext)(void *)&g_ctx_obj;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxGetDevice(CUdevice *device) {
  FAKE_ON();
  *device = 0;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxPushCurrent(CUcontext ctx) {
  (void)ctx;
  FAKE_ON();
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxPopCurrent(CUcontext *pctx) {
  FAKE_ON();
  *pctx = (CUcontext)(void *)&g_ctx_obj;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev) {
  (void)dev;
  FAKE_ON();
  switch (attrib) {
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = 9; break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = 0; break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *pi = 232448; break;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = 132; break;
  default: *pi = 0;
  }
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev) {
  (void)dev;
  FAKE_ON();
  snprintf(name, (size_t)len, "fake H100");
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuModuleLoadData(CUmodule *module, const void *image) {
  (void)image;
  FAKE_ON();
  *module = (CUmodule)(void *)&g_mod_obj;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuModuleUnload(CUmodule hmod) {
  (void)hmod;
  return CUDA_SUCCESS;
}
static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && !strcmp(s + n - m, suffix);
}
CUresult CUDAAPI cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name) {
  (void)hmod;
  FAKE_ON();
  if (g_missing && ends_with(name, g_missing)) return CUDA_ERROR_NOT_FOUND;
  *hfunc = FAKE_FN(ends_with(name, "_combine") ? H_COMBINE
                   : ends_with(name, "_append") ? H_APPEND
                   : ends_with(name, "_pre")    ? H_PRE
                   : ends_with(name, "_post")   ? H_POST
                   : ends_with(name, "_quantize") ? H_QUANTIZE
                                                : H_MAIN);
  return CUDA_SUCCESS;
}
/* the main kernel: g_param_count parameters laid out by the forward ABI
   (from a constant-bank offset of 0x210, as the driver reports them); the
   helpers: not reported (the runtime then skips the check) */
CUresult CUDAAPI cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset,
                                    size_t *paramSize) {
  FAKE_ON();
  if (func != FAKE_FN(H_MAIN)) return CUDA_ERROR_NOT_SUPPORTED;
  const size_t *sizes = g_main_is_bwd ? kFakeBwdSizes : kFakeSizes;
  const size_t *aligns = g_main_is_bwd ? kFakeBwdAligns : kFakeAligns;
  const size_t n = g_main_is_bwd ? FAKE_NBWDPARAMS : (size_t)g_param_count;
  if (paramIndex >= n || paramIndex >= (g_main_is_bwd ? FAKE_NBWDPARAMS : FAKE_NPARAMS))
    return CUDA_ERROR_INVALID_VALUE;
  size_t off = 0;
  for (size_t i = 0;; i++) {
    off = (off + aligns[i] - 1) / aligns[i] * aligns[i];
    if (i == paramIndex) break;
    off += sizes[i];
  }
  *paramOffset = 0x210 + off;
  *paramSize = sizes[paramIndex];
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc) {
  (void)hfunc;
  FAKE_ON();
  *pi = attrib == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK ? 1024 : 0;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value) {
  FAKE_ON();
  if (hfunc == FAKE_FN(H_MAIN) && attrib == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
    g_max_dynamic_smem = value;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemAlloc(CUdeviceptr *dptr, size_t bytesize) {
  (void)bytesize;
  FAKE_ON();
  *dptr = 0x7f0000000000ULL;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemFree(CUdeviceptr dptr) {
  (void)dptr;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemsetD32(CUdeviceptr dstDevice, unsigned int ui, size_t N) {
  (void)dstDevice, (void)ui, (void)N;
  FAKE_ON();
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventCreate(CUevent *phEvent, unsigned int Flags) {
  static int next;
  (void)Flags;
  FAKE_ON();
  *phEvent = (CUevent)(void *)&g_event_obj[next++ % 64];
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventDestroy(CUevent hEvent) {
  (void)hEvent;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventSynchronize(CUevent hEvent) {
  (void)hEvent;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream) {
  (void)hEvent, (void)hStream;
  FAKE_ON();
  g_event_records++;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus) {
  (void)hStream;
  FAKE_ON();
  *captureStatus = CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamSynchronize(CUstream hStream) {
  (void)hStream;
  FAKE_ON();
  return CUDA_SUCCESS;
}
/* TMA's rules that the runtime relies on (cuTensorMapEncodeTiled's
   documentation): 16-byte aligned address and strides, boxes of 1 to 256,
   a box row within the 128-byte swizzle span; the map records its
   encoding's index and address */
CUresult CUDAAPI cuTensorMapEncodeTiled(CUtensorMap *tensorMap, CUtensorMapDataType tensorDataType,
                                        cuuint32_t tensorRank, void *globalAddress,
                                        const cuuint64_t *globalDim,
                                        const cuuint64_t *globalStrides, const cuuint32_t *boxDim,
                                        const cuuint32_t *elementStrides,
                                        CUtensorMapInterleave interleave,
                                        CUtensorMapSwizzle swizzle,
                                        CUtensorMapL2promotion l2Promotion,
                                        CUtensorMapFloatOOBfill oobFill) {
  (void)elementStrides, (void)interleave, (void)l2Promotion, (void)oobFill;
  FAKE_ON();
  const cuuint64_t elem = tensorDataType == CU_TENSOR_MAP_DATA_TYPE_UINT8 ? 1
                          : tensorDataType == CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 ||
                                  tensorDataType == CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                              ? 2
                              : 0;
  if (!elem || tensorRank != 4 || (uintptr_t)globalAddress % 16) return CUDA_ERROR_INVALID_VALUE;
  for (int i = 0; i < 3; i++)
    if (globalStrides[i] % 16) return CUDA_ERROR_INVALID_VALUE;
  for (int i = 0; i < 4; i++)
    if (boxDim[i] < 1 || boxDim[i] > 256) return CUDA_ERROR_INVALID_VALUE;
  if (swizzle == CU_TENSOR_MAP_SWIZZLE_128B && boxDim[0] * elem > 128)
    return CUDA_ERROR_INVALID_VALUE;
  fake_map *m = &g_maps[g_nmaps % 8];
  m->type = tensorDataType;
  m->rank = tensorRank;
  m->addr = (uint64_t)(uintptr_t)globalAddress;
  memcpy(m->dims, globalDim, sizeof m->dims);
  memcpy(m->strides, globalStrides, sizeof m->strides);
  memcpy(m->box, boxDim, sizeof m->box);
  m->swizzle = swizzle;
  memset(tensorMap, 0, sizeof *tensorMap);
  tensorMap->opaque[0] = (cuuint64_t)++g_nmaps;
  tensorMap->opaque[1] = m->addr;
  return CUDA_SUCCESS;
}
/* records the forward kernel's parameters (in the order of fa3rt_abi.def,
   which the runtime's array follows) and the launch's shape */
CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                unsigned int gridDimZ, unsigned int blockDimX,
                                unsigned int blockDimY, unsigned int blockDimZ,
                                unsigned int sharedMemBytes, CUstream hStream,
                                void **kernelParams, void **extra) {
  (void)hStream, (void)extra;
  FAKE_ON();
  for (int i = 0; i < NH; i++)
    if (f == FAKE_FN(i)) g_launches[i]++, g_grids[i] = gridDimX;
  if (f == FAKE_FN(H_MAIN) && !g_main_is_bwd) {
    size_t i = 0;
#define FA3RT_KERNEL_PARAM(name, c_type, mlir_type, value_bytes, value_align, meaning) \
  memcpy(&g_fwd.name, kernelParams[i++], sizeof g_fwd.name);
#include "fa3rt_abi.def"
    for (size_t j = 0; j < FAKE_NPARAMS; j++) {
      g_raw[j] = 0;
      g_raw_size[j] = kFakeSizes[j];
      if (kFakeSizes[j] <= sizeof g_raw[j]) memcpy(&g_raw[j], kernelParams[j], kFakeSizes[j]);
    }
    g_grid[0] = gridDimX, g_grid[1] = gridDimY, g_grid[2] = gridDimZ;
    g_block[0] = blockDimX, g_block[1] = blockDimY, g_block[2] = blockDimZ;
    g_smem = sharedMemBytes;
  }
  if (f == FAKE_FN(H_APPEND)) {
    size_t i = 0;
#define FA3RT_FWD_APPEND_PARAM(name, c_type, mlir_type, value_bytes, value_align, meaning) \
  memcpy(&g_append.name, kernelParams[i++], sizeof g_append.name);
#include "fa3rt_abi.def"
  }
  if (f == FAKE_FN(H_QUANTIZE)) {
    quantize_params *q = &g_quantize[(g_launches[H_QUANTIZE] - 1) % 2];
    size_t i = 0;
#define FA3RT_FP8_QUANTIZE_PARAM(name, c_type, mlir_type, value_bytes, value_align, meaning) \
  memcpy(&q->name, kernelParams[i++], sizeof q->name);
#include "fa3rt_abi.def"
    g_q_grid[0] = gridDimX, g_q_grid[1] = gridDimY, g_q_grid[2] = gridDimZ;
    g_q_block[0] = blockDimX, g_q_block[1] = blockDimY, g_q_block[2] = blockDimZ;
    if (sharedMemBytes) return CUDA_ERROR_INVALID_VALUE; /* it has none */
  }
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N,
                                  CUstream hStream) {
  (void)dstDevice, (void)us, (void)N, (void)hStream;
  FAKE_ON();
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemsetD2D16Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us,
                                    size_t Width, size_t Height, CUstream hStream) {
  (void)dstDevice, (void)dstPitch, (void)us, (void)Width, (void)Height, (void)hStream;
  FAKE_ON();
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N,
                                  CUstream hStream) {
  (void)dstDevice, (void)hStream;
  FAKE_ON();
  g_memset32_value = ui, g_memset32_count = N;
  return CUDA_SUCCESS;
}
