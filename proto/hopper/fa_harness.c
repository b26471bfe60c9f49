/* Minimal launcher for the MLIR-generated FA forward kernel (CUDA driver API only, C11).
 *
 * Build (GPU machine): gcc -O2 -std=c11 -shared -fPIC fa_harness.c -o libfa.so \
 *                          -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcuda
 *
 * ABI of the kernels in fa_fwd_h128.cubin (see fa_fwd_h128.mlir):
 *   (const CUtensorMap* tmQ, const CUtensorMap* tmK, const CUtensorMap* tmV,   -- device-global
 *    bf16* O, float* LSE, int B, int Sq, int Skv, int Hq, int Hkv, float scale)
 *   grid (ceil(Sq/128), Hq, B), block (384,1,1), dynamic smem FA_SMEM_BYTES.
 * Layouts: q [B,Sq,Hq,128], k/v [B,Skv,Hkv,128], o [B,Sq,Hq,128] bf16; lse [B,Hq,Sq] f32.
 */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fa_fwd_h128_launch.h" /* FA_SMEM_BYTES, FA_THREADS, FA_BM, FA_BN, FA_D (generated) */

static CUmodule g_mod;
static CUfunction g_fn[2]; /* [0] non-causal, [1] causal */
static CUdeviceptr g_tmaps; /* 3 x 128-byte CUtensorMap, 64-byte aligned */
static char g_err[512];

const char *fa_last_error(void) { return g_err; }

#define CK(x)                                                                  \
  do {                                                                         \
    CUresult r_ = (x);                                                         \
    if (r_ != CUDA_SUCCESS) {                                                  \
      const char *s_ = 0;                                                      \
      cuGetErrorString(r_, &s_);                                               \
      snprintf(g_err, sizeof g_err, "%s:%d %s -> %d (%s)", __FILE__, __LINE__, \
               #x, (int)r_, s_ ? s_ : "?");                                    \
      return -(int)r_ - 1000;                                                  \
    }                                                                          \
  } while (0)

/* Load the cubin into the current context (the primary context torch uses). */
int fa_init(const char *cubin_path) {
  CK(cuInit(0));
  CUcontext ctx = 0;
  CK(cuCtxGetCurrent(&ctx));
  if (!ctx) {
    CUdevice dev;
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
  }
  FILE *f = fopen(cubin_path, "rb");
  if (!f) { snprintf(g_err, sizeof g_err, "cannot open %s", cubin_path); return -1; }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  void *img = malloc((size_t)n);
  if (fread(img, 1, (size_t)n, f) != (size_t)n) { fclose(f); free(img); return -2; }
  fclose(f);
  CK(cuModuleLoadData(&g_mod, img));
  free(img);
  CK(cuModuleGetFunction(&g_fn[0], g_mod, "fa_fwd_h128"));
  CK(cuModuleGetFunction(&g_fn[1], g_mod, "fa_fwd_h128_causal"));
  for (int i = 0; i < 2; i++)
    CK(cuFuncSetAttribute(g_fn[i], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, FA_SMEM_BYTES));
  CK(cuMemAlloc(&g_tmaps, 3 * sizeof(CUtensorMap)));
  return 0;
}

/* 4-D tensor map over a BSHD bf16 tensor: dims innermost-first (D, H, S, B),
 * box (64, 1, rows, 1), 128B swizzle, out-of-bounds elements read as zero. */
static int make_map(CUtensorMap *m, void *ptr, int B, int S, int H, int box_rows) {
  cuuint64_t dims[4] = {FA_D, (cuuint64_t)H, (cuuint64_t)S, (cuuint64_t)B};
  /* byte strides of dims 1..3 (dim 0 is contiguous) */
  cuuint64_t strides[3] = {(cuuint64_t)FA_D * 2, (cuuint64_t)H * FA_D * 2,
                           (cuuint64_t)S * H * FA_D * 2};
  cuuint32_t box[4] = {64, 1, (cuuint32_t)box_rows, 1};
  cuuint32_t estr[4] = {1, 1, 1, 1};
  CK(cuTensorMapEncodeTiled(m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, ptr, dims, strides, box, estr,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  return 0;
}

/* Encode the three maps, copy them to device memory (stream-ordered), launch. */
int fa_fwd(void *q, void *k, void *v, void *o, void *lse, int B, int Sq, int Skv, int Hq, int Hkv,
           float scale, int causal, void *stream) {
  static CUtensorMap maps[3] __attribute__((aligned(64)));
  static void *last[3];
  static int lastdims[5];
  int dims[5] = {B, Sq, Skv, Hq, Hkv};
  if (Hkv <= 0 || Hq % Hkv) { snprintf(g_err, sizeof g_err, "bad heads"); return -3; }
  CUstream st = (CUstream)stream;
  if (last[0] != q || last[1] != k || last[2] != v || memcmp(dims, lastdims, sizeof dims)) {
    int r;
    if ((r = make_map(&maps[0], q, B, Sq, Hq, FA_BM))) return r;
    if ((r = make_map(&maps[1], k, B, Skv, Hkv, FA_BN))) return r;
    if ((r = make_map(&maps[2], v, B, Skv, Hkv, FA_BN))) return r;
    CK(cuMemcpyHtoDAsync(g_tmaps, maps, sizeof maps, st));
    CK(cuStreamSynchronize(st)); /* maps[] is reused: make sure the copy is done */
    last[0] = q; last[1] = k; last[2] = v;
    memcpy(lastdims, dims, sizeof dims);
  }
  CUdeviceptr tq = g_tmaps, tk = g_tmaps + sizeof(CUtensorMap), tv = g_tmaps + 2 * sizeof(CUtensorMap);
  CUdeviceptr po = (CUdeviceptr)o, pl = (CUdeviceptr)lse;
  void *args[] = {&tq, &tk, &tv, &po, &pl, &B, &Sq, &Skv, &Hq, &Hkv, &scale};
  unsigned gx = (unsigned)((Sq + FA_BM - 1) / FA_BM);
  CK(cuLaunchKernel(g_fn[causal ? 1 : 0], gx, (unsigned)Hq, (unsigned)B, FA_THREADS, 1, 1,
                    FA_SMEM_BYTES, st, args, NULL));
  return 0;
}
