/* Unit test of libfa3rt without a GPU: the facts parser, argument validation and
 * the error messages. Built and run by python/tests/test_runtime.py (linked
 * against the CUDA link stub). The driver calls fa3rt.c makes are faked
 * here (fake_cuda.h: the program's definitions take the stub's place): off,
 * each fails as without a driver; on, a fake H100 records the tensor maps
 * and the kernel parameters of fa3rt_fwd's launches.
 *
 *   gcc -std=c11 -Iruntime/include -I/usr/local/cuda/include runtime/fa3rt.c \
 *       runtime/tests/fa3rt_unit.c -L/usr/local/cuda/lib64/stubs -lcuda -pthread -lm
 */
#include "fa3rt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"

static int g_fail, g_n;

#define EXPECT(cond)                                                          \
  do {                                                                        \
    g_n++;                                                                    \
    if (!(cond)) {                                                            \
      g_fail++;                                                               \
      fprintf(stderr, "%s:%d: FAILED: %s\n  last error: %s\n", __FILE__,      \
              __LINE__, #cond, fa3rt_last_error());                          \
    }                                                                         \
  } while (0)

/* status st and a message containing sub */
static int err_is(fa3rt_status st, fa3rt_status want, const char *sub) {
  if (st != want) {
    fprintf(stderr, "  got %s, want %s (%s)\n", fa3rt_status_name(st), fa3rt_status_name(want),
            fa3rt_last_error());
    return 0;
  }
  if (sub && !strstr(fa3rt_last_error(), sub)) {
    fprintf(stderr, "  message '%s' lacks '%s'\n", fa3rt_last_error(), sub);
    return 0;
  }
  return 1;
}

static const char *kFacts =
    "fa3-kernel-facts 1\n"
    "# a comment\n"
    "kernel fa3_fwd_d128_bf16_causal\n"
    "dtype bf16\n"
    "head_dim 128\n"
    "head_dim_v 128\n"
    "block_m 128\n"
    "block_n 128\n"
    "threads 384\n"
    "dynamic_smem 163912\r\n" /* CRLF tolerated */
    "causal 1\n"
    "window_left -1\n"
    "window_right 0\n"
    "softcap 0\n"
    "scale 0.08838834764831845\n"
    "some_future_key whatever it says\n"
    "params mapQ mapK mapV mapO O LSE tileCounter B Sq Skv Hq Hkv   oStrideB oStrideS oStrideH scaleLog2 cuSeqlensQ cuSeqlensK seqUsedK maxSeqlenQ numSplits oAccum lseAccum pageTable pageTableStride pageSize "
    "qDescale kDescale vDescale qDescaleStrideB qDescaleStrideH qDescaleStrideM kDescaleStrideB kDescaleStrideH kDescaleStrideN vDescaleStrideB vDescaleStrideH leftPadK"
    " pagedK pagedV pagedStridePage pagedStrideRow pagedStrideHead pagedPages\n"
    "grid tiles\n";

/* A decoding kernel's facts (Fa3AttentionSpec.decode): split-KV and GQA
   packing, one CTA per tile. */
static const char *kDecFacts =
    "fa3-kernel-facts 1\n"
    "kernel fa3_fwd_d128_bf16_decode_kernel\n"
    "dtype bf16\n"
    "head_dim 128\n"
    "head_dim_v 128\n"
    "block_m 64\n"
    "block_n 128\n"
    "threads 256\n"
    "dynamic_smem 100000\n"
    "causal 0\n"
    "window_left -1\n"
    "window_right -1\n"
    "softcap 0\n"
    "scale 0.08838834764831845\n"
    "params mapQ mapK mapV mapO O LSE tileCounter B Sq Skv Hq Hkv oStrideB oStrideS oStrideH "
    "scaleLog2 cuSeqlensQ cuSeqlensK seqUsedK maxSeqlenQ numSplits oAccum lseAccum pageTable pageTableStride pageSize "
    "qDescale kDescale vDescale qDescaleStrideB qDescaleStrideH qDescaleStrideM kDescaleStrideB kDescaleStrideH kDescaleStrideN vDescaleStrideB vDescaleStrideH leftPadK"
    " pagedK pagedV pagedStridePage pagedStrideRow pagedStrideHead pagedPages\n"
    "grid tiles\n"
    "cluster_m 1\n"
    "varlen 0\n"
    "split_kv 1\n"
    "pack_gqa 1\n";

/* A backward kernel's facts: `backward 1` after its params (the order of
   keys does not matter). */
static const char *kBwdFacts =
    "fa3-kernel-facts 1\n"
    "kernel fa3_bwd_d128_bf16_causal_kernel\n"
    "dtype bf16\n"
    "head_dim 128\n"
    "head_dim_v 128\n"
    "block_m 64\n"
    "block_n 128\n"
    "threads 384\n"
    "dynamic_smem 200000\n"
    "causal 1\n"
    "window_left -1\n"
    "window_right 0\n"
    "softcap 0\n"
    "scale 0.08838834764831845\n"
    "params mapQ mapK mapV mapdO dQaccum dK dV LSE delta B Sq Skv Hq Hkv dkvStrideB "
    "dkvStrideS dkvStrideH scaleLog2\n"
    "grid tiles\n"
    "cluster_m 1\n"
    "backward 1\n";

/* text `base` with the line of `key` replaced by `line` (NULL: dropped) */
static char *text_with(const char *base, const char *key, const char *line) {
  static char buf[4096];
  buf[0] = 0;
  const char *p = base;
  while (*p) {
    const char *e = strchr(p, '\n');
    size_t n = e ? (size_t)(e - p + 1) : strlen(p);
    size_t kl = strlen(key);
    if (!strncmp(p, key, kl) && p[kl] == ' ') {
      if (line) { strcat(buf, line); strcat(buf, "\n"); }
    } else {
      strncat(buf, p, n);
    }
    p += n;
  }
  return buf;
}

/* kFacts with one line replaced (NULL: dropped) */
static char *facts_with(const char *key, const char *line) { return text_with(kFacts, key, line); }

static void test_facts(void) {
  fa3rt_facts f;
  EXPECT(fa3rt_facts_parse(kFacts, strlen(kFacts), &f) == FA3RT_OK);
  EXPECT(!strcmp(f.kernel, "fa3_fwd_d128_bf16_causal"));
  EXPECT(f.version == 1 && f.dtype == FA3RT_BF16 && f.head_dim == 128 && f.head_dim_v == 128);
  EXPECT(f.block_m == 128 && f.block_n == 128 && f.threads == 384 && f.dynamic_smem == 163912);
  EXPECT(f.causal == 1 && f.window_left == -1 && f.window_right == 0 && f.softcap == 0);
  EXPECT(fabs(f.scale - 0.08838834764831845) < 1e-15);
  EXPECT(f.cluster_m == 1); /* optional key, absent */

  const char *f16 = facts_with("dtype", "dtype f16");
  EXPECT(fa3rt_facts_parse(f16, strlen(f16), &f) == FA3RT_OK && f.dtype == FA3RT_F16);

  const char *t;
  t = facts_with("head_dim", NULL);
  EXPECT(err_is(fa3rt_facts_parse(t, strlen(t), &f), FA3RT_ERR_FACTS, "lack required key(s): head_dim"));
  t = facts_with("scale", NULL);
  EXPECT(err_is(fa3rt_facts_parse(t, strlen(t), &f), FA3RT_ERR_FACTS, "scale"));
  t = facts_with("dtype", "dtype f32");
  EXPECT(err_is(fa3rt_facts_parse(t, strlen(t), &f), FA3RT_ERR_FACTS,
                "facts line 4: dtype 'f32' is not supported (bf16, f16 or e4m3)"));
  t = facts_with("head_dim", "head_dim 12x");
  EXPECT(err_is(fa3rt_facts_parse(t, strlen(t), &f), FA3RT_ERR_FACTS,
                "facts line 5: head_dim: '12x' is not an integer (8 to 256, a multiple of 8)"));
  t = facts_with("head_dim", "head_dim 100"); /* not a multiple of 8 */
  EXPECT(err_is(fa3rt_facts_parse(t, strlen(t), &f), FA3RT_ERR_FACTS,
                "head_dim: 100 is out of range (8 to 256, a multiple of 8)"));
  t = facts_with("params", "params mapQ mapK mapV O LSE B Sq Skv Hq Hkv scale");
  EXPECT(err_is(fa3rt_facts_parse(t, strlen(t), &f), FA3RT_ERR_FACTS, "is not the ABI"));
  t = facts_with("window_right", "window_right 5");
  EXPECT(err_is(fa3rt_facts_parse(t, strlen(t), &f), FA3RT_ERR_FACTS, "causal 1 needs window_right 0"));
  t = facts_with("fa3-kernel-facts", "fa3-kernel-facts 5");
  EXPECT(err_is(fa3rt_facts_parse(t, strlen(t), &f), FA3RT_ERR_FACTS, "newer than this runtime"));
  /* version 2: what the compiler writes for a deterministic kernel; 4 for
     a decoding one (3: one before its append took numPages) */
  t = facts_with("fa3-kernel-facts", "fa3-kernel-facts 2");
  EXPECT(fa3rt_facts_parse(t, strlen(t), &f) == FA3RT_OK && f.version == 2);
  t = facts_with("fa3-kernel-facts", "fa3-kernel-facts 3");
  EXPECT(fa3rt_facts_parse(t, strlen(t), &f) == FA3RT_OK && f.version == 3);
  t = facts_with("fa3-kernel-facts", "fa3-kernel-facts 4");
  EXPECT(fa3rt_facts_parse(t, strlen(t), &f) == FA3RT_OK && f.version == 4);
  t = facts_with("fa3-kernel-facts", NULL);
  EXPECT(err_is(fa3rt_facts_parse(t, strlen(t), &f), FA3RT_ERR_FACTS, "not a facts file"));
  t = facts_with("threads", "threads 384\nthreads 256");
  EXPECT(err_is(fa3rt_facts_parse(t, strlen(t), &f), FA3RT_ERR_FACTS, "duplicate key 'threads'"));
  EXPECT(err_is(fa3rt_facts_parse("", 0, &f), FA3RT_ERR_FACTS, "not a facts file"));
  t = facts_with("grid", "grid persistent\ncluster_m 2");
  EXPECT(fa3rt_facts_parse(t, strlen(t), &f) == FA3RT_OK && f.cluster_m == 2 && f.persistent);
  t = facts_with("grid", "grid tiles\ncluster_m 4");
  EXPECT(err_is(fa3rt_facts_parse(t, strlen(t), &f), FA3RT_ERR_FACTS,
                "cluster_m: 4 is out of range (1 or 2)"));
  t = facts_with("grid", "grid tiles\ncluster_m 2\ncluster_m 2");
  EXPECT(err_is(fa3rt_facts_parse(t, strlen(t), &f), FA3RT_ERR_FACTS, "duplicate key 'cluster_m'"));
  /* not NUL-terminated: the length is what counts */
  EXPECT(fa3rt_facts_parse(kFacts, strlen(kFacts) - 1, &f) == FA3RT_OK);

  EXPECT(err_is(fa3rt_facts_load("/nonexistent/x.facts", &f), FA3RT_ERR_IO, "/nonexistent/x.facts"));
  /* a device file: read up to the size limit, not forever */
  EXPECT(err_is(fa3rt_facts_load("/dev/zero", &f), FA3RT_ERR_IO, "is larger than 65536 bytes"));
}

/* The grammar's edges (python/tests/test_facts_fuzz.py checks that the Python
   parser agrees on these and many more; here: the C messages). */
static void test_facts_grammar(void) {
  fa3rt_facts f;
  const char *t;
#define FACTS_ERR(key, line, sub)                                                  \
  do {                                                                           \
    t = facts_with(key, line);                                                   \
    EXPECT(err_is(fa3rt_facts_parse(t, strlen(t), &f), FA3RT_ERR_FACTS, sub));   \
  } while (0)
  FACTS_ERR("threads", "threads +384", "threads: '+384' is not an integer");
  FACTS_ERR("threads", "threads 0x10", "threads: '0x10' is not an integer");
  FACTS_ERR("threads", "threads 384junk", "'384junk' is not an integer");
  FACTS_ERR("threads", "threads 1_0", "'1_0' is not an integer");
  FACTS_ERR("threads", "threads 384 384", "'384 384' is not an integer");
  FACTS_ERR("threads", "threads", "key 'threads' has no value");
  FACTS_ERR("window_left", "window_left 2147483648", "window_left: 2147483648 is out of range (-1 to 2^31-1)");
  FACTS_ERR("window_left", "window_left 99999999999999999999999", "is out of range (-1 to 2^31-1)");
  FACTS_ERR("window_left", "window_left -2", "window_left: -2 is out of range");
  FACTS_ERR("scale", "scale 1e300", "scale: 1e300 is out of range (0 < scale <= 1e30)");
  FACTS_ERR("scale", "scale 1.000000000000001e30", "scale: 1.000000000000001e30 is out of range");
  FACTS_ERR("scale", "scale nan", "scale: 'nan' is not a decimal number");
  FACTS_ERR("scale", "scale inf", "'inf' is not a decimal number");
  FACTS_ERR("scale", "scale 0x1p-3", "'0x1p-3' is not a decimal number"); /* strtod would take it */
  FACTS_ERR("scale", "scale .5", "'.5' is not a decimal number");
  FACTS_ERR("scale", "scale -0", "scale: -0 is out of range");
  FACTS_ERR("softcap", "softcap 1e309", "softcap: 1e309 is out of range");
  FACTS_ERR("kernel", "kernel 9lives", "kernel: '9lives' is not a C identifier");
  FACTS_ERR("kernel", "kernel a-b", "kernel: 'a-b' is not a C identifier");
  FACTS_ERR("grid", "grid tiles\ncubin /etc/passwd", "cubin: '/etc/passwd' is not a file name");
  FACTS_ERR("grid", "grid tiles\ncubin ..", "cubin: '..' is not a file name");
  FACTS_ERR("grid", "grid tiles\nfa3-kernel-facts 1", "duplicate key 'fa3-kernel-facts'");
  FACTS_ERR("grid", "grid tiles\x01", "byte 0x01 at column 11 is not printable ASCII");
  FACTS_ERR("grid", "grid tiles # caf\xc3\xa9", "byte 0xc3 at column 17");
  FACTS_ERR("fa3-kernel-facts", "fa3-kernel-facts 0", "version: 0 is out of range (1 to 4)");
  FACTS_ERR("fa3-kernel-facts", "fa3-kernel-facts +1", "version: '+1' is not an integer");
#undef FACTS_ERR
  /* accepted: -0 is 0, subnormals and underflow to 0 are numbers, edges of ranges */
  t = facts_with("softcap", "softcap -0.0");
  EXPECT(fa3rt_facts_parse(t, strlen(t), &f) == FA3RT_OK && f.softcap == 0 && !signbit(f.softcap));
  t = facts_with("softcap", "softcap 1e-320");
  EXPECT(fa3rt_facts_parse(t, strlen(t), &f) == FA3RT_OK && f.softcap > 0 && f.softcap < 1e-300);
  t = facts_with("scale", "scale 1e30");
  EXPECT(fa3rt_facts_parse(t, strlen(t), &f) == FA3RT_OK && f.scale == 1e30);
  t = facts_with("scale", "scale 1e-300");
  EXPECT(fa3rt_facts_parse(t, strlen(t), &f) == FA3RT_OK && f.scale == 1e-300);
  t = facts_with("window_left", "window_left\t 2147483647 # max");
  EXPECT(fa3rt_facts_parse(t, strlen(t), &f) == FA3RT_OK && f.window_left == INT32_MAX);
  t = facts_with("grid", "grid tiles\ncubin k.v1.cubin");
  EXPECT(fa3rt_facts_parse(t, strlen(t), &f) == FA3RT_OK && !strcmp(f.cubin, "k.v1.cubin"));
  EXPECT(fa3rt_facts_parse(kFacts, strlen(kFacts), &f) == FA3RT_OK && f.cubin[0] == 0);
  /* a 255-character kernel name fits, 256 does not */
  char line[300] = "kernel ";
  memset(line + 7, 'k', 255);
  line[7 + 255] = 0;
  t = facts_with("kernel", line);
  EXPECT(fa3rt_facts_parse(t, strlen(t), &f) == FA3RT_OK && strlen(f.kernel) == 255);
  strcat(line, "k");
  t = facts_with("kernel", line);
  EXPECT(err_is(fa3rt_facts_parse(t, strlen(t), &f), FA3RT_ERR_FACTS, "is not a C identifier"));
  /* a NUL byte inside the text (its length says where it ends) */
  char nul[4096];
  size_t n = strlen(kFacts);
  memcpy(nul, kFacts, n);
  nul[20] = 0;
  EXPECT(err_is(fa3rt_facts_parse(nul, n, &f), FA3RT_ERR_FACTS, "byte 0x00"));
  /* lines and files longer than the limits */
  static char big[FA3RT_FACTS_MAX_BYTES + 2];
  memset(big, ' ', sizeof big);
  memcpy(big, kFacts, n);
  EXPECT(err_is(fa3rt_facts_parse(big, FA3RT_FACTS_MAX_BYTES, &f), FA3RT_ERR_FACTS,
                "bytes is too long (at most 1023)"));
  for (size_t i = n; i < sizeof big; i += 100) big[i] = '\n';
  EXPECT(fa3rt_facts_parse(big, FA3RT_FACTS_MAX_BYTES, &f) == FA3RT_OK);
  EXPECT(err_is(fa3rt_facts_parse(big, FA3RT_FACTS_MAX_BYTES + 1, &f), FA3RT_ERR_FACTS,
                "65537 bytes is too long (at most 65536)"));
}

static fa3rt_tensor bshd(uint64_t ptr, long B, long S, long H, long D) {
  fa3rt_tensor t = {ptr, {B, H, S, D}, {S * H * D, D, H * D, 1}};
  return t;
}

static fa3rt_fwd_args good_args(void) {
  fa3rt_fwd_args a;
  memset(&a, 0, sizeof a);
  a.dtype = FA3RT_BF16;
  a.q = bshd(0x10000, 2, 1000, 8, 128);
  a.k = bshd(0x20000, 2, 700, 2, 128);
  a.v = bshd(0x30000, 2, 700, 2, 128);
  a.o = bshd(0x40000, 2, 1000, 8, 128);
  a.lse = 0x50000;
  a.softmax_scale = NAN;
  return a;
}

static void test_plan(void) {
  fa3rt_facts f;
  EXPECT(fa3rt_facts_parse(kFacts, strlen(kFacts), &f) == FA3RT_OK);
  fa3rt_fwd_args a = good_args();
  fa3rt_fwd_launch L;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK);
  EXPECT(L.grid[0] == 8 * 8 * 2 && L.grid[1] == 1 && L.grid[2] == 1); /* tiles */
  EXPECT(L.block[0] == 384 && L.dynamic_smem == 163912 && !L.empty && !L.fill_only);
  EXPECT(L.B == 2 && L.Sq == 1000 && L.Skv == 700 && L.Hq == 8 && L.Hkv == 2);
  EXPECT(L.o_stride_b == 1000L * 8 * 128 && L.o_stride_s == 8 * 128 && L.o_stride_h == 128);
  EXPECT(fabs(L.scale - f.scale) < 1e-15);
  EXPECT(fabs(L.scale_log2 - (float)(f.scale * 1.4426950408889634)) < 1e-7);
  a.softmax_scale = 0.5;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.scale == 0.5);
  a.softmax_scale = 0;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.scale == f.scale);
  a.softmax_scale = 1e30;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.scale == 1e30 && isfinite(L.scale_log2));

  /* BHSD (SDPA) storage for q/o, and an o view with a strided batch */
  a = good_args();
  a.q.strides[0] = 8L * 1000 * 128; a.q.strides[1] = 1000L * 128; a.q.strides[2] = 128;
  a.o.strides[0] = 4L * 1000 * 8 * 128;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.o_stride_b == 4L * 1000 * 8 * 128);
  a.lse = 0; /* LSE optional */
  a.tile_counter = 0x60000; /* the caller's tile counters */
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK);
  a.tile_counter = 0;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK);

#define BAD(mutate, sub)                                                          \
  do {                                                                            \
    a = good_args();                                                              \
    mutate;                                                                       \
    EXPECT(err_is(fa3rt_fwd_plan(&f, &a, &L), FA3RT_ERR_INVALID_ARGUMENT, sub));   \
  } while (0)

  BAD(a.dtype = FA3RT_F16, "dtype f16 does not match kernel fa3_fwd_d128_bf16_causal (dtype bf16)");
  BAD(a.dtype = (fa3rt_dtype)7, "invalid dtype 7 (expected FA3RT_BF16, FA3RT_F16 or FA3RT_E4M3)");
  BAD(a.dtype = FA3RT_E4M3, "dtype e4m3 does not match kernel fa3_fwd_d128_bf16_causal (dtype bf16)");
  BAD(a.q.shape[3] = 64, "q head dim (shape[3]) is 64 but kernel fa3_fwd_d128_bf16_causal has head_dim 128");
  BAD(a.k.shape[3] = 64, "k head dim");
  BAD(a.v.shape[3] = 64, "v head dim (shape[3]) is 64 but kernel fa3_fwd_d128_bf16_causal has head_dim_v 128");
  BAD((a.k.shape[1] = 3, a.v.shape[1] = 3), "Hq = 8 is not a multiple of Hkv = 3");
  BAD(a.k.shape[0] = 1, "batch sizes differ: q 2, k 1, v 2");
  BAD(a.v.shape[2] = 701, "k and v differ");
  BAD(a.o.shape[2] = 999, "o shape [B,H,S,D] = [2,8,999,128] but must be [2,8,1000,128]");
  BAD(a.o.shape[1] = 4, "o shape");
  BAD(a.q.ptr = 0x10008, "q pointer 0x10008 is not 16-byte aligned");
  BAD(a.o.ptr = 0x40002, "o pointer 0x40002 is not 16-byte aligned");
  BAD(a.k.ptr = 0, "k pointer is NULL");
  BAD(a.lse = 0x50002, "lse pointer 0x50002 is not 4-byte aligned");
  BAD(a.tile_counter = 0x60002, "tile_counter pointer 0x60002 is not a 4-byte aligned device "
      "address below 2^63 - 8");
  BAD(a.tile_counter = (uint64_t)-8, "tile_counter pointer 0xfffffffffffffff8 is not a 4-byte");
  BAD(a.q.strides[3] = 2, "q stride of the head dim (D) is 2 elements; it must be 1");
  BAD(a.o.strides[3] = 2, "o stride of the head dim");
  BAD(a.k.strides[2] = 2 * 128 + 4, "k stride of dim S is 260 elements = 520 bytes; it must be a multiple of 16 bytes");
  BAD(a.v.strides[0] = -1, "v.strides[0] (B): -1 is out of range (1 to 549755813887 elements");
  BAD((a.q.shape[0] = a.k.shape[0] = a.v.shape[0] = a.o.shape[0] = 70000,
       a.q.shape[1] = a.o.shape[1] = 70000, a.k.shape[1] = a.v.shape[1] = 1),
      "tiles: 8 m-blocks of 128 rows * Hq 70000 * B 70000 is out of range (at most 2^31-1");
  BAD((a.q.shape[2] = a.o.shape[2] = 3000000000L), "q.shape[2] (S): 3000000000 is out of range (0 to 2^31-1)");
  BAD((a.k.shape[2] = a.v.shape[2] = 3000000000L), "k.shape[2] (S): 3000000000 is out of range");
  BAD((a.k.shape[1] = a.v.shape[1] = 0), "no heads (Hkv = 0)");
  BAD(a.q.shape[2] = -5, "q.shape[2] (S): -5 is out of range (0 to 2^31-1)");

  /* issue 17: no overflow, wrap or zero grid on any number (UBSan checks the
     arithmetic: this test is built with -fno-sanitize-recover) */
  BAD((a.q.shape[0] = a.k.shape[0] = a.v.shape[0] = a.o.shape[0] = 1LL << 32,
       a.q.shape[1] = a.o.shape[1] = 1LL << 32), "q.shape[0] (B): 4294967296 is out of range");
  BAD((a.q.shape[0] = a.k.shape[0] = a.v.shape[0] = a.o.shape[0] = INT32_MAX,
       a.q.shape[1] = a.o.shape[1] = INT32_MAX, a.k.shape[1] = a.v.shape[1] = 1),
      "tiles: 8 m-blocks of 128 rows * Hq 2147483647 * B 2147483647 is out of range");
  BAD(a.q.ptr = (uint64_t)-16, "q pointer: 0xfffffffffffffff0 is out of range (below 2^63");
  BAD(a.q.ptr = (1ULL << 63) - 4096, "q at 0x7ffffffffffff000 with shape [2,8,1000,128]");
  BAD(a.lse = (uint64_t)-4, "lse pointer: 0xfffffffffffffffc is out of range");
  BAD(a.q.strides[2] = INT64_MAX - 7, "q.strides[2] (S): 9223372036854775800 is out of range");
  /* extent-1 dims whose derived stride (inner extent * stride) overflows */
  BAD((a.q.shape[0] = a.k.shape[0] = a.v.shape[0] = a.o.shape[0] = 1, a.q.shape[1] = a.o.shape[1] = 1,
       a.k.shape[1] = a.v.shape[1] = 1, a.q.shape[2] = a.o.shape[2] = INT32_MAX,
       a.q.strides[2] = (1LL << 39) - 8),
      "q dims inside H (extent 1) span 2^40 bytes or more");
  BAD(a.softmax_scale = 1e300, "softmax_scale: 1e+300 is out of range (0 < scale <= 1e30; 0 or NaN");
  BAD(a.softmax_scale = INFINITY, "softmax_scale: inf is out of range");
  BAD(a.softmax_scale = -1, "softmax_scale: -1 is out of range");
  BAD(a.softmax_scale = 1.000000000000001e30, "softmax_scale: 1e+30 is out of range");

  /* facts filled by a caller: every field is checked before it is used */
#define BAD_FACTS(mutate, sub)                                                    \
  do {                                                                            \
    fa3rt_facts g = f;                                                            \
    mutate;                                                                       \
    a = good_args();                                                              \
    EXPECT(err_is(fa3rt_fwd_plan(&g, &a, &L), FA3RT_ERR_INVALID_ARGUMENT, sub));   \
  } while (0)
  BAD_FACTS(g.block_m = 0, "facts.block_m: 0 is out of range (1 to 256)");
  BAD_FACTS(g.block_m = -128, "facts.block_m: -128 is out of range");
  BAD_FACTS(g.block_n = 257, "facts.block_n: 257 is out of range");
  BAD_FACTS(g.threads = 0, "facts.threads: 0 is out of range (1 to 1024)");
  BAD_FACTS(g.dynamic_smem = -1, "facts.dynamic_smem: -1 is out of range (0 to 2^20)");
  BAD_FACTS(g.head_dim = 100, "facts.head_dim: 100 is out of range (8 to 256, a multiple of 8)");
  BAD_FACTS(g.cluster_m = 0, "facts.cluster_m: 0 is out of range (1 or 2)");
  BAD_FACTS(g.causal = 2, "facts.causal: 2 is out of range (0 or 1)");
  BAD_FACTS(g.window_left = -5, "facts.window_left: -5 is out of range");
  BAD_FACTS(g.window_right = 3, "causal 1 needs window_right 0, got 3");
  BAD_FACTS(g.scale = 0, "facts.scale: 0 is out of range (0 < scale <= 1e30)");
  BAD_FACTS(g.scale = NAN, "facts.scale: nan is out of range");
  BAD_FACTS(g.softcap = -1, "facts.softcap: -1 is out of range");
  BAD_FACTS(g.persistent = 7, "facts.grid: not tiles or persistent");
  BAD_FACTS(g.dtype = (fa3rt_dtype)9, "facts.dtype: not bf16, f16 or e4m3");
  BAD_FACTS(g.version = 0, "facts.version: 0 is out of range (1 to 4)");
  BAD_FACTS(memset(g.kernel, 'x', sizeof g.kernel), "facts.kernel: not a C identifier");
  BAD_FACTS(g.kernel[0] = 0, "facts.kernel: not a C identifier");
  BAD_FACTS(strcpy(g.cubin, "../x.cubin"), "facts.cubin: not a file name");
#undef BAD_FACTS

  /* a dim of extent 1 may carry any stride (PyTorch leaves odd strides there) */
  a = good_args();
  a.q.shape[0] = a.k.shape[0] = a.v.shape[0] = a.o.shape[0] = 1;
  a.q.strides[0] = 3; a.o.strides[0] = 0;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.o_stride_b > 0 && L.o_stride_b % 8 == 0);

  /* empty problems */
  a = good_args();
  a.q.shape[2] = a.o.shape[2] = 0; a.q.ptr = a.o.ptr = 0;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.empty);
  a = good_args();
  a.q.shape[0] = a.k.shape[0] = a.v.shape[0] = a.o.shape[0] = 0;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.empty);
  a = good_args();
  a.k.shape[2] = a.v.shape[2] = 0; a.k.ptr = a.v.ptr = 0;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && !L.empty && L.fill_only);

  /* a 2-CTA cluster kernel takes m-blocks in pairs: ceil(1000 / 128) = 8 is
     even, ceil(300 / 128) = 3 rounds up to 4 */
  f.cluster_m = 2;
  a = good_args();
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.grid[0] == 8 * 8 * 2);
  a.q.shape[2] = a.o.shape[2] = 300;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.grid[0] == 4 * 8 * 2);
}

/* Backward kernels: their facts and fa3rt_bwd's checks. */
static void test_backward_facts(void) {
  fa3rt_facts f;
  const char *t = kBwdFacts;
  EXPECT(fa3rt_facts_parse(t, strlen(t), &f) == FA3RT_OK && f.backward == 1);
  EXPECT(f.block_m == 64 && f.block_n == 128 && !f.persistent && f.cluster_m == 1);
  EXPECT(fa3rt_facts_parse(kFacts, strlen(kFacts), &f) == FA3RT_OK && f.backward == 0);
  /* `backward` first, before the params: the same */
  char buf[4096] = "fa3-kernel-facts 1\nbackward 1\n";
  strcat(buf, text_with(kBwdFacts, "backward", NULL) + strlen("fa3-kernel-facts 1\n"));
  EXPECT(fa3rt_facts_parse(buf, strlen(buf), &f) == FA3RT_OK && f.backward == 1);
  /* each kind's params with the other's `backward` */
  t = text_with(kBwdFacts, "backward", "backward 0");
  EXPECT(err_is(fa3rt_facts_parse(t, strlen(t), &f), FA3RT_ERR_FACTS,
                "facts line 15: params is the backward kernel's parameter list but the facts say "
                "backward 0, whose list is 'mapQ mapK mapV mapO O LSE"));
  t = text_with(kBwdFacts, "backward", NULL);
  EXPECT(err_is(fa3rt_facts_parse(t, strlen(t), &f), FA3RT_ERR_FACTS, "say backward 0"));
  t = facts_with("grid", "grid tiles\nbackward 1");
  EXPECT(err_is(fa3rt_facts_parse(t, strlen(t), &f), FA3RT_ERR_FACTS,
                "params is the forward kernel's parameter list but the facts say backward 1, "
                "whose list is 'mapQ mapK mapV mapdO dQaccum"));
  t = text_with(kBwdFacts, "params", "params mapQ mapK mapV mapdO dQaccum dK dV LSE delta");
  EXPECT(err_is(fa3rt_facts_parse(t, strlen(t), &f), FA3RT_ERR_FACTS,
                "is not the ABI this runtime launches"));
  t = text_with(kBwdFacts, "backward", "backward 2");
  EXPECT(err_is(fa3rt_facts_parse(t, strlen(t), &f), FA3RT_ERR_FACTS,
                "backward: 2 is out of range (0 or 1)"));
  /* what the backward kernel is not */
  t = text_with(kBwdFacts, "grid", "grid persistent");
  EXPECT(err_is(fa3rt_facts_parse(t, strlen(t), &f), FA3RT_ERR_FACTS,
                "facts of kernel 'fa3_bwd_d128_bf16_causal_kernel': backward 1 needs grid tiles"));
  t = text_with(kBwdFacts, "cluster_m", "cluster_m 2");
  EXPECT(err_is(fa3rt_facts_parse(t, strlen(t), &f), FA3RT_ERR_FACTS,
                "backward 1 needs cluster_m 1"));
  t = text_with(kBwdFacts, "cluster_m", "varlen 1");
  EXPECT(err_is(fa3rt_facts_parse(t, strlen(t), &f), FA3RT_ERR_FACTS,
                "backward 1 needs varlen 0"));
}

/* Well-formed backward arguments of head dim d (B 2, Sq 1000, Skv 700,
   Hq 8, Hkv 2). */
static fa3rt_bwd_args bwd_args_of_dim(long d) {
  fa3rt_bwd_args a;
  memset(&a, 0, sizeof a);
  a.dtype = FA3RT_BF16;
  a.q = bshd(0x10000, 2, 1000, 8, d);
  a.k = bshd(0x20000, 2, 700, 2, d);
  a.v = bshd(0x30000, 2, 700, 2, d);
  a.dout = bshd(0x40000, 2, 1000, 8, d);
  a.o = bshd(0x48000, 2, 1000, 8, d);
  a.dq = bshd(0x90000, 2, 1000, 8, d);
  a.dk = bshd(0x60000, 2, 700, 2, d);
  a.dv = bshd(0x70000, 2, 700, 2, d);
  a.lse = 0x50000;
  a.delta = 0x58000;
  a.dq_accum = 0x80000;
  a.softmax_scale = NAN;
  return a;
}

static fa3rt_bwd_args good_bwd_args(void) { return bwd_args_of_dim(128); }

static void test_bwd_plan(void) {
  fa3rt_facts f, fwd;
  EXPECT(fa3rt_facts_parse(kBwdFacts, strlen(kBwdFacts), &f) == FA3RT_OK);
  EXPECT(fa3rt_facts_parse(kFacts, strlen(kFacts), &fwd) == FA3RT_OK);
  fa3rt_bwd_args a = good_bwd_args();
  fa3rt_bwd_launch L;
  EXPECT(fa3rt_bwd_plan(&f, &a, &L) == FA3RT_OK);
  EXPECT(L.grid[0] == 6 * 2 * 2 && L.grid[1] == 1 && L.grid[2] == 1); /* ceil(700/128) * Hkv * B */
  EXPECT(L.block[0] == 384 && L.block[1] == 1 && L.dynamic_smem == 200000);
  EXPECT(!L.empty && !L.zero_only && L.B == 2 && L.Sq == 1000 && L.Skv == 700 && L.Hq == 8 &&
         L.Hkv == 2);
  EXPECT(L.dkv_stride_b == 700L * 2 * 128 && L.dkv_stride_s == 2 * 128 && L.dkv_stride_h == 128);
  EXPECT(L.dq_accum_words == 2ULL * 8 * 1024 * 128);
  EXPECT(fabs(L.scale - f.scale) < 1e-15);
  EXPECT(fabs(L.scale_log2 - (float)(f.scale * 1.4426950408889634)) < 1e-7);
  /* the helpers: B*Sq*Hq = 16000 rows, 256 * 16 / (128 * 2) = 16 a block */
  EXPECT(L.aux_grid == 1000 && L.aux_block == 256);
  EXPECT(L.o_stride_b == 1000L * 8 * 128 && L.o_stride_s == 8 * 128 && L.o_stride_h == 128);
  EXPECT(L.dout_stride_b == L.o_stride_b && L.dout_stride_s == L.o_stride_s &&
         L.dout_stride_h == L.o_stride_h);
  EXPECT(L.dq_stride_b == L.o_stride_b && L.dq_stride_s == L.o_stride_s &&
         L.dq_stride_h == L.o_stride_h);
  a.softmax_scale = 0.5;
  EXPECT(fa3rt_bwd_plan(&f, &a, &L) == FA3RT_OK && L.scale == 0.5);
  /* dq and o in BHSD (SDPA's layout), dout with a padded sequence stride */
  a = good_bwd_args();
  a.dq.strides[0] = 8L * 1000 * 128; a.dq.strides[1] = 1000L * 128; a.dq.strides[2] = 128;
  a.o.strides[0] = 8L * 1000 * 128; a.o.strides[1] = 1000L * 128; a.o.strides[2] = 128;
  a.dout.strides[2] = 8 * 136; a.dout.strides[0] = 1000L * 8 * 136; a.dout.strides[1] = 136;
  EXPECT(fa3rt_bwd_plan(&f, &a, &L) == FA3RT_OK && L.dq_stride_h == 1000L * 128 &&
         L.dq_stride_s == 128 && L.o_stride_h == 1000L * 128 && L.dout_stride_s == 8 * 136);
  /* the helpers' rows a block: D / 8 lanes a row rounded up to a power of
     two (their butterflies), so 32 at 64, 16 at 96, 8 at 192; dq_accum 64 x D
     floats a tile */
  {
    const struct { int d; unsigned grid; } dims[] = {{64, 500}, {96, 1000}, {192, 2000}};
    fa3rt_facts f64;
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; ++i) {
      const int d = dims[i].d;
      char dim[32], dim_v[32], text[4096]; /* text_with's buffer is static */
      snprintf(dim, sizeof dim, "head_dim %d", d);
      snprintf(dim_v, sizeof dim_v, "head_dim_v %d", d);
      strcpy(text, text_with(kBwdFacts, "head_dim", dim));
      const char *t = text_with(text, "head_dim_v", dim_v);
      fa3rt_facts fd;
      EXPECT(fa3rt_facts_parse(t, strlen(t), &fd) == FA3RT_OK);
      a = bwd_args_of_dim(d);
      EXPECT(fa3rt_bwd_plan(&fd, &a, &L) == FA3RT_OK && L.aux_grid == dims[i].grid &&
             L.dq_accum_words == 2ULL * 8 * 1024 * (unsigned long long)d);
      if (d == 64) f64 = fd;
    }
    a = bwd_args_of_dim(64);
    /* facts of another head_dim_v than head_dim: no backward of that kind */
    f64.head_dim_v = 128;
    a.v.shape[3] = a.dv.shape[3] = a.dout.shape[3] = a.o.shape[3] = 128;
    EXPECT(err_is(fa3rt_bwd_plan(&f64, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                  "kernel fa3_bwd_d128_bf16_causal_kernel has head_dim 64 and head_dim_v 128; "
                  "the backward takes head_dim_v = head_dim"));
  }
  /* 2^35 rows: the helpers' grid stops at 2^31-1 blocks (they stride over
     the rest) */
  a = good_bwd_args();
  a.q = a.dout = a.o = a.dq = bshd(0x10000, 32768, 131072, 8, 128);
  a.k = a.v = a.dk = a.dv = bshd(0x20000, 32768, 700, 2, 128);
  EXPECT(fa3rt_bwd_plan(&f, &a, &L) == FA3RT_OK && L.aux_grid == 2147483647u &&
         L.dq_accum_words == 1ULL << 42);

  /* each kind of kernel refuses the other's call by name */
  a = good_bwd_args();
  EXPECT(err_is(fa3rt_bwd_plan(&fwd, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "kernel fa3_fwd_d128_bf16_causal is a forward kernel (facts backward 0): "
                "fa3rt_bwd launches backward kernels"));
  fa3rt_fwd_args fa = good_args();
  fa3rt_fwd_launch FL;
  EXPECT(err_is(fa3rt_fwd_plan(&f, &fa, &FL), FA3RT_ERR_INVALID_ARGUMENT,
                "kernel fa3_bwd_d128_bf16_causal_kernel is a backward kernel (facts backward 1): "
                "launch it with fa3rt_bwd"));
  /* facts filled by a caller are checked as the parser's */
  fa3rt_facts g = f;
  g.persistent = 1;
  EXPECT(err_is(fa3rt_bwd_plan(&g, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "backward 1 needs grid tiles"));

#define BAD_BWD(mutate, sub)                                                      \
  do {                                                                            \
    a = good_bwd_args();                                                          \
    mutate;                                                                       \
    EXPECT(err_is(fa3rt_bwd_plan(&f, &a, &L), FA3RT_ERR_INVALID_ARGUMENT, sub));   \
  } while (0)
  BAD_BWD(a.dtype = FA3RT_F16, "dtype f16 does not match kernel fa3_bwd_d128_bf16_causal_kernel");
  BAD_BWD(a.q.shape[3] = 64, "q head dim (shape[3]) is 64 but kernel");
  BAD_BWD((a.k.shape[1] = a.v.shape[1] = a.dk.shape[1] = a.dv.shape[1] = 3),
          "Hq = 8 is not a multiple of Hkv = 3");
  BAD_BWD(a.dout.shape[2] = 999, "dout shape [B,H,S,D] = [2,8,999,128] but must be [2,8,1000,128]");
  BAD_BWD(a.dk.shape[2] = 701, "dk shape [B,H,S,D] = [2,2,701,128] but must be [2,2,700,128]");
  BAD_BWD(a.dv.shape[0] = 1, "dv shape [B,H,S,D] = [1,2,700,128]");
  BAD_BWD((a.dv.strides[1] = 700 * 128, a.dv.strides[2] = 128, a.dv.strides[0] = 2 * 700 * 128),
          "dk and dv strides differ in dim H (128 and 89600 elements): the kernel takes one set");
  BAD_BWD(a.dk.ptr = 0, "dk pointer is NULL");
  BAD_BWD(a.dv.ptr = 0x70008, "dv pointer 0x70008 is not 16-byte aligned (the backward kernel "
                              "copies dK and dV out 16 bytes at a time)");
  BAD_BWD(a.dout.strides[3] = 2, "dout stride of the head dim (D) is 2 elements");
  BAD_BWD(a.dk.strides[2] = 2 * 128 + 4, "dk stride of dim S is 260 elements = 520 bytes; it "
                                         "must be a multiple of 16 bytes (16-byte aligned rows "
                                         "for the backward kernel's dK/dV copy-out)");
  /* o and dq: read and written by the helper kernels, 16 bytes at a time */
  BAD_BWD(a.o.ptr = 0, "o pointer is NULL");
  BAD_BWD(a.dq.ptr = 0, "dq pointer is NULL");
  BAD_BWD(a.o.shape[2] = 999, "o shape [B,H,S,D] = [2,8,999,128] but must be [2,8,1000,128]");
  BAD_BWD(a.o.shape[3] = 64, "o shape [B,H,S,D] = [2,8,1000,64] but must be [2,8,1000,128]");
  BAD_BWD(a.dq.shape[1] = 4, "dq shape [B,H,S,D] = [2,4,1000,128] but must be [2,8,1000,128]");
  BAD_BWD(a.dq.strides[2] = 8 * 128 + 4,
          "dq stride of dim S is 1028 elements = 2056 bytes; it must be a multiple of 16 bytes "
          "(16-byte aligned rows for fa3rt_bwd's helper kernels)");
  BAD_BWD(a.dq.strides[0] = 1000L * 8 * 128 + 2, "dq stride of dim B is 1024002 elements");
  BAD_BWD(a.o.strides[1] = 132, "o stride of dim H is 132 elements = 264 bytes");
  BAD_BWD(a.dq.ptr = 0x90008, "dq pointer 0x90008 is not 16-byte aligned (fa3rt_bwd's helper "
          "kernels access its rows 16 bytes at a time)");
  BAD_BWD(a.o.ptr = 0x48004, "o pointer 0x48004 is not 16-byte aligned");
  BAD_BWD(a.dq.strides[3] = 2, "dq stride of the head dim (D) is 2 elements; it must be 1");
  BAD_BWD(a.dq.shape[2] = -1, "dq.shape[2] (S): -1 is out of range");
  BAD_BWD(a.dq_accum = 0, "dq_accum pointer is NULL");
  BAD_BWD(a.lse = 0, "lse pointer is NULL");
  BAD_BWD(a.delta = 0, "delta pointer is NULL");
  BAD_BWD(a.lse = 0x50004, "lse pointer 0x50004 is not 16-byte aligned");
  BAD_BWD(a.dq_accum = (1ULL << 63) - 4096,
          "dq_accum pointer: 0x7ffffffffffff000 is out of range (its 2097152 floats");
  BAD_BWD(a.delta = (uint64_t)-16, "delta pointer: 0xfffffffffffffff0 is out of range");
  BAD_BWD(a.softmax_scale = 1e300, "softmax_scale: 1e+300 is out of range");
  BAD_BWD((a.q.shape[0] = a.k.shape[0] = a.v.shape[0] = a.dout.shape[0] = a.dk.shape[0] =
           a.dv.shape[0] = 70000,
           a.k.shape[1] = a.v.shape[1] = a.dk.shape[1] = a.dv.shape[1] = 70000,
           a.q.shape[1] = a.dout.shape[1] = 70000,
           a.o.shape[0] = a.dq.shape[0] = 70000, a.o.shape[1] = a.dq.shape[1] = 70000),
          "tiles: 6 kv blocks of 128 rows * Hkv 70000 * B 70000 is out of range (at most 2^31-1");
#undef BAD_BWD

  /* empty problems: Sq 0 does nothing (nothing needed); Skv 0 runs the
     helpers only (delta written but not read, dq_accum zeroed, dq = 0; lse
     is not read) */
  a = good_bwd_args();
  a.q.shape[2] = a.dout.shape[2] = a.o.shape[2] = a.dq.shape[2] = 0;
  a.q.ptr = a.dout.ptr = a.o.ptr = a.dq.ptr = a.dq_accum = a.lse = a.delta = 0;
  EXPECT(fa3rt_bwd_plan(&f, &a, &L) == FA3RT_OK && L.empty && L.dq_accum_words == 0 &&
         L.aux_grid == 0);
  a = good_bwd_args();
  a.k.shape[2] = a.v.shape[2] = a.dk.shape[2] = a.dv.shape[2] = 0;
  a.k.ptr = a.v.ptr = a.dk.ptr = a.dv.ptr = a.lse = 0;
  a.dv.strides[1] = 12345; /* strides of empty tensors are not compared */
  EXPECT(fa3rt_bwd_plan(&f, &a, &L) == FA3RT_OK && !L.empty && L.zero_only &&
         L.grid[0] == 0 && L.dq_accum_words == 2ULL * 8 * 1024 * 128 && L.aux_grid == 1000);
  fa3rt_bwd_args z = a;
  a.dq_accum = 0;
  EXPECT(err_is(fa3rt_bwd_plan(&f, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "dq_accum pointer is NULL"));
  a = z;
  a.delta = 0;
  EXPECT(err_is(fa3rt_bwd_plan(&f, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "delta pointer is NULL"));
  a = z;
  a.dq.ptr = 0;
  EXPECT(err_is(fa3rt_bwd_plan(&f, &a, &L), FA3RT_ERR_INVALID_ARGUMENT, "dq pointer is NULL"));
  a = z;
  a.o.ptr = 0;
  EXPECT(err_is(fa3rt_bwd_plan(&f, &a, &L), FA3RT_ERR_INVALID_ARGUMENT, "o pointer is NULL"));
  /* GQA 8/1 with a dim of extent 1 (B): any stride there */
  a = good_bwd_args();
  a.q.shape[0] = a.k.shape[0] = a.v.shape[0] = a.dout.shape[0] = a.dk.shape[0] = a.dv.shape[0] = 1;
  a.o.shape[0] = a.dq.shape[0] = 1;
  a.k.shape[1] = a.v.shape[1] = a.dk.shape[1] = a.dv.shape[1] = 1;
  a.dk.strides[0] = 0; a.dv.strides[0] = 7;
  a.dq.strides[0] = 3; a.o.strides[0] = 0; /* extent 1: any stride, a plain one passed */
  EXPECT(fa3rt_bwd_plan(&f, &a, &L) == FA3RT_OK && L.grid[0] == 6 && L.aux_grid == 500 &&
         L.dq_stride_b == 1000L * 8 * 128 && L.o_stride_b == 1000L * 8 * 128);
  EXPECT(err_is(fa3rt_bwd_plan(NULL, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "fa3rt_bwd_plan: NULL argument"));
  EXPECT(err_is(fa3rt_bwd(NULL, &a, NULL), FA3RT_ERR_INVALID_ARGUMENT,
                "fa3rt_bwd: NULL kernel or args"));
}

/* fa3rt_bwd_args of B, Hq, Hkv, Sq, Skv at head dim D (BSHD, good_bwd_args'
   pointers) */
static fa3rt_bwd_args bwd_args_of(long B, long Hq, long Hkv, long Sq, long Skv, long D) {
  fa3rt_bwd_args a = good_bwd_args();
  a.q = bshd(0x10000, B, Sq, Hq, D);
  a.dout = bshd(0x40000, B, Sq, Hq, D);
  a.o = bshd(0x48000, B, Sq, Hq, D);
  a.dq = bshd(0x90000, B, Sq, Hq, D);
  a.k = bshd(0x20000, B, Skv, Hkv, D);
  a.v = bshd(0x30000, B, Skv, Hkv, D);
  a.dk = bshd(0x60000, B, Skv, Hkv, D);
  a.dv = bshd(0x70000, B, Skv, Hkv, D);
  return a;
}

/* Kernels configured for long sequences (facts `min_seqlen_q`): the key is
   read and range-checked, 0 when absent, and changes no launch. */
static void test_min_seqlen_q(void) {
  fa3rt_facts f, longf;
  EXPECT(fa3rt_facts_parse(kFacts, strlen(kFacts), &f) == FA3RT_OK && f.min_seqlen_q == 0);
  const char *t = facts_with("grid", "grid persistent\nmin_seqlen_q 6144");
  EXPECT(fa3rt_facts_parse(t, strlen(t), &longf) == FA3RT_OK && longf.min_seqlen_q == 6144);
  t = facts_with("grid", "grid persistent\nmin_seqlen_q -1");
  EXPECT(err_is(fa3rt_facts_parse(t, strlen(t), &f), FA3RT_ERR_FACTS,
                "min_seqlen_q: -1 is out of range (0 to 2^31-1; 0 = any length)"));
  t = facts_with("grid", "grid persistent\nmin_seqlen_q 2147483648");
  EXPECT(err_is(fa3rt_facts_parse(t, strlen(t), &f), FA3RT_ERR_FACTS, "min_seqlen_q"));
  /* the same launch as without the key */
  fa3rt_facts plain;
  EXPECT(fa3rt_facts_parse(kFacts, strlen(kFacts), &plain) == FA3RT_OK);
  fa3rt_fwd_args a = good_args();
  fa3rt_fwd_launch L1, L2;
  EXPECT(fa3rt_fwd_plan(&plain, &a, &L1) == FA3RT_OK &&
         fa3rt_fwd_plan(&longf, &a, &L2) == FA3RT_OK &&
         L1.grid[0] == L2.grid[0] && L1.block[0] == L2.block[0] &&
         L1.dynamic_smem == L2.dynamic_smem);
}

/* Deterministic backward kernels (facts `deterministic 1`): the key, its
   rule, and dq_accum's turn counters after the tiles. */
static void test_deterministic(void) {
  fa3rt_facts f, det, fwd;
  char det_text[4096], det64_text[4096], plain64_text[4096];
  strcpy(det_text, text_with(kBwdFacts, "backward", "backward 1\ndeterministic 1"));
  EXPECT(fa3rt_facts_parse(det_text, strlen(det_text), &det) == FA3RT_OK &&
         det.deterministic == 1 && det.backward == 1);
  EXPECT(fa3rt_facts_parse(kBwdFacts, strlen(kBwdFacts), &f) == FA3RT_OK && f.deterministic == 0);
  const char *t = text_with(kBwdFacts, "backward", "backward 1\ndeterministic 0");
  EXPECT(fa3rt_facts_parse(t, strlen(t), &f) == FA3RT_OK && f.deterministic == 0);
  t = text_with(kBwdFacts, "backward", "backward 1\ndeterministic 2");
  EXPECT(err_is(fa3rt_facts_parse(t, strlen(t), &f), FA3RT_ERR_FACTS,
                "deterministic: 2 is out of range (0 or 1)"));
  /* only a backward kernel is deterministic by this key */
  t = facts_with("grid", "grid tiles\ndeterministic 1");
  EXPECT(err_is(fa3rt_facts_parse(t, strlen(t), &f), FA3RT_ERR_FACTS,
                "facts of kernel 'fa3_fwd_d128_bf16_causal': deterministic 1 needs backward 1"));
  t = text_with(kDecFacts, "pack_gqa", "pack_gqa 1\ndeterministic 1");
  EXPECT(err_is(fa3rt_facts_parse(t, strlen(t), &f), FA3RT_ERR_FACTS,
                "deterministic 1 needs backward 1"));
  /* and so for facts a caller fills */
  EXPECT(fa3rt_facts_parse(kFacts, strlen(kFacts), &fwd) == FA3RT_OK);
  fwd.deterministic = 1;
  fa3rt_fwd_args fa = good_args();
  fa3rt_fwd_launch FL;
  EXPECT(err_is(fa3rt_fwd_plan(&fwd, &fa, &FL), FA3RT_ERR_INVALID_ARGUMENT,
                "deterministic 1 needs backward 1"));

  /* dq_accum: the tiles, then one u32 counter per tile rounded up to 4 */
  strcpy(plain64_text, text_with(kBwdFacts, "head_dim", "head_dim 64"));
  strcpy(plain64_text, text_with(plain64_text, "head_dim_v", "head_dim_v 64"));
  strcpy(det64_text, text_with(plain64_text, "backward", "backward 1\ndeterministic 1"));
  fa3rt_facts plain64, det64, plain;
  EXPECT(fa3rt_facts_parse(plain64_text, strlen(plain64_text), &plain64) == FA3RT_OK);
  EXPECT(fa3rt_facts_parse(det64_text, strlen(det64_text), &det64) == FA3RT_OK &&
         det64.deterministic == 1 && det64.head_dim == 64);
  EXPECT(fa3rt_facts_parse(kBwdFacts, strlen(kBwdFacts), &plain) == FA3RT_OK);
  fa3rt_bwd_launch L;
  /* B 2, Hq 3, Sq 65: 12 tiles of 64 x 64 floats, 12 counters */
  fa3rt_bwd_args a = bwd_args_of(2, 3, 1, 65, 100, 64);
  EXPECT(fa3rt_bwd_plan(&plain64, &a, &L) == FA3RT_OK && L.dq_accum_words == 49152);
  EXPECT(fa3rt_bwd_plan(&det64, &a, &L) == FA3RT_OK && L.dq_accum_words == 49152 + 12);
  /* B 1, Hq 3, Sq 65: 6 counters, rounded up to 8 */
  a = bwd_args_of(1, 3, 3, 65, 100, 64);
  EXPECT(fa3rt_bwd_plan(&plain64, &a, &L) == FA3RT_OK && L.dq_accum_words == 24576);
  EXPECT(fa3rt_bwd_plan(&det64, &a, &L) == FA3RT_OK && L.dq_accum_words == 24576 + 8);
  /* B 1, Hq 1, Sq 1, D 128: one tile, its counter rounded up to 4 */
  a = bwd_args_of(1, 1, 1, 1, 1, 128);
  EXPECT(fa3rt_bwd_plan(&plain, &a, &L) == FA3RT_OK && L.dq_accum_words == 8192);
  EXPECT(fa3rt_bwd_plan(&det, &a, &L) == FA3RT_OK && L.dq_accum_words == 8196);
  /* good_bwd_args: B 2, Hq 8, Sq 1000 (16 tiles a head): 256 counters;
     the launch is otherwise the plain kernel's */
  a = good_bwd_args();
  fa3rt_bwd_launch P;
  EXPECT(fa3rt_bwd_plan(&plain, &a, &P) == FA3RT_OK);
  EXPECT(fa3rt_bwd_plan(&det, &a, &L) == FA3RT_OK &&
         L.dq_accum_words == 2ULL * 8 * 1024 * 128 + 256);
  EXPECT(L.grid[0] == P.grid[0] && L.block[0] == P.block[0] && L.aux_grid == P.aux_grid &&
         L.dynamic_smem == P.dynamic_smem);
  /* 2^35 rows: 2^29 counters past 2^42 floats */
  a.q = a.dout = a.o = a.dq = bshd(0x10000, 32768, 131072, 8, 128);
  a.k = a.v = a.dk = a.dv = bshd(0x20000, 32768, 700, 2, 128);
  EXPECT(fa3rt_bwd_plan(&det, &a, &L) == FA3RT_OK &&
         L.dq_accum_words == (1ULL << 42) + (1ULL << 29));
  /* a dq_accum whose plain size fits below 2^63 but not the counters */
  a = bwd_args_of(2, 3, 1, 65, 100, 64);
  a.dq_accum = (1ULL << 63) - 49152 * 4;
  EXPECT(fa3rt_bwd_plan(&plain64, &a, &L) == FA3RT_OK);
  EXPECT(err_is(fa3rt_bwd_plan(&det64, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "dq_accum pointer: 0x7ffffffffffd0000 is out of range (its 49164 floats"));
  /* empty: nothing; Skv 0: the helpers zero the counters too */
  a = bwd_args_of(2, 3, 1, 0, 100, 64);
  EXPECT(fa3rt_bwd_plan(&det64, &a, &L) == FA3RT_OK && L.empty && L.dq_accum_words == 0);
  a = bwd_args_of(2, 3, 1, 65, 0, 64);
  a.k.ptr = a.v.ptr = a.dk.ptr = a.dv.ptr = a.lse = 0;
  EXPECT(fa3rt_bwd_plan(&det64, &a, &L) == FA3RT_OK && L.zero_only &&
         L.dq_accum_words == 49152 + 12);
}

/* Split-KV decoding (facts split_kv / pack_gqa): the keys, their rules, the
   heuristic, and what fa3rt_fwd_plan resolves. */
static void test_decode_facts(void) {
  fa3rt_facts f;
  EXPECT(fa3rt_facts_parse(kDecFacts, strlen(kDecFacts), &f) == FA3RT_OK);
  EXPECT(f.split_kv == 1 && f.pack_gqa == 1 && !f.persistent && f.cluster_m == 1 && !f.varlen);
  EXPECT(fa3rt_facts_parse(kFacts, strlen(kFacts), &f) == FA3RT_OK && !f.split_kv &&
         !f.pack_gqa); /* optional keys, absent */
  const char *t = text_with(kDecFacts, "pack_gqa", NULL); /* split alone */
  EXPECT(fa3rt_facts_parse(t, strlen(t), &f) == FA3RT_OK && f.split_kv && !f.pack_gqa);
  t = text_with(kDecFacts, "split_kv", "split_kv 0"); /* packing alone */
  EXPECT(fa3rt_facts_parse(t, strlen(t), &f) == FA3RT_OK && !f.split_kv && f.pack_gqa);
#define DEC_ERR(key, line, sub)                                                    \
  do {                                                                           \
    t = text_with(kDecFacts, key, line);                                         \
    EXPECT(err_is(fa3rt_facts_parse(t, strlen(t), &f), FA3RT_ERR_FACTS, sub));   \
  } while (0)
  DEC_ERR("split_kv", "split_kv 2", "facts line 19: split_kv: 2 is out of range (0 or 1)");
  DEC_ERR("pack_gqa", "pack_gqa -1", "pack_gqa: -1 is out of range (0 or 1)");
  DEC_ERR("pack_gqa", "pack_gqa yes", "pack_gqa: 'yes' is not an integer (0 or 1)");
  DEC_ERR("split_kv", "split_kv 1\nsplit_kv 1", "duplicate key 'split_kv'");
  DEC_ERR("grid", "grid persistent",
          "facts of kernel 'fa3_fwd_d128_bf16_decode_kernel': split_kv 1 needs grid tiles (a "
          "decoding kernel runs one CTA per tile and split over fixed-length batches)");
  DEC_ERR("cluster_m", "cluster_m 2", "split_kv 1 needs cluster_m 1");
  DEC_ERR("varlen", "varlen 1", "split_kv 1 needs varlen 0");
#undef DEC_ERR
  char buf[4096];
  strcpy(buf, text_with(kDecFacts, "split_kv", "split_kv 0"));
  t = text_with(buf, "grid", "grid persistent");
  EXPECT(err_is(fa3rt_facts_parse(t, strlen(t), &f), FA3RT_ERR_FACTS,
                "pack_gqa 1 needs grid tiles"));
  strcpy(buf, text_with(kBwdFacts, "backward", "backward 1\nsplit_kv 1"));
  EXPECT(err_is(fa3rt_facts_parse(buf, strlen(buf), &f), FA3RT_ERR_FACTS,
                "facts of kernel 'fa3_bwd_d128_bf16_causal_kernel': split_kv 1 needs backward 0"));
  strcpy(buf, text_with(kBwdFacts, "backward", "backward 1\npack_gqa 1"));
  EXPECT(err_is(fa3rt_facts_parse(buf, strlen(buf), &f), FA3RT_ERR_FACTS,
                "pack_gqa 1 needs backward 0"));
  /* a caller's struct is checked alike */
  EXPECT(fa3rt_facts_parse(kDecFacts, strlen(kDecFacts), &f) == FA3RT_OK);
  fa3rt_fwd_args a;
  memset(&a, 0, sizeof a);
  a.dtype = FA3RT_BF16;
  fa3rt_fwd_launch L;
  fa3rt_facts g = f;
  g.split_kv = 2;
  EXPECT(err_is(fa3rt_fwd_plan(&g, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "facts.split_kv: 2 is out of range (0 or 1)"));
  g = f;
  g.persistent = 1;
  EXPECT(err_is(fa3rt_fwd_plan(&g, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "split_kv 1 needs grid tiles"));
  g = f;
  g.split_kv = 0;
  g.varlen = 1;
  EXPECT(err_is(fa3rt_fwd_plan(&g, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "pack_gqa 1 needs varlen 0"));
}

static void test_split_heuristic(void) {
  /* B = 1, Hkv = 8 packed (one m-block a kv head): 8 tiles; a 128k cache
     at block_n 128: 1024 kv blocks; 132 SMs. Within a wave the efficiency
     is 8s / 132; 33, 66 and 99 (whole waves) give a split the blocks of
     32, 65 and 98 and do not count: the best counted is 0.99 (s = 49),
     and 14 (0.848) is the first within 85% of it */
  EXPECT(fa3rt_num_splits_heuristic(8, 1024, 132) == 16);
  EXPECT(fa3rt_num_splits_heuristic(8, 1024, 108) == 13);
  EXPECT(fa3rt_num_splits_heuristic(32, 1024, 132) == 4);  /* unpacked: Hq = 32 tiles */
  EXPECT(fa3rt_num_splits_heuristic(1, 1024, 132) == 128);
  EXPECT(fa3rt_num_splits_heuristic(48, 100, 108) == 9);   /* 432 CTAs: 4 whole waves (85 %: 2) */
  EXPECT(fa3rt_num_splits_heuristic(16, 8, 132) == 8);     /* at most a split a kv block */
  /* tiles >= 0.8 * SMs: one split */
  EXPECT(fa3rt_num_splits_heuristic(106, 1024, 132) == 1);
  EXPECT(fa3rt_num_splits_heuristic(105, 1024, 132) == 5);
  EXPECT(fa3rt_num_splits_heuristic(128, 1024, 132) == 1);
  /* nothing to split, and any argument below 1 */
  EXPECT(fa3rt_num_splits_heuristic(8, 1, 132) == 1);
  EXPECT(fa3rt_num_splits_heuristic(0, 1024, 132) == 1);
  EXPECT(fa3rt_num_splits_heuristic(8, 0, 132) == 1);
  EXPECT(fa3rt_num_splits_heuristic(8, 1024, 0) == 1);
  EXPECT(fa3rt_num_splits_heuristic(-8, -1, -132) == 1);
  EXPECT(fa3rt_num_splits_heuristic(INT64_MIN, INT64_MIN, INT32_MIN) == 1);
  /* the extremes: no overflow (UBSan), at most FA3RT_MAX_SPLITS */
  EXPECT(fa3rt_num_splits_heuristic(INT64_MAX, INT64_MAX, INT32_MAX) == 1);
  EXPECT(fa3rt_num_splits_heuristic(1, INT64_MAX, INT32_MAX) == 122);
  for (int s = 1; s <= 300; s += 7)
    for (int n = 1; n <= 3000; n += 97) {
      int32_t r = fa3rt_num_splits_heuristic(s, n, 132);
      EXPECT(r >= 1 && r <= FA3RT_MAX_SPLITS && r <= n);
    }
}

/* A decoding launch [B, Sq, Hq / Hkv, D 128]: q, o BSHD, k, v a cache. */
static fa3rt_fwd_args dec_args(long B, long Sq, long Hq, long Hkv, long Skv) {
  fa3rt_fwd_args a;
  memset(&a, 0, sizeof a);
  a.dtype = FA3RT_BF16;
  a.q = bshd(0x100000, B, Sq, Hq, 128);
  a.k = bshd(0x200000, B, Skv, Hkv, 128);
  a.v = bshd(0x300000, B, Skv, Hkv, 128);
  a.o = bshd(0x400000, B, Sq, Hq, 128);
  a.lse = 0x500000;
  a.softmax_scale = NAN;
  return a;
}

static void test_decode_plan(void) {
  fa3rt_facts f;
  EXPECT(fa3rt_facts_parse(kDecFacts, strlen(kDecFacts), &f) == FA3RT_OK);
  fa3rt_fwd_launch L;
  /* B 1, Hq 32 over Hkv 8 (g 4), one query, 128k keys: 8 packed tiles, the
     heuristic's 16 splits at the default 132 SMs; the workspace is not
     needed to plan */
  fa3rt_fwd_args a = dec_args(1, 1, 32, 8, 131072);
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK);
  EXPECT(L.num_splits == 16 && L.pack_group == 4 && L.grid[0] == 8 * 16 && L.grid[1] == 1 &&
         L.block[0] == 256 && L.dynamic_smem == 100000 && !L.empty && !L.fill_only);
  EXPECT(L.o_accum_bytes == 16ULL * 1 * 32 * 1 * 128 * 4 && L.lse_accum_bytes == 16ULL * 32 * 4);
  /* the merge: 32 rows * 128 / 4 threads = 4 blocks of 256 */
  EXPECT(L.combine_grid == 4 && L.combine_block == 256);
  a.num_sms = 108; /* the caller's SM count */
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.num_splits == 13 && L.grid[0] == 8 * 13);
  a.num_sms = 0;
  a.num_splits = 3; /* the caller's split count */
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.num_splits == 3 && L.grid[0] == 8 * 3 &&
         L.o_accum_bytes == 3ULL * 32 * 128 * 4 && L.lse_accum_bytes == 3ULL * 32 * 4);
  a.num_splits = 128;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.num_splits == 128);
  a.num_splits = 1; /* one split: the kernel stores o and lse, no workspace, no merge */
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.num_splits == 1 && L.grid[0] == 8 &&
         L.o_accum_bytes == 0 && L.lse_accum_bytes == 0 && L.combine_grid == 0 &&
         L.combine_block == 0 && L.pack_group == 4);
  a.o_accum = 0x600004; /* ignored where there is no split */
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK);
  /* a given workspace is checked */
  a = dec_args(1, 1, 32, 8, 131072);
  a.o_accum = 0x600000;
  a.lse_accum = 0x700000;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.num_splits == 16);
#define BAD_DEC(mutate, sub)                                                      \
  do {                                                                            \
    a = dec_args(1, 1, 32, 8, 131072);                                            \
    mutate;                                                                       \
    EXPECT(err_is(fa3rt_fwd_plan(&f, &a, &L), FA3RT_ERR_INVALID_ARGUMENT, sub));   \
  } while (0)
  BAD_DEC(a.o_accum = 0x600008, "o_accum pointer 0x600008 is not 16-byte aligned");
  BAD_DEC(a.lse_accum = 0x700004, "lse_accum pointer 0x700004 is not 16-byte aligned");
  BAD_DEC(a.o_accum = (1ULL << 63) - 4096,
          "o_accum pointer: 0x7ffffffffffff000 is out of range (its 65536 floats");
  BAD_DEC(a.lse_accum = (uint64_t)-16, "lse_accum pointer: 0xfffffffffffffff0 is out of range");
  BAD_DEC(a.num_splits = 129, "num_splits: 129 is out of range (0: the heuristic, else 1 to 128)");
  BAD_DEC(a.num_splits = -1, "num_splits: -1 is out of range");
  BAD_DEC(a.num_sms = -1, "num_sms: -1 is out of range (0: the device's SMs, else 1 to 2^31-1)");
  /* GQA packing needs g | block_m: 48 q heads over 1 kv head at block_m 64 */
  BAD_DEC((a.q = bshd(0x100000, 1, 1, 48, 128), a.o = bshd(0x400000, 1, 1, 48, 128),
           a.k = bshd(0x200000, 1, 131072, 1, 128), a.v = bshd(0x300000, 1, 131072, 1, 128)),
          "kernel fa3_fwd_d128_bf16_decode_kernel packs the q heads of each kv head into its "
          "tiles (facts pack_gqa 1): g = Hq / Hkv = 48 / 1 = 48 must divide block_m 64");
  /* CTAs = tiles * splits at most 2^31-1 */
  BAD_DEC((a.q = bshd(0x100000, 200000000, 1, 32, 128), a.o = bshd(0x400000, 200000000, 1, 32, 128),
           a.k = bshd(0x200000, 200000000, 128, 8, 128),
           a.v = bshd(0x300000, 200000000, 128, 8, 128), a.num_splits = 2),
          "tiles: 1600000000 tiles * 2 kv splits (num_splits) is out of range (at most 2^31-1");
  BAD_DEC((a.q = bshd(0x100000, 300000000, 1, 32, 128), a.o = bshd(0x400000, 300000000, 1, 32, 128),
           a.k = bshd(0x200000, 300000000, 128, 8, 128),
           a.v = bshd(0x300000, 300000000, 128, 8, 128)),
          "tiles: 1 m-blocks of 64 rows * Hkv 8 * B 300000000 is out of range");
  /* packed rows Sq * g counted in i32 by the kernel: 3 * 2^24 queries of
     64 q heads over one kv head (q itself below TMA's 2^40 bytes) */
  BAD_DEC((a.q = bshd(0x100000, 1, 3 << 24, 64, 128), a.o = bshd(0x400000, 1, 3 << 24, 64, 128),
           a.k = bshd(0x200000, 1, 128, 1, 128), a.v = bshd(0x300000, 1, 128, 1, 128)),
          "Sq 50331648 * g 64 = 3221225472 packed rows is out of range (at most 2^31 - "
          "block_m 64");
#undef BAD_DEC
  /* 64 q heads over 1 (MQA): g = 64 = block_m, a box of one query of every
     head; 1000 queries are 1000 m-blocks */
  a = dec_args(2, 1000, 64, 1, 4096);
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.pack_group == 64 && L.num_splits == 1 &&
         L.grid[0] == 1000 * 1 * 2); /* 2000 tiles fill 132 SMs */
  /* 4 queries (speculative decoding) of g 4: 16 packed rows, one m-block */
  a = dec_args(1, 4, 32, 8, 131072);
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.num_splits == 16 && L.grid[0] == 8 * 16 &&
         L.o_accum_bytes == 16ULL * 32 * 4 * 128 * 4 && L.combine_grid == 16);
  /* a full batch: B 16 x 8 kv heads = 128 tiles, one split */
  a = dec_args(16, 1, 32, 8, 131072);
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.num_splits == 1 && L.grid[0] == 128 &&
         L.o_accum_bytes == 0 && L.combine_grid == 0);
  /* without packing: ceil(1 / 64) * Hq 32 = 32 tiles, 4 splits */
  fa3rt_facts nopack = f;
  nopack.pack_gqa = 0;
  a = dec_args(1, 1, 32, 8, 131072);
  EXPECT(fa3rt_fwd_plan(&nopack, &a, &L) == FA3RT_OK && L.pack_group == 1 &&
         L.num_splits == 4 && L.grid[0] == 32 * 4);
  /* packing without splits: num_splits 0 is 1 split */
  fa3rt_facts pack_only = f;
  pack_only.split_kv = 0;
  EXPECT(fa3rt_fwd_plan(&pack_only, &a, &L) == FA3RT_OK && L.pack_group == 4 &&
         L.num_splits == 1 && L.grid[0] == 8 && L.o_accum_bytes == 0);
  a.num_splits = 2;
  EXPECT(err_is(fa3rt_fwd_plan(&pack_only, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "kernel fa3_fwd_d128_bf16_decode_kernel does not split the kv sequence (facts "
                "split_kv 0): num_splits must be 0 or 1, got 2"));
  /* no keys: o = 0 and lse = -inf without a kernel (no workspace, no merge);
     empty problems: nothing */
  a = dec_args(1, 1, 32, 8, 0);
  a.k.ptr = a.v.ptr = 0;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.fill_only && L.num_splits == 1 &&
         L.o_accum_bytes == 0 && L.combine_grid == 0);
  a.num_splits = 4;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.fill_only && L.num_splits == 4 &&
         L.o_accum_bytes == 0 && L.combine_grid == 0);
  a = dec_args(0, 1, 32, 8, 4096);
  a.num_splits = 4;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.empty && L.grid[0] == 0 &&
         L.o_accum_bytes == 0);
  a = dec_args(1, 0, 32, 8, 4096);
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.empty);
  a = dec_args(1, 1, 0, 8, 4096);
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.empty && L.pack_group == 1);

  /* seqused_k (FlashAttention's cache_seqlens): int32 [B] on the device,
     4-byte aligned like varlen's, alone of the varlen fields; the split
     count still comes from Skv (the capacity) */
  a = dec_args(3, 1, 32, 8, 131072);
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK);
  const int32_t splits_without = L.num_splits;
  a.seqused_k = 0x800000;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.num_splits == splits_without &&
         L.grid[0] == 3 * 8 * (unsigned)splits_without);
  a.seqused_k = 0x800004; /* 4 bytes suffice */
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK);
  a.seqused_k = (1ULL << 63) - 16; /* its 3 int32 below 2^63, as varlen's arrays */
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK);
  a.num_splits = 1;
  a.seqused_k = 0x800000;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.num_splits == 1);
#define BAD_USED(mutate, sub)                                                     \
  do {                                                                            \
    a = dec_args(3, 1, 32, 8, 131072);                                            \
    a.seqused_k = 0x800000;                                                       \
    mutate;                                                                       \
    EXPECT(err_is(fa3rt_fwd_plan(&f, &a, &L), FA3RT_ERR_INVALID_ARGUMENT, sub));   \
  } while (0)
  BAD_USED(a.seqused_k = 0x800002, "seqused_k pointer 0x800002 is not a 4-byte aligned device "
           "address of 3 int32 (one per batch) below 2^63");
  BAD_USED(a.seqused_k = (1ULL << 63) - 12, "seqused_k pointer 0x7ffffffffffffff4 is not a "
           "4-byte aligned device address of 3 int32");
  BAD_USED(a.seqused_k = (uint64_t)-4, "seqused_k pointer 0xfffffffffffffffc");
  /* the packed batch's other fields stay refused */
  BAD_USED(a.cu_seqlens_k = 0x900000,
           "kernel fa3_fwd_d128_bf16_decode_kernel takes fixed-length batches (facts varlen 0) "
           "but cu_seqlens_q/k, varlen_batch or max_seqlen_q is set: use a varlen kernel (a "
           "decoding kernel takes seqused_k alone: each batch's valid keys of its cache)");
  BAD_USED(a.cu_seqlens_q = 0x900000, "cu_seqlens_q/k, varlen_batch or max_seqlen_q is set");
  BAD_USED(a.varlen_batch = 3, "cu_seqlens_q/k, varlen_batch or max_seqlen_q is set");
  BAD_USED(a.max_seqlen_q = 1, "cu_seqlens_q/k, varlen_batch or max_seqlen_q is set");
  BAD_USED((a.seqused_k = 0, a.max_seqlen_q = 1), "use a varlen kernel (a decoding kernel");
#undef BAD_USED
  /* no keys: the fill stays (every seqused_k[b] is 0 by contract); empty:
     nothing, its pointer unchecked */
  a = dec_args(3, 1, 32, 8, 0);
  a.k.ptr = a.v.ptr = 0;
  a.seqused_k = 0x800000;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.fill_only && L.o_accum_bytes == 0);
  a = dec_args(0, 1, 32, 8, 4096);
  a.seqused_k = 0x800000;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.empty);
  /* a kernel that packs but does not split takes no seqused_k */
  a = dec_args(3, 1, 32, 8, 4096);
  a.seqused_k = 0x800000;
  EXPECT(err_is(fa3rt_fwd_plan(&pack_only, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "but seqused_k is set: use a varlen kernel, or a decoding kernel (facts "
                "split_kv 1: fa3-compile --decode)"));

  /* kernels without split_kv: num_splits 0 or 1, one split, no group */
  fa3rt_facts fwd;
  EXPECT(fa3rt_facts_parse(kFacts, strlen(kFacts), &fwd) == FA3RT_OK);
  a = good_args();
  EXPECT(fa3rt_fwd_plan(&fwd, &a, &L) == FA3RT_OK && L.num_splits == 1 && L.pack_group == 1 &&
         L.o_accum_bytes == 0 && L.lse_accum_bytes == 0 && L.combine_grid == 0);
  a.num_splits = 1;
  EXPECT(fa3rt_fwd_plan(&fwd, &a, &L) == FA3RT_OK && L.num_splits == 1);
  a.num_splits = 4;
  EXPECT(err_is(fa3rt_fwd_plan(&fwd, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "kernel fa3_fwd_d128_bf16_causal does not split the kv sequence (facts split_kv "
                "0): num_splits must be 0 or 1, got 4 (split-KV decoding needs a decoding "
                "kernel: fa3-compile --decode, Fa3AttentionSpec.decode)"));
  a.num_splits = -3;
  EXPECT(err_is(fa3rt_fwd_plan(&fwd, &a, &L), FA3RT_ERR_INVALID_ARGUMENT, "got -3"));
  a.num_splits = 0;
  a.num_sms = INT32_MIN;
  EXPECT(err_is(fa3rt_fwd_plan(&fwd, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "num_sms: -2147483648 is out of range"));
  /* nor seqused_k, nor the packed batch's fields */
  a = good_args();
  a.seqused_k = 0x800000;
  EXPECT(err_is(fa3rt_fwd_plan(&fwd, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "kernel fa3_fwd_d128_bf16_causal takes fixed-length batches (facts varlen 0) but "
                "seqused_k is set: use a varlen kernel, or a decoding kernel"));
  a = good_args();
  a.cu_seqlens_q = 0x800000;
  EXPECT(err_is(fa3rt_fwd_plan(&fwd, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "but cu_seqlens_q/k, seqused_k, varlen_batch or max_seqlen_q is set: use a "
                "varlen kernel"));
}

/* A paged KV cache (FlashAttention's page_table): k and v are the page
   pool, [num_pages, page_size, Hkv, D] stored, [num_pages, Hkv, page_size,
   D] logical; the logical Skv is paged_seqlen_k or page_table_stride *
   page_size. */
static fa3rt_fwd_args paged_args(long B, long Hq, long Hkv, long pages, long ps, long stride) {
  fa3rt_fwd_args a = dec_args(B, 1, Hq, Hkv, 1);
  a.k = bshd(0x200000, pages, ps, Hkv, 128);
  a.v = bshd(0x300000, pages, ps, Hkv, 128);
  a.page_table = 0x900000;
  a.page_table_stride = (int32_t)stride;
  return a;
}

/* A paged packed batch (facts `paged_kv 1`, fa3-compile --varlen --paged:
   flash_attn_with_kvcache's cu_seqlens_q with a page table): q and o the
   packed [1, Hq, Tq, D], k and v the page pool, the table's varlen_batch
   rows of pages one list of packed rows. */
/* A copy of text_with's result, which its next call overwrites. */
static char *copied(const char *text) {
  char *c = malloc(strlen(text) + 1);
  if (c) strcpy(c, text);
  return c;
}

static char *paged_varlen_facts(void) {
  char *t = copied(text_with(kDecFacts, "varlen", "varlen 1"));
  char *u = copied(text_with(t, "split_kv", "split_kv 0"));
  char *w = copied(text_with(u, "pack_gqa", "paged_kv 1"));
  free(t);
  free(u);
  return w;
}

static fa3rt_fwd_args paged_varlen_args(long seqs, long Tq, long pages, long ps, long stride) {
  fa3rt_fwd_args a = dec_args(1, Tq, 32, 8, 1);
  a.k = bshd(0x200000, pages, ps, 8, 128);
  a.v = bshd(0x300000, pages, ps, 8, 128);
  a.cu_seqlens_q = 0x600000;
  a.cu_seqlens_k = 0x700000;
  a.seqused_k = 0x800000;
  a.varlen_batch = (int32_t)seqs;
  a.max_seqlen_q = (int32_t)Tq;
  a.page_table = 0x900000;
  a.page_table_stride = (int32_t)stride;
  return a;
}

static void test_paged_varlen_plan(void) {
  char *text = paged_varlen_facts();
  fa3rt_facts f;
  EXPECT(fa3rt_facts_parse(text, strlen(text), &f) == FA3RT_OK && f.paged_kv == 1 &&
         f.varlen == 1 && !f.split_kv && !f.pack_gqa);
  fa3rt_fwd_launch L;
  /* 3 sequences of 4 pages of 64 rows a row of the table: the packed rows
     are the table's 12 pages, 768 rows (the launch's Skv) */
  fa3rt_fwd_args a = paged_varlen_args(3, 300, 20, 64, 4);
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.B == 3 && L.Skv == 768 &&
         L.page_size == 64 && L.kv_box_rows == 64 && L.num_splits == 1);
  /* pages larger than the blocks: a box of block_n rows; without
     seqused_k the sequences' keys are cu_seqlens_k's */
  a = paged_varlen_args(2, 50, 5, 256, 2);
  a.seqused_k = 0;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.Skv == 1024 && L.page_size == 256 &&
         L.kv_box_rows == 128);
  /* without a table: the plain packed batch */
  a = paged_varlen_args(3, 300, 20, 64, 4);
  a.page_table = 0, a.page_table_stride = 0;
  a.k = bshd(0x200000, 1, 500, 8, 128);
  a.v = bshd(0x300000, 1, 500, 8, 128);
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.Skv == 500 && L.page_size == 0);
  /* the table's rows counted in i32; paged_seqlen_k is a decoding
     kernel's */
  a = paged_varlen_args(1024, 300, 20, 256, 8192);
  EXPECT(err_is(fa3rt_fwd_plan(&f, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "varlen_batch 1024 * page_table_stride 8192 * page_size 256 rows of pages is "
                "out of range (at most 2^31-1: the kernel's i32 row index)"));
  a = paged_varlen_args(3, 300, 20, 64, 4);
  a.paged_seqlen_k = 100;
  EXPECT(err_is(fa3rt_fwd_plan(&f, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "paged_seqlen_k: 100 must be 0 for a packed batch"));
  /* q and o stay packed; a page size the blocks cannot load whole */
  a = paged_varlen_args(3, 300, 20, 64, 4);
  a.q = bshd(0x100000, 2, 150, 32, 128);
  EXPECT(err_is(fa3rt_fwd_plan(&f, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "q.shape[0] is 2; a packed batch's tensors are [1, H, T, D]"));
  a = paged_varlen_args(3, 300, 20, 24, 4);
  EXPECT(err_is(fa3rt_fwd_plan(&f, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "page size 24 (k.shape[2]"));
  /* a left pad and appending stay the decoding kernel's */
  a = paged_varlen_args(3, 300, 20, 64, 4);
  a.leftpad_k = 0xa00000;
  EXPECT(err_is(fa3rt_fwd_plan(&f, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "takes no leftpad_k (facts split_kv 0)"));
  /* a varlen kernel without paged_kv takes no table, naming the one that does */
  char *plain = copied(text_with(text, "paged_kv", "pack_gqa 0"));
  fa3rt_facts g;
  EXPECT(fa3rt_facts_parse(plain, strlen(plain), &g) == FA3RT_OK && !g.paged_kv);
  a = paged_varlen_args(3, 300, 20, 64, 4);
  EXPECT(err_is(fa3rt_fwd_plan(&g, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "takes no page table (facts split_kv 0, paged_kv 0): a paged KV cache needs a "
                "decoding kernel (facts split_kv 1: fa3-compile --decode, "
                "Fa3AttentionSpec.decode) or, for a packed batch, a paged varlen kernel (facts "
                "paged_kv 1: fa3-compile --varlen --paged, Fa3AttentionSpec.pagedKv)"));
  /* paged_kv's facts: a varlen kernel of one CTA per tile */
  const char *bad = text_with(text, "varlen", "varlen 0");
  EXPECT(err_is(fa3rt_facts_parse(bad, strlen(bad), &g), FA3RT_ERR_FACTS,
                "paged_kv 1 needs varlen 1"));
  bad = text_with(text, "grid", "grid persistent");
  EXPECT(err_is(fa3rt_facts_parse(bad, strlen(bad), &g), FA3RT_ERR_FACTS,
                "paged_kv 1 needs grid tiles"));
  free(plain);
  free(text);
}

static void test_paged_plan(void) {
  fa3rt_facts f;
  EXPECT(fa3rt_facts_parse(kDecFacts, strlen(kDecFacts), &f) == FA3RT_OK);
  fa3rt_fwd_launch L;
  /* a contiguous cache: no page size, K/V boxes of block_n rows */
  fa3rt_fwd_args a = dec_args(1, 1, 32, 8, 131072);
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.page_size == 0 && L.kv_box_rows == 128);
  /* 1024 pages of 128 rows, 1024 a row of the table: the logical Skv is
     128k, as the contiguous 128k cache's: the heuristic's 16 splits */
  a = paged_args(1, 32, 8, 1024, 128, 1024);
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.Skv == 131072 && L.num_splits == 16 &&
         L.grid[0] == 8 * 16 && L.page_size == 128 && L.kv_box_rows == 128 && L.B == 1 &&
         L.Hkv == 8 && L.o_accum_bytes == 16ULL * 32 * 128 * 4);
  /* the pool's pages are not q's batches: 3 pages for 5 batches (the
     entries are the caller's contract, never read here) */
  a = paged_args(5, 32, 8, 3, 64, 2);
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.B == 5 && L.Skv == 128 &&
         L.page_size == 64 && L.kv_box_rows == 64);
  /* every page size a multiple of 8 that divides block_n 128 or that it
     divides: a box of min(page_size, block_n) rows */
  const long sizes[] = {8, 16, 32, 64, 128, 256, 384, 512, 1024};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    const long ps = sizes[i];
    a = paged_args(2, 32, 8, 40, ps, (12288 + ps - 1) / ps);
    EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.page_size == ps &&
           L.kv_box_rows == (ps < 128 ? ps : 128) && L.Skv == (12288 + ps - 1) / ps * ps);
  }
  /* paged_seqlen_k: the logical length below the table's capacity (its
     kv blocks size the splits) */
  a = paged_args(1, 32, 8, 64, 16, 64);
  a.paged_seqlen_k = 1000;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.Skv == 1000 && L.kv_box_rows == 16 &&
         L.num_splits == fa3rt_num_splits_heuristic(8, 8, 132));
  a.paged_seqlen_k = 1024;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.Skv == 1024);
  a.paged_seqlen_k = 1;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.Skv == 1);
  /* a table row past 2^31 keys needs the logical length */
  a = paged_args(1, 32, 8, 64, 256, 1L << 24);
  EXPECT(err_is(fa3rt_fwd_plan(&f, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "page_table_stride 16777216 * page_size 256 = 4294967296 keys is out of range "
                "(the kernel's Skv is at most 2^31-1): set paged_seqlen_k"));
  a.paged_seqlen_k = 1 << 20;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.Skv == 1 << 20);
  a.paged_seqlen_k = INT32_MAX;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.Skv == INT32_MAX);
  /* with seqused_k (cache_seqlens), the splits still from the logical Skv */
  a = paged_args(3, 32, 8, 100, 64, 64);
  a.seqused_k = 0x800000;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.Skv == 4096 &&
         L.num_splits == fa3rt_num_splits_heuristic(24, 32, 132));
  a.num_splits = 3;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.num_splits == 3 && L.grid[0] == 24 * 3);
  /* the table's B * stride int32 up to 2^63 */
  a = paged_args(2, 32, 8, 100, 64, 32);
  a.page_table = (1ULL << 63) - 256;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK);
  /* the empty problems: nothing (the table is still checked) */
  a = paged_args(0, 32, 8, 100, 64, 32);
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.empty && L.grid[0] == 0);
#define BAD_PAGED(mutate, sub)                                                    \
  do {                                                                            \
    a = paged_args(2, 32, 8, 100, 64, 32);                                        \
    mutate;                                                                       \
    EXPECT(err_is(fa3rt_fwd_plan(&f, &a, &L), FA3RT_ERR_INVALID_ARGUMENT, sub));   \
  } while (0)
  /* page sizes the kernel's blocks cannot load whole */
  BAD_PAGED((a.k = bshd(0x200000, 100, 24, 8, 128), a.v = bshd(0x300000, 100, 24, 8, 128)),
            "page size 24 (k.shape[2]: the rows of a page of the pool [num_pages, Hkv, "
            "page_size, D]) must divide block_n 128 or be a multiple of it: kernel "
            "fa3_fwd_d128_bf16_decode_kernel loads each block of 128 keys as pages of "
            "min(page_size, 128) rows");
  BAD_PAGED((a.k = bshd(0x200000, 100, 12, 8, 128), a.v = bshd(0x300000, 100, 12, 8, 128)),
            "page size 12 (k.shape[2]");
  BAD_PAGED((a.k = bshd(0x200000, 100, 3, 8, 128), a.v = bshd(0x300000, 100, 3, 8, 128)),
            "page size 3 (k.shape[2]");
  /* pages of fewer than 8 rows: boxes of 1, 2 or 4 rows */
  for (int ps = 1; ps <= 4; ps *= 2) {
    a = paged_args(2, 32, 8, 100, ps, 32);
    EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.kv_box_rows == ps);
  }
  BAD_PAGED((a.k = bshd(0x200000, 100, 192, 8, 128), a.v = bshd(0x300000, 100, 192, 8, 128)),
            "page size 192 (k.shape[2]");
  BAD_PAGED((a.k = bshd(0x200000, 100, 0, 8, 128), a.v = bshd(0x300000, 100, 0, 8, 128)),
            "page size 0 (k.shape[2]");
  BAD_PAGED((a.k = bshd(0x200000, 0, 64, 8, 128), a.v = bshd(0x300000, 0, 64, 8, 128)),
            "k and v have no pages (k.shape[0] = 0)");
  BAD_PAGED(a.v = bshd(0x300000, 99, 64, 8, 128),
            "k and v page pools differ: k has 100 pages of 64 rows and Hkv=8; v has 99 pages "
            "of 64 rows and Hkv=8");
  BAD_PAGED(a.v = bshd(0x300000, 100, 32, 8, 128), "k and v page pools differ");
  BAD_PAGED((a.k = bshd(0x200000, 100, 64, 3, 128), a.v = bshd(0x300000, 100, 64, 3, 128)),
            "Hq = 32 is not a multiple of Hkv = 3");
  BAD_PAGED(a.page_table_stride = 0,
            "page_table_stride: 0 is out of range (1 to 2^31-1: the entries from one batch's "
            "row of the page table to the next)");
  BAD_PAGED(a.page_table_stride = -5, "page_table_stride: -5 is out of range");
  BAD_PAGED(a.paged_seqlen_k = 2049,
            "paged_seqlen_k: 2049 is out of range (0: page_table_stride 32 * page_size 64; "
            "else 1 to that and to 2^31-1");
  BAD_PAGED(a.paged_seqlen_k = -1, "paged_seqlen_k: -1 is out of range");
  BAD_PAGED(a.page_table = 0x900002,
            "page_table pointer 0x900002 is not a 4-byte aligned device address of B 2 * "
            "page_table_stride 32 int32 below 2^63");
  BAD_PAGED(a.page_table = (1ULL << 63) - 252, "page_table pointer 0x7fffffffffffff04 is not");
  BAD_PAGED(a.page_table = (uint64_t)-4, "page_table pointer 0xfffffffffffffffc is not");
  /* the fields without a table */
  BAD_PAGED((a.page_table = 0, a.k = bshd(0x200000, 2, 64, 8, 128),
             a.v = bshd(0x300000, 2, 64, 8, 128)),
            "page_table_stride 32 and paged_seqlen_k 0 must be 0 without a page_table (a "
            "contiguous cache: k and v are [B, Hkv, Skv, D])");
  BAD_PAGED((a.page_table = 0, a.page_table_stride = 0, a.paged_seqlen_k = 7,
             a.k = bshd(0x200000, 2, 64, 8, 128), a.v = bshd(0x300000, 2, 64, 8, 128)),
            "page_table_stride 0 and paged_seqlen_k 7 must be 0 without a page_table");
  /* without a table the pool is no cache: its pages must be q's batches */
  BAD_PAGED(a.page_table = a.page_table_stride = 0, "batch sizes differ: q 2, k 100, v 100");
#undef BAD_PAGED
  /* block_n 96 (a head-dim-192 causal kernel's): 32 and 96 divide it, it
     divides 192; 64 neither */
  fa3rt_facts f96 = f;
  f96.block_n = 96;
  a = paged_args(2, 32, 8, 100, 32, 32);
  EXPECT(fa3rt_fwd_plan(&f96, &a, &L) == FA3RT_OK && L.kv_box_rows == 32);
  a = paged_args(2, 32, 8, 100, 192, 32);
  EXPECT(fa3rt_fwd_plan(&f96, &a, &L) == FA3RT_OK && L.kv_box_rows == 96);
  a = paged_args(2, 32, 8, 100, 64, 32);
  EXPECT(err_is(fa3rt_fwd_plan(&f96, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "page size 64 (k.shape[2]: the rows of a page of the pool [num_pages, Hkv, "
                "page_size, D]) must divide block_n 96 or be a multiple of it"));
  /* block_n 64 (head dim 256): 128 and 256 a whole block each */
  fa3rt_facts f64 = f;
  f64.block_n = 64;
  a = paged_args(2, 32, 8, 100, 256, 32);
  EXPECT(fa3rt_fwd_plan(&f64, &a, &L) == FA3RT_OK && L.kv_box_rows == 64 && L.Skv == 8192);
  /* only split_kv kernels take a table */
  fa3rt_facts pack_only = f;
  pack_only.split_kv = 0;
  a = paged_args(2, 32, 8, 100, 64, 32);
  EXPECT(err_is(fa3rt_fwd_plan(&pack_only, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "kernel fa3_fwd_d128_bf16_decode_kernel takes no page table (facts split_kv 0, "
                "paged_kv 0): "
                "a paged KV cache needs a decoding kernel (facts split_kv 1: fa3-compile "
                "--decode, Fa3AttentionSpec.decode)"));
  fa3rt_facts fwd;
  EXPECT(fa3rt_facts_parse(kFacts, strlen(kFacts), &fwd) == FA3RT_OK);
  a = good_args();
  EXPECT(fa3rt_fwd_plan(&fwd, &a, &L) == FA3RT_OK && L.page_size == 0 && L.kv_box_rows == 128);
  a.page_table = 0x900000;
  a.page_table_stride = 8;
  EXPECT(err_is(fa3rt_fwd_plan(&fwd, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "kernel fa3_fwd_d128_bf16_causal takes no page table (facts split_kv 0, paged_kv 0)"));
  a = good_args();
  a.page_table_stride = 8;
  EXPECT(err_is(fa3rt_fwd_plan(&fwd, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "page_table_stride 8 and paged_seqlen_k 0 must be 0 without a page_table"));
}

/* Appending new keys and values to the cache (FlashAttention's
   flash_attn_with_kvcache(k=, v=)): k_new / v_new [B, Hkv, Snew, D],
   seqused_k (the rows before the append) and seqlens_out (the counts
   after it, the attention's), the append's grid. */
static fa3rt_fwd_args append_args(long B, long Snew) {
  fa3rt_fwd_args a = dec_args(B, 1, 32, 8, 4096);
  a.seqused_k = 0x800000;
  a.k_new = bshd(0xa00000, B, Snew, 8, 128);
  a.v_new = bshd(0xb00000, B, Snew, 8, 128);
  a.seqlens_out = 0xc00000;
  return a;
}

static void test_append_plan(void) {
  fa3rt_facts f;
  EXPECT(fa3rt_facts_parse(kDecFacts, strlen(kDecFacts), &f) == FA3RT_OK);
  fa3rt_fwd_launch L;
  /* no append: all zero */
  fa3rt_fwd_args a = dec_args(3, 1, 32, 8, 4096);
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.snew == 0 && L.append_grid == 0 &&
         L.append_block == 0);
  const int32_t splits = L.num_splits;
  /* one new row a batch: 3 * 1 * 8 rows of 128 / 8 = 16 chunks, 384
     threads: 2 blocks of 256; the attention is planned as before (its
     splits from the capacity Skv) */
  a = append_args(3, 1);
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.snew == 1 && L.append_grid == 2 &&
         L.append_block == 256 && L.num_splits == splits && L.Skv == 4096 && !L.empty);
  a = append_args(3, 5); /* 1920 chunks: 8 blocks */
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.snew == 5 && L.append_grid == 8);
  a = append_args(3, 4096); /* the whole capacity (seqused_k all 0 by contract) */
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.snew == 4096 &&
         L.append_grid == 3 * 4096 * 8 * 16 / 256);
  /* Snew 0: nothing appended, seqlens_out not needed */
  a = append_args(3, 0);
  a.seqlens_out = 0;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.snew == 0 && L.append_grid == 0);
  a = append_args(3, 0);
  a.k_new.ptr = a.v_new.ptr = 0; /* an empty tensor's pointer may be NULL */
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.append_grid == 0);
  /* any strides by the 16-byte rules: k_new in BHSD storage, v_new's rows
     padded to 136 elements */
  a = append_args(3, 5);
  a.k_new.strides[0] = 8 * 5 * 128;
  a.k_new.strides[1] = 5 * 128;
  a.k_new.strides[2] = 128;
  a.v_new.strides[2] = 8 * 136;
  a.v_new.strides[1] = 136;
  a.v_new.strides[0] = 5 * 8 * 136;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.append_grid == 8);
  /* Dv != D: the longer row sizes the grid */
  fa3rt_facts f64 = f;
  f64.head_dim_v = 64;
  a = append_args(3, 5);
  a.v = bshd(0x300000, 3, 4096, 8, 64);
  a.o = bshd(0x400000, 3, 1, 32, 64);
  a.v_new = bshd(0xb00000, 3, 5, 8, 64);
  EXPECT(fa3rt_fwd_plan(&f64, &a, &L) == FA3RT_OK && L.append_grid == 8);
  a.v_new = bshd(0xb00000, 3, 5, 8, 128);
  EXPECT(err_is(fa3rt_fwd_plan(&f64, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "v_new shape [B,H,S,D] = [3,8,5,128] but must be [3,8,5,64]"));
  /* no attention (Sq 0): the rows are still appended */
  a = append_args(3, 2);
  a.q = bshd(0x100000, 3, 0, 32, 128);
  a.o = bshd(0x400000, 3, 0, 32, 128);
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.empty && L.snew == 2 &&
         L.append_grid == 3 && L.grid[0] == 0); /* 768 chunks */
  /* B 0: nothing at all */
  a = append_args(0, 2);
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.empty && L.append_grid == 0);
  /* seqlens_out next to seqused_k (3 int32 from 0x800000), and below 2^63 */
  a = append_args(3, 1);
  a.seqlens_out = 0x80000c;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK);
  a.seqlens_out = 0x7ffff4;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK);
  a.seqlens_out = (1ULL << 63) - 16;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK);
  /* a paged cache: the pool's strides, the table's pages */
  a = paged_args(3, 32, 8, 100, 64, 32);
  a.seqused_k = 0x800000;
  a.k_new = bshd(0xa00000, 3, 5, 8, 128);
  a.v_new = bshd(0xb00000, 3, 5, 8, 128);
  a.seqlens_out = 0xc00000;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.snew == 5 && L.append_grid == 8 &&
         L.page_size == 64 && L.Skv == 2048);
  a.seqlens_out = 0x900000 + 3 * 32 * 4; /* just past the table */
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK);
  a.seqlens_out = 0x900000 + 3 * 32 * 4 - 4;
  EXPECT(err_is(fa3rt_fwd_plan(&f, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "seqlens_out (0x90017c, 3 int32) overlaps the page table (0x900000, B 3 * "
                "page_table_stride 32 int32), which the append reads while it writes "
                "seqlens_out"));
  a.seqlens_out = 0xc00000;
  a.k_new = bshd(0xa00000, 3, 2049, 8, 128);
  a.v_new = bshd(0xb00000, 3, 2049, 8, 128);
  EXPECT(err_is(fa3rt_fwd_plan(&f, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "k_new has Snew = 2049 rows a batch but the cache holds Skv = 2048 keys (its "
                "logical length): seqused_k[b] + Snew <= Skv is the caller's contract"));
#define BAD_APPEND(mutate, sub)                                                   \
  do {                                                                            \
    a = append_args(3, 5);                                                        \
    mutate;                                                                       \
    EXPECT(err_is(fa3rt_fwd_plan(&f, &a, &L), FA3RT_ERR_INVALID_ARGUMENT, sub));   \
  } while (0)
  BAD_APPEND(a.k_new.ptr = 0xa00008,
             "k_new pointer 0xa00008 is not 16-byte aligned (the cache append "
             "(<kernel>_append) copies its rows 16 bytes at a time)");
  BAD_APPEND(a.v_new.ptr = 0, "v_new pointer is NULL");
  BAD_APPEND(a.k_new.ptr = (uint64_t)-16, "k_new pointer: 0xfffffffffffffff0 is out of range");
  BAD_APPEND(a.k_new.strides[3] = 2,
             "k_new stride of the head dim (D) is 2 elements; it must be 1 (contiguous rows)");
  BAD_APPEND(a.v_new.strides[2] = 8 * 128 + 4,
             "v_new stride of dim S is 1028 elements = 2056 bytes; it must be a multiple of 16 "
             "bytes (16-byte aligned rows for the cache append (<kernel>_append))");
  BAD_APPEND(a.k_new.strides[1] = -128, "k_new.strides[1] (H): -128 is out of range");
  BAD_APPEND(a.k_new.shape[2] = -1, "k_new.shape[2] (S): -1 is out of range (0 to 2^31-1)");
  BAD_APPEND(a.k_new = bshd(0xa00000, 2, 5, 8, 128),
             "k_new shape [B,H,S,D] = [2,8,5,128] but must be [B, Hkv, Snew, D] = "
             "[3,8,Snew,128] (q's B, the cache's Hkv, the kernel's head_dim)");
  BAD_APPEND(a.k_new = bshd(0xa00000, 3, 5, 4, 128), "k_new shape [B,H,S,D] = [3,4,5,128]");
  BAD_APPEND(a.k_new = bshd(0xa00000, 3, 5, 8, 64), "k_new shape [B,H,S,D] = [3,8,5,64]");
  BAD_APPEND(a.v_new = bshd(0xb00000, 3, 4, 8, 128),
             "v_new shape [B,H,S,D] = [3,8,4,128] but must be [3,8,5,128]");
  BAD_APPEND(a.seqused_k = 0,
             "appending k_new and v_new needs seqused_k: each batch's rows before the "
             "append, where its new rows go (FlashAttention's cache_seqlens");
  BAD_APPEND((a.k_new = bshd(0xa00000, 3, 4097, 8, 128),
              a.v_new = bshd(0xb00000, 3, 4097, 8, 128)),
             "k_new has Snew = 4097 rows a batch but the cache holds Skv = 4096 keys");
  BAD_APPEND(a.seqlens_out = 0,
             "seqlens_out pointer is NULL: appending 5 rows a batch writes each batch's key "
             "count after the append, seqused_k[b] + Snew, into it");
  BAD_APPEND(a.seqlens_out = 0xc00002,
             "seqlens_out pointer 0xc00002 is not a 4-byte aligned device address of 3 int32 "
             "(one per batch) below 2^63");
  BAD_APPEND(a.seqlens_out = (1ULL << 63) - 8, "seqlens_out pointer 0x7ffffffffffffff8 is not");
  BAD_APPEND(a.seqlens_out = 0x800000,
             "seqlens_out (0x800000, 3 int32) overlaps seqused_k (0x800000): the append reads "
             "each batch's rows before it from seqused_k while it writes seqlens_out");
  BAD_APPEND(a.seqlens_out = 0x800008, "seqlens_out (0x800008, 3 int32) overlaps seqused_k");
  BAD_APPEND(a.seqlens_out = 0x7ffff8, "overlaps seqused_k");
  /* any field set asks for an append: seqlens_out alone has no k_new */
  BAD_APPEND((a.k_new = (fa3rt_tensor){0, {0, 0, 0, 0}, {0, 0, 0, 0}},
              a.v_new = a.k_new),
             "k_new shape [B,H,S,D] = [0,0,0,0] but must be [B, Hkv, Snew, D] = [3,8,Snew,128]");
  /* Skv 0 (no keys): nothing fits */
  BAD_APPEND((a.k = bshd(0, 3, 0, 8, 128), a.v = bshd(0, 3, 0, 8, 128)),
             "k_new has Snew = 5 rows a batch but the cache holds Skv = 0 keys");
#undef BAD_APPEND
  /* kernels without split_kv (no <kernel>_append in their cubin) */
  fa3rt_facts pack_only = f;
  pack_only.split_kv = 0;
  a = append_args(3, 1);
  a.seqused_k = 0;
  EXPECT(err_is(fa3rt_fwd_plan(&pack_only, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "kernel fa3_fwd_d128_bf16_decode_kernel appends no new keys to a cache (facts "
                "split_kv 0) but k_new, v_new or seqlens_out is set: appending to a KV cache "
                "needs a decoding kernel (facts split_kv 1: fa3-compile --decode, "
                "Fa3AttentionSpec.decode), whose cubin holds "
                "fa3_fwd_d128_bf16_decode_kernel_append"));
  fa3rt_facts fwd;
  EXPECT(fa3rt_facts_parse(kFacts, strlen(kFacts), &fwd) == FA3RT_OK);
  a = good_args();
  a.seqlens_out = 0xc00000;
  EXPECT(err_is(fa3rt_fwd_plan(&fwd, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "kernel fa3_fwd_d128_bf16_causal appends no new keys to a cache (facts split_kv "
                "0)"));
  a = good_args();
  a.k_new.strides[3] = 1;
  EXPECT(err_is(fa3rt_fwd_plan(&fwd, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "appends no new keys to a cache"));
  a = good_args();
  EXPECT(fa3rt_fwd_plan(&fwd, &a, &L) == FA3RT_OK && L.snew == 0 && L.append_grid == 0);
}

/* The kernel of `facts` loaded through the fake driver (on, until the
   caller's fake_reset(0)), or NULL with the driver off again. */
static fa3rt_kernel *fake_load(const char *facts) {
  const char cubin[16] = {0};
  fa3rt_kernel *k = NULL;
  fake_reset(1);
  EXPECT(fa3rt_kernel_load_data(cubin, sizeof cubin, facts, strlen(facts), &k) == FA3RT_OK);
  if (!k) fake_reset(0);
  return k;
}

/* fa3rt_fwd with new rows against the fake driver: <kernel>_append, then
   the attention, and the append's parameters by the names of
   fa3rt_abi.def (Skv: the rows it may write, no further). */
static void test_append_launch(void) {
  fa3rt_kernel *k = fake_load(kDecFacts);
  if (!k) return;
  memset(&g_append, 0, sizeof g_append);
  fa3rt_fwd_args a = append_args(3, 5);
  a.num_splits = 1; /* no workspaces */
  EXPECT(fa3rt_fwd(k, &a, NULL) == FA3RT_OK);
  EXPECT(g_launches[H_APPEND] == 1 && g_launches[H_MAIN] == 1);
  EXPECT(g_append.B == 3 && g_append.Snew == 5 && g_append.Hkv == 8 && g_append.Skv == 4096);
  EXPECT(g_append.kNew == 0xa00000 && g_append.vNew == 0xb00000 &&
         g_append.cacheSeqlens == 0x800000 && g_append.seqlensOut == 0xc00000 &&
         g_append.pageTable == 0 && g_append.pageTableStride == 0 && g_append.numPages == 0);
  /* a paged cache: the pool's page count, which bounds the pages the
     append writes (a table entry at or past it is skipped) */
  memset(&g_append, 0, sizeof g_append);
  fa3rt_fwd_args p = paged_args(3, 32, 8, 300, 64, 16);
  p.seqused_k = 0x800000;
  p.k_new = bshd(0xa00000, 3, 5, 8, 128);
  p.v_new = bshd(0xb00000, 3, 5, 8, 128);
  p.seqlens_out = 0xc00000;
  p.num_splits = 1;
  EXPECT(fa3rt_fwd(k, &p, NULL) == FA3RT_OK);
  EXPECT(g_append.pageTable == 0x900000 && g_append.pageTableStride == 16 &&
         g_append.pageSize == 64 && g_append.numPages == 300 && g_append.Skv == 16 * 64);
  fa3rt_kernel_destroy(k);
  fake_reset(0);
}

/* ctas_per_sm: 1 launches with the most dynamic shared memory a block may
   have (no second CTA fits), raising the kernel's limit at the first such
   launch; 2 keeps the facts' bytes; 0 is 1 where each CTA streams at least
   FA3RT_ONE_CTA_KEYS keys of a kernel two CTAs could share an SM with,
   else 2. */
static void test_ctas_per_sm(void) {
  fa3rt_facts f;
  EXPECT(fa3rt_facts_parse(kDecFacts, strlen(kDecFacts), &f) == FA3RT_OK);
  fa3rt_fwd_launch L;
  fa3rt_fwd_args a = dec_args(64, 1, 32, 8, 16384);
  /* B 64: one split, 16384 keys a CTA */
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.num_splits == 1 &&
         L.dynamic_smem == FA3RT_WHOLE_SM_SMEM);
  a.ctas_per_sm = 2;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.dynamic_smem == 100000);
  a.ctas_per_sm = 1;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.dynamic_smem == FA3RT_WHOLE_SM_SMEM &&
         L.grid[0] == 64 * 8 && L.num_splits == 1);
  /* the default below FA3RT_ONE_CTA_KEYS a CTA: 16383 keys, or 65536 over
     5 splits (over 4: 16384 a CTA) */
  fa3rt_fwd_args s = dec_args(64, 1, 32, 8, FA3RT_ONE_CTA_KEYS - 1);
  EXPECT(fa3rt_fwd_plan(&f, &s, &L) == FA3RT_OK && L.dynamic_smem == 100000);
  s = dec_args(64, 1, 32, 8, 65536);
  s.num_splits = 4;
  EXPECT(fa3rt_fwd_plan(&f, &s, &L) == FA3RT_OK && L.dynamic_smem == FA3RT_WHOLE_SM_SMEM);
  s.num_splits = 5;
  EXPECT(fa3rt_fwd_plan(&f, &s, &L) == FA3RT_OK && L.dynamic_smem == 100000);
  a.ctas_per_sm = 3;
  EXPECT(err_is(fa3rt_fwd_plan(&f, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "ctas_per_sm: 3 is out of range (0: the runtime's choice, 1: one CTA a SM, "
                "2: as many as fit)"));
  a.ctas_per_sm = -1;
  EXPECT(err_is(fa3rt_fwd_plan(&f, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "ctas_per_sm: -1 is out of range"));
  fa3rt_kernel *k = fake_load(kDecFacts);
  if (!k) return;
  a.ctas_per_sm = 2;
  EXPECT(fa3rt_fwd(k, &a, NULL) == FA3RT_OK && g_smem == 100000 &&
         g_max_dynamic_smem == 100000);
  /* the fake device: 232448 bytes a block, no static shared memory */
  a.ctas_per_sm = 0;
  EXPECT(fa3rt_fwd(k, &a, NULL) == FA3RT_OK && g_smem == 232448 &&
         g_max_dynamic_smem == 232448 && g_grid[0] == 64 * 8);
  a.ctas_per_sm = 1;
  EXPECT(fa3rt_fwd(k, &a, NULL) == FA3RT_OK && g_smem == 232448);
  s = dec_args(64, 1, 32, 8, FA3RT_ONE_CTA_KEYS - 1);
  EXPECT(fa3rt_fwd(k, &s, NULL) == FA3RT_OK && g_smem == 100000);
  a.ctas_per_sm = 3;
  EXPECT(err_is(fa3rt_fwd(k, &a, NULL), FA3RT_ERR_INVALID_ARGUMENT,
                "ctas_per_sm: 3 is out of range"));
  fa3rt_kernel_destroy(k);
  fake_reset(0);
}

/* fa3rt_bwd against the fake driver: _pre over the rows (aux_grid), the
   kernel, then _post with one CTA a 64 x 64 chunk of dQaccum. */
static void test_bwd_launch_grids(void) {
  const char cubin[16] = {0};
  fa3rt_kernel *k = NULL;
  fake_reset(1);
  g_main_is_bwd = 1; /* its parameter layout is the backward ABI's */
  EXPECT(fa3rt_kernel_load_data(cubin, sizeof cubin, kBwdFacts, strlen(kBwdFacts), &k) ==
         FA3RT_OK);
  if (!k) {
    fake_reset(0);
    return;
  }
  fa3rt_bwd_args a = bwd_args_of(2, 3, 3, 100, 100, 128);
  EXPECT(fa3rt_bwd(k, &a, NULL) == FA3RT_OK);
  EXPECT(g_launches[H_PRE] == 1 && g_launches[H_MAIN] == 1 && g_launches[H_POST] == 1);
  /* _pre: 2 * 100 * 3 rows, 16 a block at D 128 */
  EXPECT(g_grids[H_PRE] == 38);
  /* _post: 2 batches * 3 heads * ceil(100 / 64) tiles * 128 / 64 chunks */
  EXPECT(g_grids[H_POST] == 24);
  fa3rt_kernel_destroy(k);
  fake_reset(0);
}

/* FP8 kernels (facts `dtype e4m3`): q, k, v float8_e4m3fn (1 byte), o bf16,
   f32 descale factors. */
static const char *kFp8Facts =
    "fa3-kernel-facts 1\n"
    "kernel fa3_fwd_d128_e4m3_kernel\n"
    "dtype e4m3\n"
    "head_dim 128\n"
    "head_dim_v 128\n"
    "block_m 128\n"
    "block_n 128\n"
    "threads 384\n"
    "dynamic_smem 180000\n"
    "causal 0\n"
    "window_left -1\n"
    "window_right -1\n"
    "softcap 0\n"
    "scale 0.08838834764831845\n"
    "params mapQ mapK mapV mapO O LSE tileCounter B Sq Skv Hq Hkv oStrideB oStrideS oStrideH "
    "scaleLog2 cuSeqlensQ cuSeqlensK seqUsedK maxSeqlenQ numSplits oAccum lseAccum pageTable "
    "pageTableStride pageSize qDescale kDescale vDescale qDescaleStrideB qDescaleStrideH "
    "qDescaleStrideM kDescaleStrideB kDescaleStrideH kDescaleStrideN vDescaleStrideB "
    "vDescaleStrideH leftPadK"
    " pagedK pagedV pagedStridePage pagedStrideRow pagedStrideHead pagedPages\n"
    "grid tiles\n";

/* the forward ABI's names in order, from the .def (as the runtime's) */
static const char *const kFwdParamNames[] = {
#define FA3RT_KERNEL_PARAM(name, c_type, mlir_type, value_bytes, value_align, meaning) #name,
#include "fa3rt_abi.def"
};
#define NFWDPARAMS ((int)(sizeof kFwdParamNames / sizeof kFwdParamNames[0]))

static void test_fp8_facts(void) {
  fa3rt_facts f;
  const char *t = kFp8Facts;
  EXPECT(fa3rt_facts_parse(t, strlen(t), &f) == FA3RT_OK && f.dtype == FA3RT_E4M3 &&
         f.head_dim == 128 && f.head_dim_v == 128 && f.block_m == 128 && f.block_n == 128 &&
         !f.persistent && f.cluster_m == 1);
  EXPECT(!strcmp(fa3rt_dtype_name(FA3RT_E4M3), "e4m3") &&
         !strcmp(fa3rt_dtype_name(FA3RT_BF16), "bf16") &&
         !strcmp(fa3rt_dtype_name((fa3rt_dtype)4), "invalid"));
  char buf[4096];
  strcpy(buf, text_with(kFp8Facts, "head_dim", "head_dim 256"));
  t = text_with(buf, "head_dim_v", "head_dim_v 256");
  EXPECT(fa3rt_facts_parse(t, strlen(t), &f) == FA3RT_OK && f.head_dim == 256 &&
         f.head_dim_v == 256);
  t = text_with(kFp8Facts, "grid", "grid tiles\ncluster_m 1");
  EXPECT(fa3rt_facts_parse(t, strlen(t), &f) == FA3RT_OK && f.cluster_m == 1);
  /* the 11 descale parameters follow pageSize: facts of the ABI before
     them (0.6's 26 names) are refused by their params */
  EXPECT(NFWDPARAMS == 44);
  static const char *const added[11] = {
      "qDescale", "kDescale", "vDescale", "qDescaleStrideB", "qDescaleStrideH",
      "qDescaleStrideM", "kDescaleStrideB", "kDescaleStrideH", "kDescaleStrideN",
      "vDescaleStrideB", "vDescaleStrideH"};
  for (int i = 0; i < 11 && NFWDPARAMS == 44; i++)
    EXPECT(!strcmp(kFwdParamNames[26 + i], added[i]));
  EXPECT(!strcmp(kFwdParamNames[25], "pageSize"));
  t = text_with(kFp8Facts, "params",
                "params mapQ mapK mapV mapO O LSE tileCounter B Sq Skv Hq Hkv oStrideB oStrideS "
                "oStrideH scaleLog2 cuSeqlensQ cuSeqlensK seqUsedK maxSeqlenQ numSplits oAccum "
                "lseAccum pageTable pageTableStride pageSize");
  EXPECT(err_is(fa3rt_facts_parse(t, strlen(t), &f), FA3RT_ERR_FACTS,
                "facts line 15: kernel parameter list 'mapQ"));
  EXPECT(strstr(fa3rt_last_error(), "is not the ABI this runtime launches ('mapQ mapK mapV "
                "mapO O LSE tileCounter B Sq Skv Hq Hkv oStrideB oStrideS oStrideH scaleLog2 "
                "cuSeqlensQ cuSeqlensK seqUsedK maxSeqlenQ numSplits oAccum lseAccum pageTable "
                "pageTableStride pageSize qDescale kDescale vDescale qDescaleStrideB "
                "qDescaleStrideH qDescaleStrideM kDescaleStrideB kDescaleStrideH "
                "kDescaleStrideN vDescaleStrideB vDescaleStrideH leftPadK pagedK pagedV "
                "pagedStridePage pagedStrideRow pagedStrideHead pagedPages'") != NULL);
  /* the new names out of order */
  t = text_with(kFp8Facts, "params",
                "params mapQ mapK mapV mapO O LSE tileCounter B Sq Skv Hq Hkv oStrideB oStrideS "
                "oStrideH scaleLog2 cuSeqlensQ cuSeqlensK seqUsedK maxSeqlenQ numSplits oAccum "
                "lseAccum pageTable pageTableStride pageSize qDescale kDescale vDescale "
                "qDescaleStrideB qDescaleStrideH qDescaleStrideM kDescaleStrideB kDescaleStrideH "
                "kDescaleStrideN vDescaleStrideH vDescaleStrideB");
  EXPECT(err_is(fa3rt_facts_parse(t, strlen(t), &f), FA3RT_ERR_FACTS, "is not the ABI"));
#define FP8_ERR(key, line, sub)                                                    \
  do {                                                                           \
    t = text_with(kFp8Facts, key, line);                                         \
    EXPECT(err_is(fa3rt_facts_parse(t, strlen(t), &f), FA3RT_ERR_FACTS, sub));   \
  } while (0)
  FP8_ERR("dtype", "dtype fp8", "facts line 3: dtype 'fp8' is not supported (bf16, f16 or e4m3)");
  FP8_ERR("dtype", "dtype e5m2", "dtype 'e5m2' is not supported");
  FP8_ERR("dtype", "dtype E4M3", "dtype 'E4M3' is not supported");
  /* what the compiler does not build in FP8 */
  FP8_ERR("grid", "grid tiles\nvarlen 1",
          "facts of kernel 'fa3_fwd_d128_e4m3_kernel': dtype e4m3 needs varlen 0 (the compiler "
          "builds no FP8 varlen kernel yet)");
  /* the FP8 decoding kernel: head dim 64 or 128, 64-row tiles (GQA-packed
     only: one q descale a kv head) */
  t = text_with(kFp8Facts, "grid", "grid tiles\nsplit_kv 1\npack_gqa 1");
  EXPECT(fa3rt_facts_parse(t, strlen(t), &f) == FA3RT_OK && f.split_kv && f.pack_gqa);
  {
    char rows64[4096];
    strcpy(rows64, text_with(kFp8Facts, "block_m", "block_m 64"));
    t = text_with(rows64, "grid", "grid tiles\nsplit_kv 1\npack_gqa 1");
    EXPECT(fa3rt_facts_parse(t, strlen(t), &f) == FA3RT_OK && f.block_m == 64);
    EXPECT(err_is(fa3rt_facts_parse(rows64, strlen(rows64), &f), FA3RT_ERR_FACTS,
                  "dtype e4m3 needs block_m 128 with block_n"));
  }
  {
    char dec[4096];
    strcpy(dec, text_with(kFp8Facts, "head_dim", "head_dim 256"));
    t = text_with(dec, "head_dim_v", "head_dim_v 256\nsplit_kv 1\npack_gqa 1");
    EXPECT(err_is(fa3rt_facts_parse(t, strlen(t), &f), FA3RT_ERR_FACTS,
                  "facts of kernel 'fa3_fwd_d128_e4m3_kernel': dtype e4m3 with split_kv 1 needs "
                  "head_dim 64 or 128, got 256 (the compiler builds FP8 decoding kernels of "
                  "those head dims only)"));
  }
  FP8_ERR("head_dim", "head_dim 192",
          "facts of kernel 'fa3_fwd_d128_e4m3_kernel': dtype e4m3 needs head_dim and head_dim_v "
          "64, 128 or 256, got 192 and 128 (the compiler builds FP8 kernels of those head dims "
          "only)");
  FP8_ERR("head_dim_v", "head_dim_v 192", "dtype e4m3 needs head_dim and head_dim_v 64, 128 or "
          "256, got 128 and 192");
  FP8_ERR("head_dim", "head_dim 96", "got 96 and 128");
  /* a varlen kernel's other rule comes first (it names its own key) */
  FP8_ERR("grid", "grid tiles\nvarlen 1\ncluster_m 2", "varlen 1 needs cluster_m 1");
  /* equal head dims */
  FP8_ERR("head_dim_v", "head_dim_v 256",
          "facts of kernel 'fa3_fwd_d128_e4m3_kernel': dtype e4m3 needs head_dim_v equal to "
          "head_dim, got 128 and 256 (the compiler builds FP8 kernels of equal head dims only)");
  FP8_ERR("head_dim", "head_dim 256", "dtype e4m3 needs head_dim_v equal to head_dim, got 256 "
          "and 128");
  /* tiles of 128 keys and 128 (or, head dim 64, 192) rows, no cluster: the
     descales' blocks */
#define FP8_WHY                                                                          \
  " (the kernel reads q's descale per 128-row block and k's per 128 keys, and the " \
  "compiler builds e4m3 kernels only with those tiles and no cluster; another tile would " \
  "read descales out of bounds)"
#define FP8_TILES                                                                          \
  "dtype e4m3 needs block_m 128 with block_n 128, 160, 192 or 224 (above 128 at head dim " \
  "64 or 128), or block_m 192 (head dim 64) with block_n 128 or 160, got "
  FP8_ERR("block_n", "block_n 144",
          "facts of kernel 'fa3_fwd_d128_e4m3_kernel': " FP8_TILES "128 and 144" FP8_WHY);
  FP8_ERR("block_m", "block_m 64",
          "facts of kernel 'fa3_fwd_d128_e4m3_kernel': " FP8_TILES "64 and 128" FP8_WHY);
  /* 192 rows only at head dim 64 (three consumer warpgroups' registers) */
  FP8_ERR("block_m", "block_m 192", FP8_TILES "192 and 128");
  FP8_ERR("block_n", "block_n 64", FP8_TILES "128 and 64");
  FP8_ERR("block_n", "block_n 256", FP8_TILES "128 and 256");
  /* wider tiles at head dim 128 and 64 only */
  strcpy(buf, text_with(kFp8Facts, "head_dim", "head_dim 256"));
  strcpy(buf, text_with(buf, "head_dim_v", "head_dim_v 256"));
  t = text_with(buf, "block_n", "block_n 160");
  EXPECT(err_is(fa3rt_facts_parse(t, strlen(t), &f), FA3RT_ERR_FACTS, FP8_TILES "128 and 160"));
  /* the wider tiles (FA3's 224 keys at head dim 128, 160 at 64) */
  for (int bn = 160; bn <= 224; bn += 32) {
    char line[32];
    snprintf(line, sizeof line, "block_n %d", bn);
    t = text_with(kFp8Facts, "block_n", line);
    EXPECT(fa3rt_facts_parse(t, strlen(t), &f) == FA3RT_OK && f.block_n == bn);
  }
  FP8_ERR("grid", "grid tiles\ncluster_m 2",
          "facts of kernel 'fa3_fwd_d128_e4m3_kernel': dtype e4m3 needs cluster_m 1, got 2"
          FP8_WHY);
  FP8_ERR("grid", "grid persistent\ncluster_m 2", "dtype e4m3 needs cluster_m 1, got 2");
  /* persistent CTAs are taken */
  t = text_with(kFp8Facts, "grid", "grid persistent");
  EXPECT(fa3rt_facts_parse(t, strlen(t), &f) == FA3RT_OK && f.persistent == 1);
  /* the rules in order: head dims, then the tile, then the cluster */
  strcpy(buf, text_with(kFp8Facts, "block_n", "block_n 64"));
  t = text_with(buf, "head_dim_v", "head_dim_v 256");
  EXPECT(err_is(fa3rt_facts_parse(t, strlen(t), &f), FA3RT_ERR_FACTS,
                "dtype e4m3 needs head_dim_v equal to head_dim"));
  strcpy(buf, text_with(kFp8Facts, "block_n", "block_n 64"));
  t = text_with(buf, "grid", "grid persistent\ncluster_m 2");
  EXPECT(err_is(fa3rt_facts_parse(t, strlen(t), &f), FA3RT_ERR_FACTS,
                FP8_TILES "128 and 64"));
  /* head dim 64 takes 192 rows (three consumer warpgroups) */
  strcpy(buf, text_with(kFp8Facts, "head_dim", "head_dim 64"));
  strcpy(buf, text_with(buf, "head_dim_v", "head_dim_v 64"));
  t = text_with(buf, "block_m", "block_m 192");
  EXPECT(fa3rt_facts_parse(t, strlen(t), &f) == FA3RT_OK && f.block_m == 192 && f.head_dim == 64);
  /* with 160 keys (FA3's 192 x 160), not more */
  strcpy(buf, t);
  t = text_with(buf, "block_n", "block_n 160");
  EXPECT(fa3rt_facts_parse(t, strlen(t), &f) == FA3RT_OK && f.block_n == 160);
  t = text_with(buf, "block_n", "block_n 192");
  EXPECT(err_is(fa3rt_facts_parse(t, strlen(t), &f), FA3RT_ERR_FACTS, FP8_TILES "192 and 192"));
#undef FP8_TILES
#undef FP8_WHY
#undef FP8_ERR
  /* the backward: its own params, dtype e4m3 */
  t = text_with(kBwdFacts, "dtype", "dtype e4m3");
  EXPECT(err_is(fa3rt_facts_parse(t, strlen(t), &f), FA3RT_ERR_FACTS,
                "facts of kernel 'fa3_bwd_d128_bf16_causal_kernel': dtype e4m3 needs backward 0 "
                "(the compiler builds no FP8 backward yet)"));
  /* a caller's struct is checked alike */
  EXPECT(fa3rt_facts_parse(kFp8Facts, strlen(kFp8Facts), &f) == FA3RT_OK);
  fa3rt_fwd_args a;
  memset(&a, 0, sizeof a);
  a.dtype = FA3RT_E4M3;
  fa3rt_fwd_launch L;
  fa3rt_facts g = f;
  g.head_dim = 96;
  EXPECT(err_is(fa3rt_fwd_plan(&g, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "dtype e4m3 needs head_dim and head_dim_v 64, 128 or 256, got 96 and 128"));
  g = f;
  g.head_dim_v = 256;
  EXPECT(err_is(fa3rt_fwd_plan(&g, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "dtype e4m3 needs head_dim_v equal to head_dim, got 128 and 256"));
  g = f;
  g.block_n = 176;
  EXPECT(err_is(fa3rt_fwd_plan(&g, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "dtype e4m3 needs block_m 128 with block_n 128, 160, 192 or 224 (above 128 at "
                "head dim 64 or 128), or block_m 192 (head dim 64) with block_n 128 or 160, got "
                "128 and 176 (the kernel reads q's "
                "descale per 128-row block"));
  g = f;
  g.block_m = 64;
  EXPECT(err_is(fa3rt_fwd_plan(&g, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "with block_n 128 or 160, got 64 and 128"));
  g = f;
  g.block_m = 192; /* at head dim 128: three warpgroups' registers are too few */
  EXPECT(err_is(fa3rt_fwd_plan(&g, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "with block_n 128 or 160, got 192 and 128"));
  g = f;
  g.cluster_m = 2;
  EXPECT(err_is(fa3rt_fwd_plan(&g, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "dtype e4m3 needs cluster_m 1, got 2 (the kernel reads"));
  g = f;
  g.varlen = 1;
  EXPECT(err_is(fa3rt_fwd_plan(&g, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "dtype e4m3 needs varlen 0"));
  g = f;
  g.split_kv = 1;
  g.pack_gqa = 1;
  g.persistent = 0;
  g.head_dim = g.head_dim_v = 256;
  EXPECT(err_is(fa3rt_fwd_plan(&g, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "dtype e4m3 with split_kv 1 needs head_dim 64 or 128, got 256"));
  g = f;
  g.backward = 1;
  g.persistent = 0;
  fa3rt_bwd_args b;
  memset(&b, 0, sizeof b);
  b.dtype = FA3RT_BF16;
  fa3rt_bwd_launch BL;
  EXPECT(err_is(fa3rt_bwd_plan(&g, &b, &BL), FA3RT_ERR_INVALID_ARGUMENT,
                "dtype e4m3 needs backward 0 (the compiler builds no FP8 backward yet)"));
  g.dtype = (fa3rt_dtype)4;
  EXPECT(err_is(fa3rt_fwd_plan(&g, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "facts.dtype: not bf16, f16 or e4m3"));
}

/* [B, Sq, Hq / Hkv, D] e4m3 q, k, v, bf16 o, BSHD; dense descales:
   q [B, Hq, ceil(Sq / 128)], k [B, Hkv, ceil(Skv / 128)], v [B, Hkv] */
static fa3rt_fwd_args fp8_args(void) {
  fa3rt_fwd_args a;
  memset(&a, 0, sizeof a);
  a.dtype = FA3RT_E4M3;
  a.q = bshd(0x100000, 2, 1000, 8, 128);
  a.k = bshd(0x200000, 2, 700, 2, 128);
  a.v = bshd(0x300000, 2, 700, 2, 128);
  a.o = bshd(0x400000, 2, 1000, 8, 128);
  a.lse = 0x500000;
  a.softmax_scale = NAN;
  a.q_descale = 0x600000;
  a.q_descale_stride_b = 8 * 8;
  a.q_descale_stride_h = 8;
  a.q_descale_stride_m = 1;
  a.k_descale = 0x610000;
  a.k_descale_stride_b = 2 * 6;
  a.k_descale_stride_h = 6;
  a.k_descale_stride_n = 1;
  a.v_descale = 0x620000;
  a.v_descale_stride_b = 2;
  a.v_descale_stride_h = 1;
  return a;
}

static void test_fp8_plan(void) {
  fa3rt_facts f;
  EXPECT(fa3rt_facts_parse(kFp8Facts, strlen(kFp8Facts), &f) == FA3RT_OK);
  fa3rt_fwd_launch L;
  fa3rt_fwd_args a = fp8_args();
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK);
  EXPECT(L.grid[0] == 8 * 8 * 2 && L.B == 2 && L.Sq == 1000 && L.Skv == 700 && L.Hq == 8 &&
         L.Hkv == 2 && L.kv_box_rows == 128 && !L.empty && !L.fill_only);
  EXPECT(L.o_stride_b == 1000L * 8 * 128 && L.o_stride_s == 8 * 128 && L.o_stride_h == 128);
  a.o_dtype = FA3RT_BF16; /* the caller's statement of o's type */
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK);
  /* no descales (1.0 each), or broadcast ones: FlashAttention-3's (B, Hkv)
     k and v descales (strides Hkv, 1, 0), a per-tensor q scale (all 0) */
  a = fp8_args();
  a.q_descale = a.k_descale = a.v_descale = 0;
  a.q_descale_stride_b = a.q_descale_stride_h = a.q_descale_stride_m = 0;
  a.k_descale_stride_b = a.k_descale_stride_h = a.k_descale_stride_n = 0;
  a.v_descale_stride_b = a.v_descale_stride_h = 0;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK);
  a.q_descale = 0x600004;
  a.k_descale = 0x610000;
  a.k_descale_stride_b = 2;
  a.k_descale_stride_h = 1;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK);
  /* a kernel of 224-key tiles takes k's descales in every form: per 128
     keys (it scales each column by its key's block's), or per (batch, kv
     head) */
  {
    fa3rt_facts w = f;
    w.block_n = 224;
    EXPECT(fa3rt_fwd_plan(&w, &a, &L) == FA3RT_OK && L.kv_box_rows == 224);
    a = fp8_args();
    EXPECT(fa3rt_fwd_plan(&w, &a, &L) == FA3RT_OK && L.grid[0] == 8 * 8 * 2);
  }
  /* the largest strides: the last element read at index 2^31-1 */
  a = fp8_args();
  a.q_descale_stride_b = INT32_MAX - 7 * 8 - 7; /* (B-1) sB + (Hq-1) 8 + (8-1) 1 */
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK);
  a.q_descale_stride_b++;
  EXPECT(err_is(fa3rt_fwd_plan(&f, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "q_descale: the last element read, index 2147483648 (b B-1, h Hq-1, block "
                "ceil(Sq/128)-1 by the strides), is out of range (at most 2^31-1: the kernel's "
                "i32 index)"));
  a = fp8_args();
  a.v_descale_stride_h = INT32_MAX; /* Hkv 2: index 2 + 2^31-1 */
  EXPECT(err_is(fa3rt_fwd_plan(&f, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "v_descale: the last element read, index 2147483649 (b B-1, h Hkv-1 by the "
                "strides)"));
  a = fp8_args();
  a.k_descale_stride_b = a.k_descale_stride_h = a.k_descale_stride_n = INT32_MAX;
  EXPECT(err_is(fa3rt_fwd_plan(&f, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "k_descale: the last element read, index 15032385529 (b B-1, h Hkv-1, block "
                "ceil(Skv/128)-1"));
  /* no rows, no heads, no batch: nothing read, any stride in range */
  a = fp8_args();
  a.q = bshd(0x100000, 2, 0, 8, 128);
  a.o = bshd(0x400000, 2, 0, 8, 128);
  a.q_descale_stride_b = INT32_MAX;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.empty);
  a = fp8_args();
  a.k = bshd(0, 2, 0, 2, 128);
  a.v = bshd(0, 2, 0, 2, 128);
  a.k_descale_stride_b = a.k_descale_stride_h = a.k_descale_stride_n = INT32_MAX;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.fill_only);
  /* head dim 256 */
  {
    char buf[4096];
    strcpy(buf, text_with(kFp8Facts, "head_dim", "head_dim 256"));
    const char *t = text_with(buf, "head_dim_v", "head_dim_v 256");
    fa3rt_facts f256;
    EXPECT(fa3rt_facts_parse(t, strlen(t), &f256) == FA3RT_OK);
    a = fp8_args();
    a.q = bshd(0x100000, 2, 1000, 8, 256);
    a.k = bshd(0x200000, 2, 700, 2, 256);
    a.v = bshd(0x300000, 2, 700, 2, 256);
    a.o = bshd(0x400000, 2, 1000, 8, 256);
    EXPECT(fa3rt_fwd_plan(&f256, &a, &L) == FA3RT_OK && L.o_stride_s == 8 * 256);
    EXPECT(err_is(fa3rt_fwd_plan(&f, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                  "q head dim (shape[3]) is 256 but kernel fa3_fwd_d128_e4m3_kernel has "
                  "head_dim 128"));
  }
  /* the FP8 decoding kernel (GQA-packed): q's descale per (batch, kv head),
     its 128-row blocks mixing q heads */
  {
    const char *t = text_with(kFp8Facts, "grid", "grid tiles\nsplit_kv 1\npack_gqa 1");
    fa3rt_facts fd;
    EXPECT(fa3rt_facts_parse(t, strlen(t), &fd) == FA3RT_OK);
    a = fp8_args();
    a.q_descale_stride_b = 2, a.q_descale_stride_h = 1, a.q_descale_stride_m = 0;
    EXPECT(fa3rt_fwd_plan(&fd, &a, &L) == FA3RT_OK);
    a.q_descale_stride_m = 1;
    EXPECT(err_is(fa3rt_fwd_plan(&fd, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                  "q_descale_stride_m is 1 but kernel fa3_fwd_d128_e4m3_kernel packs the q heads "
                  "of each kv head into its tiles (facts pack_gqa 1): its q descale is one per "
                  "(batch, kv head), FlashAttention-3's [B, Hkv] (stride_h 1 for kv head hkv), "
                  "so stride_m must be 0"));
    /* per-128-key k descales with a left-padded cache: refused */
    a.q_descale_stride_m = 0;
    a.leftpad_k = 0x900000;
    EXPECT(a.k_descale_stride_n != 0 &&
           err_is(fa3rt_fwd_plan(&fd, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                  "k_descale_stride_n is 1 (k descales per 128 keys) with leftpad_k: kernel "
                  "fa3_fwd_d128_e4m3_kernel counts a left-padded batch's kv blocks from its "
                  "first key"));
    a.k_descale_stride_n = 0;
    a.k_descale_stride_h = 1, a.k_descale_stride_b = 2;
    EXPECT(fa3rt_fwd_plan(&fd, &a, &L) == FA3RT_OK);
  }
  /* strides and alignment in bytes: 1 for q, k, v, 2 for o. A row of 1032
     elements is 1032 bytes of e4m3 (not a multiple of 16) but 2064 of bf16;
     1040 is 1040 bytes */
  a = fp8_args();
  a.q.strides[2] = 1040;
  a.q.strides[0] = 1000L * 1040;
  a.o.strides[2] = 1032;
  a.o.strides[0] = 1000L * 1032;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.o_stride_s == 1032);
  {
    fa3rt_facts bf;
    EXPECT(fa3rt_facts_parse(kFacts, strlen(kFacts), &bf) == FA3RT_OK);
    fa3rt_fwd_args b = good_args();
    b.q.strides[2] = 1032;
    b.q.strides[0] = 1000L * 1032;
    EXPECT(fa3rt_fwd_plan(&bf, &b, &L) == FA3RT_OK); /* 2064 bytes */
  }
#define BAD_FP8(mutate, sub)                                                      \
  do {                                                                            \
    a = fp8_args();                                                               \
    mutate;                                                                       \
    EXPECT(err_is(fa3rt_fwd_plan(&f, &a, &L), FA3RT_ERR_INVALID_ARGUMENT, sub));   \
  } while (0)
  BAD_FP8((a.q.strides[2] = 1032, a.q.strides[0] = 1000L * 1032),
          "q stride of dim S is 1032 elements = 1032 bytes; it must be a multiple of 16 bytes "
          "(TMA)");
  BAD_FP8(a.k.strides[1] = 136, "k stride of dim H is 136 elements = 136 bytes; it must be a "
          "multiple of 16 bytes (TMA)");
  BAD_FP8(a.v.strides[0] = 700L * 256 + 8, "v stride of dim B is 179208 elements = 179208 bytes");
  BAD_FP8(a.o.strides[2] = 1028, "o stride of dim S is 1028 elements = 2056 bytes; it must be "
          "a multiple of 16 bytes (TMA)");
  BAD_FP8(a.q.strides[0] = 1LL << 40, "q.strides[0] (B): 1099511627776 is out of range (1 to "
          "1099511627775 elements: TMA takes strides below 2^40 bytes)");
  BAD_FP8(a.o.strides[0] = 1LL << 39, "o.strides[0] (B): 549755813888 is out of range (1 to "
          "549755813887 elements");
  BAD_FP8(a.q.ptr = 0x100008, "q pointer 0x100008 is not 16-byte aligned (TMA needs 16-byte "
          "aligned tensors)");
  BAD_FP8(a.k.strides[3] = 2, "k stride of the head dim (D) is 2 elements; it must be 1");
  /* the dtypes */
  BAD_FP8(a.dtype = FA3RT_BF16, "dtype bf16 does not match kernel fa3_fwd_d128_e4m3_kernel "
          "(dtype e4m3)");
  BAD_FP8(a.dtype = FA3RT_DTYPE_INVALID, "invalid dtype 0 (expected FA3RT_BF16, FA3RT_F16 or "
          "FA3RT_E4M3)");
  BAD_FP8(a.o_dtype = FA3RT_F16, "o_dtype f16 does not match kernel fa3_fwd_d128_e4m3_kernel, "
          "whose o is bf16 (an FP8 kernel's q, k, v are e4m3, its o bf16)");
  BAD_FP8(a.o_dtype = FA3RT_E4M3, "o_dtype e4m3 does not match kernel fa3_fwd_d128_e4m3_kernel, "
          "whose o is bf16");
  BAD_FP8(a.o_dtype = (fa3rt_dtype)9, "invalid o_dtype 9 (0: the kernel's output type, else "
          "that type: bf16 for kernel fa3_fwd_d128_e4m3_kernel)");
  /* descale strides: 0 to 2^31-1 */
  BAD_FP8(a.q_descale_stride_b = -1, "q_descale_stride_b: -1 is out of range (0 to 2^31-1 "
          "elements: the kernel's i32 stride; 0 broadcasts)");
  BAD_FP8(a.q_descale_stride_h = INT64_MIN, "q_descale_stride_h: -9223372036854775808 is out of "
          "range");
  BAD_FP8(a.q_descale_stride_m = -8, "q_descale_stride_m: -8 is out of range");
  BAD_FP8(a.k_descale_stride_b = 1LL << 31, "k_descale_stride_b: 2147483648 is out of range "
          "(0 to 2^31-1");
  BAD_FP8(a.k_descale_stride_h = INT64_MAX, "k_descale_stride_h: 9223372036854775807 is out of "
          "range");
  BAD_FP8(a.k_descale_stride_n = -1, "k_descale_stride_n: -1 is out of range");
  BAD_FP8(a.v_descale_stride_b = 1LL << 32, "v_descale_stride_b: 4294967296 is out of range");
  BAD_FP8(a.v_descale_stride_h = -2147483648LL, "v_descale_stride_h: -2147483648 is out of "
          "range");
  /* out of range with no pointer too (the range first) */
  BAD_FP8((a.v_descale = 0, a.v_descale_stride_b = 0, a.v_descale_stride_h = -1),
          "v_descale_stride_h: -1 is out of range");
  BAD_FP8((a.q_descale = 0), "q_descale_stride_b is 64 but q_descale is 0 (a descale of 1.0): "
          "the strides of an absent descale must be 0");
  BAD_FP8((a.k_descale = 0, a.k_descale_stride_b = a.k_descale_stride_h = 0),
          "k_descale_stride_n is 1 but k_descale is 0");
  BAD_FP8((a.v_descale = 0, a.v_descale_stride_b = 0), "v_descale_stride_h is 1 but v_descale "
          "is 0");
  /* the pointers */
  BAD_FP8(a.q_descale = 0x600002, "q_descale pointer 0x600002 is not a 4-byte aligned device "
          "address below 2^63 (f32 descale factors)");
  BAD_FP8(a.k_descale = (uint64_t)-4, "k_descale pointer 0xfffffffffffffffc is not a 4-byte "
          "aligned device address below 2^63");
  BAD_FP8(a.v_descale = 1ULL << 63, "v_descale pointer 0x8000000000000000 is not");
  BAD_FP8(a.v_descale = (1ULL << 63) - 12, "v_descale pointer: 0x7ffffffffffffff4 is out of "
          "range (its element 3 below 2^63: a device address)");
#undef BAD_FP8
  a = fp8_args();
  a.v_descale = (1ULL << 63) - 16; /* elements 0 to 3: the last 4 bytes below 2^63 */
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK);

  /* a bf16 kernel takes no descale: refused, not ignored */
  fa3rt_facts bf;
  EXPECT(fa3rt_facts_parse(kFacts, strlen(kFacts), &bf) == FA3RT_OK);
#define BAD_BF16(mutate, sub)                                                     \
  do {                                                                            \
    a = good_args();                                                              \
    mutate;                                                                       \
    EXPECT(err_is(fa3rt_fwd_plan(&bf, &a, &L), FA3RT_ERR_INVALID_ARGUMENT, sub));  \
  } while (0)
  BAD_BF16(a.q_descale = 0x600000,
           "q_descale is set (0x600000) but kernel fa3_fwd_d128_bf16_causal (facts dtype bf16) "
           "takes no descale factors, which it would ignore: descales are for FP8 kernels "
           "(facts dtype e4m3)");
  BAD_BF16(a.k_descale = 0x610000, "k_descale is set (0x610000) but kernel");
  BAD_BF16(a.v_descale = 0x620001, "v_descale is set (0x620001) but kernel");
  BAD_BF16(a.q_descale_stride_m = 1,
           "q_descale_stride_m is 1 but kernel fa3_fwd_d128_bf16_causal (facts dtype bf16) "
           "takes no descale factors: it must be 0 (descales are for FP8 kernels, facts dtype "
           "e4m3)");
  BAD_BF16(a.k_descale_stride_n = -1, "k_descale_stride_n is -1 but kernel");
  BAD_BF16(a.v_descale_stride_b = 2, "v_descale_stride_b is 2 but kernel");
  BAD_BF16(a.o_dtype = FA3RT_F16, "o_dtype f16 does not match kernel fa3_fwd_d128_bf16_causal, "
           "whose o is bf16");
  BAD_BF16(a.o_dtype = FA3RT_E4M3, "o_dtype e4m3 does not match kernel");
#undef BAD_BF16
  a = good_args();
  a.o_dtype = FA3RT_BF16;
  EXPECT(fa3rt_fwd_plan(&bf, &a, &L) == FA3RT_OK);
  /* f16: its o is f16 */
  bf.dtype = FA3RT_F16;
  a.dtype = FA3RT_F16;
  EXPECT(err_is(fa3rt_fwd_plan(&bf, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "o_dtype bf16 does not match kernel fa3_fwd_d128_bf16_causal, whose o is f16"));
  a.o_dtype = FA3RT_F16;
  EXPECT(fa3rt_fwd_plan(&bf, &a, &L) == FA3RT_OK);

  /* the backward takes no e4m3 */
  fa3rt_facts bw;
  EXPECT(fa3rt_facts_parse(kBwdFacts, strlen(kBwdFacts), &bw) == FA3RT_OK);
  fa3rt_bwd_args b = good_bwd_args();
  fa3rt_bwd_launch BL;
  b.dtype = FA3RT_E4M3;
  EXPECT(err_is(fa3rt_bwd_plan(&bw, &b, &BL), FA3RT_ERR_INVALID_ARGUMENT,
                "dtype e4m3: fa3rt_bwd takes bf16 or f16 (the compiler builds no FP8 backward "
                "yet; kernel fa3_bwd_d128_bf16_causal_kernel is bf16)"));
  /* nor fa3rt_bwd an FP8 forward kernel */
  b.dtype = FA3RT_E4M3;
  EXPECT(err_is(fa3rt_bwd_plan(&f, &b, &BL), FA3RT_ERR_INVALID_ARGUMENT,
                "kernel fa3_fwd_d128_e4m3_kernel is a forward kernel (facts backward 0)"));
}

/* The tile counters a launch passes: only the dynamic scheduler (grid
   persistent, cluster_m 1) reads them, so only its launches take a slot and
   record the slot's event; launches on one stream share a slot, another
   stream takes the next. */
static void test_tile_counter_slots(void) {
  const CUdeviceptr base = 0x7f0000000000ULL; /* the fake cuMemAlloc's */
  fa3rt_kernel *k = fake_load(kFacts); /* grid tiles */
  if (!k) return;
  fa3rt_fwd_args a = good_args();
  EXPECT(fa3rt_fwd(k, &a, NULL) == FA3RT_OK && fa3rt_fwd(k, &a, (void *)0x1234) == FA3RT_OK);
  EXPECT(g_launches[H_MAIN] == 2 && g_event_records == 0 && g_fwd.tileCounter == base);
  fa3rt_kernel_destroy(k);
  k = fake_load(facts_with("grid", "grid persistent"));
  if (!k) return;
  a = good_args();
  EXPECT(fa3rt_fwd(k, &a, NULL) == FA3RT_OK && g_event_records == 1 && g_fwd.tileCounter == base);
  EXPECT(fa3rt_fwd(k, &a, NULL) == FA3RT_OK && g_event_records == 2 && g_fwd.tileCounter == base);
  EXPECT(fa3rt_fwd(k, &a, (void *)0x1234) == FA3RT_OK && g_event_records == 3 &&
         g_fwd.tileCounter == base + 2 * sizeof(uint32_t));
  /* the caller's counters: no slot, no event */
  a.tile_counter = 0x60000;
  EXPECT(fa3rt_fwd(k, &a, NULL) == FA3RT_OK && g_event_records == 3 &&
         g_fwd.tileCounter == 0x60000);
  fa3rt_kernel_destroy(k);
}

/* fa3rt_fwd against the fake driver: the tensor maps it encodes and the
   parameters it launches with, by the names of fa3rt_abi.def and at the
   positions the .def gives them. */
static void test_fwd_launch_array(void) {
  const char cubin[16] = {0}; /* for the loads below */
  fa3rt_kernel *k = fake_load(kFp8Facts);
  if (!k) return;
  EXPECT(fa3rt_kernel_facts(k)->dtype == FA3RT_E4M3);
  fa3rt_fwd_args a = fp8_args();
  EXPECT(fa3rt_fwd(k, &a, NULL) == FA3RT_OK);
  EXPECT(g_nmaps == 4 && g_launches[H_MAIN] == 1);
  /* q, k, v: 1-byte elements, boxes of 128 of D (128 bytes) and block_m
     (q) or block_n (k, v) rows; byte strides of H, S, B */
  const fake_map *m = g_maps;
  EXPECT(m[0].type == CU_TENSOR_MAP_DATA_TYPE_UINT8 && m[0].addr == 0x100000 &&
         m[0].swizzle == CU_TENSOR_MAP_SWIZZLE_128B);
  EXPECT(m[0].dims[0] == 128 && m[0].dims[1] == 8 && m[0].dims[2] == 1000 && m[0].dims[3] == 2);
  EXPECT(m[0].strides[0] == 128 && m[0].strides[1] == 8 * 128 &&
         m[0].strides[2] == 1000ULL * 8 * 128);
  EXPECT(m[0].box[0] == 128 && m[0].box[1] == 1 && m[0].box[2] == 128 && m[0].box[3] == 1);
  for (int i = 1; i <= 2; i++) {
    EXPECT(m[i].type == CU_TENSOR_MAP_DATA_TYPE_UINT8 &&
           m[i].addr == (i == 1 ? 0x200000u : 0x300000u));
    EXPECT(m[i].dims[0] == 128 && m[i].dims[1] == 2 && m[i].dims[2] == 700);
    EXPECT(m[i].strides[0] == 128 && m[i].strides[1] == 256 && m[i].strides[2] == 700ULL * 256);
    EXPECT(m[i].box[0] == 128 && m[i].box[1] == 1 && m[i].box[2] == 128 && m[i].box[3] == 1);
  }
  /* o: bf16, 64 of D (128 bytes), 64 rows */
  EXPECT(m[3].type == CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 && m[3].addr == 0x400000);
  EXPECT(m[3].strides[0] == 256 && m[3].strides[1] == 2048 && m[3].strides[2] == 1000ULL * 2048);
  EXPECT(m[3].box[0] == 64 && m[3].box[1] == 1 && m[3].box[2] == 64 && m[3].box[3] == 1);
  /* the parameters by name */
  const fwd_params *p = &g_fwd;
  EXPECT(p->mapQ.opaque[0] == 1 && p->mapK.opaque[0] == 2 && p->mapV.opaque[0] == 3 &&
         p->mapO.opaque[0] == 4 && p->mapQ.opaque[1] == 0x100000);
  EXPECT(p->O == 0x400000 && p->LSE == 0x500000 && p->B == 2 && p->Sq == 1000 &&
         p->Skv == 700 && p->Hq == 8 && p->Hkv == 2);
  EXPECT(p->oStrideB == 1000L * 8 * 128 && p->oStrideS == 8 * 128 && p->oStrideH == 128);
  EXPECT(p->numSplits == 1 && !p->oAccum && !p->pageTable && !p->cuSeqlensQ && !p->seqUsedK);
  EXPECT(p->qDescale == 0x600000 && p->kDescale == 0x610000 && p->vDescale == 0x620000);
  EXPECT(p->qDescaleStrideB == 64 && p->qDescaleStrideH == 8 && p->qDescaleStrideM == 1);
  EXPECT(p->kDescaleStrideB == 12 && p->kDescaleStrideH == 6 && p->kDescaleStrideN == 1);
  EXPECT(p->vDescaleStrideB == 2 && p->vDescaleStrideH == 1);
  /* the grid: one CTA per tile, ceil(1000 / 128) m-blocks, 8 heads, 2 batches */
  EXPECT(g_grid[0] == 128 && g_block[0] == 384 && g_smem == 180000);
  /* the 11 at positions 26 to 36 of the array itself: distinct values,
     each read where the .def puts its name */
  a.q_descale = 0x700000;
  a.k_descale = 0x710000;
  a.v_descale = 0x720000;
  a.q_descale_stride_b = 101, a.q_descale_stride_h = 102, a.q_descale_stride_m = 103;
  a.k_descale_stride_b = 104, a.k_descale_stride_h = 105, a.k_descale_stride_n = 106;
  a.v_descale_stride_b = 107, a.v_descale_stride_h = 108;
  EXPECT(fa3rt_fwd(k, &a, NULL) == FA3RT_OK && g_launches[H_MAIN] == 2);
  const uint64_t want_ptr[3] = {0x700000, 0x710000, 0x720000};
  for (int i = 0; i < 11; i++) {
    const int at = 26 + i;
    EXPECT(at < (int)FAKE_NPARAMS &&
           g_raw_size[at] == (i < 3 ? sizeof(CUdeviceptr) : sizeof(int32_t)));
    if (i < 3) EXPECT(g_raw[at] == want_ptr[i]);
    else EXPECT(g_raw[at] == (uint64_t)(101 + (i - 3)));
  }
  EXPECT(p->qDescale == 0x700000 && p->vDescaleStrideH == 108);
  /* no descales: zeros */
  a = fp8_args();
  a.q_descale = a.k_descale = a.v_descale = 0;
  a.q_descale_stride_b = a.q_descale_stride_h = a.q_descale_stride_m = 0;
  a.k_descale_stride_b = a.k_descale_stride_h = a.k_descale_stride_n = 0;
  a.v_descale_stride_b = a.v_descale_stride_h = 0;
  EXPECT(fa3rt_fwd(k, &a, NULL) == FA3RT_OK);
  EXPECT(!p->qDescale && !p->kDescale && !p->vDescale && !p->qDescaleStrideB &&
         !p->kDescaleStrideN && !p->vDescaleStrideH);
  /* a refused call launches nothing */
  const int before = g_launches[H_MAIN];
  a.q_descale_stride_m = 5;
  EXPECT(err_is(fa3rt_fwd(k, &a, NULL), FA3RT_ERR_INVALID_ARGUMENT,
                "fa3rt_fwd (kernel fa3_fwd_d128_e4m3_kernel): q_descale_stride_m is 5 but "
                "q_descale is 0"));
  EXPECT(g_launches[H_MAIN] == before);
  fa3rt_kernel_destroy(k);

  /* a bf16 kernel: bf16 maps of 64 of D, the descale parameters 0 */
  k = NULL;
  fake_reset(1);
  EXPECT(fa3rt_kernel_load_data(cubin, sizeof cubin, kFacts, strlen(kFacts), &k) == FA3RT_OK);
  if (k) {
    memset(&g_fwd, 0xff, sizeof g_fwd);
    a = good_args();
    EXPECT(fa3rt_fwd(k, &a, NULL) == FA3RT_OK && g_nmaps == 4);
    for (int i = 0; i < 4; i++)
      EXPECT(m[i].type == CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 && m[i].box[0] == 64 &&
             m[i].strides[0] == 128 * 2 &&
             m[i].strides[1] == (i == 1 || i == 2 ? 2 * 128 : 8 * 128) * 2);
    EXPECT(m[0].box[2] == 128 && m[1].box[2] == 128 && m[3].box[2] == 64);
    EXPECT(!p->qDescale && !p->kDescale && !p->vDescale && !p->qDescaleStrideB &&
           !p->qDescaleStrideH && !p->qDescaleStrideM && !p->kDescaleStrideB &&
           !p->kDescaleStrideH && !p->kDescaleStrideN && !p->vDescaleStrideB &&
           !p->vDescaleStrideH);
    EXPECT(p->O == 0x40000 && p->B == 2 && p->pageSize == 0);
    /* descales refused by name at launch too */
    a.k_descale = 0x610000;
    EXPECT(err_is(fa3rt_fwd(k, &a, NULL), FA3RT_ERR_INVALID_ARGUMENT,
                  "k_descale is set (0x610000) but kernel fa3_fwd_d128_bf16_causal (facts dtype "
                  "bf16) takes no descale factors"));
    fa3rt_kernel_destroy(k);
  }

  /* a cubin of the ABI before the descales (26 parameters) with facts of
     this one: refused at load */
  k = (fa3rt_kernel *)0x1;
  fake_reset(1);
  g_param_count = 26;
  EXPECT(err_is(fa3rt_kernel_load_data(cubin, sizeof cubin, kFp8Facts, strlen(kFp8Facts), &k),
                FA3RT_ERR_FACTS, "kernel fa3_fwd_d128_e4m3_kernel takes 26 parameters; the "
                "forward ABI 'mapQ"));
  EXPECT(k == NULL);
  fake_reset(0);
}

/* fa3rt_quantize against the fake driver: its parameters by name, grid
   and block, the two launches of per-head descales, and each refusal. */
static fa3rt_quantize_args quantize_args(void) {
  fa3rt_quantize_args a;
  memset(&a, 0, sizeof a);
  /* [B 2, H 8, S 1000, D 128], BSHD storage */
  a.x = (fa3rt_tensor){0x100000, {2, 8, 1000, 128}, {1000 * 8 * 128, 128, 8 * 128, 1}};
  a.x_dtype = FA3RT_BF16;
  a.y = (fa3rt_tensor){0x800000, {2, 8, 1000, 128}, {1000 * 8 * 128, 128, 8 * 128, 1}};
  a.descale = 0x600000;
  return a;
}

static void test_quantize(void) {
  const char cubin[16] = {0};
  fa3rt_kernel *k = NULL;
  fake_reset(1);
  EXPECT(fa3rt_kernel_load_data(cubin, sizeof cubin, kFp8Facts, strlen(kFp8Facts), &k) ==
         FA3RT_OK);
  if (!k) {
    fake_reset(0);
    return;
  }
  fa3rt_quantize_args a = quantize_args();
  EXPECT(fa3rt_quantize(k, &a, NULL) == FA3RT_OK && g_launches[H_QUANTIZE] == 1);
  const quantize_params *q = &g_quantize[0];
  EXPECT(q->X == 0x100000 && q->Y == 0x800000 && q->descale == 0x600000 && !q->signs &&
         !q->amax && q->xIsF16 == 0 && q->mode == 0);
  EXPECT(q->xStrideB == 1000 * 8 * 128 && q->xStrideS == 8 * 128 && q->xStrideH == 128);
  EXPECT(q->yStrideB == 1000 * 8 * 128 && q->yStrideS == 8 * 128 && q->yStrideH == 128);
  EXPECT(q->B == 2 && q->S == 1000 && q->H == 8);
  /* heads x ceil(1000 / 128) blocks x batches, 2 threads a column */
  EXPECT(g_q_grid[0] == 8 && g_q_grid[1] == 8 && g_q_grid[2] == 2 && g_q_block[0] == 256);
  a.x.shape[1] = a.y.shape[1] = 3;
  EXPECT(fa3rt_quantize(k, &a, NULL) == FA3RT_OK && g_q_grid[0] == 3 && g_q_grid[1] == 8);
  a = quantize_args();
  /* f16 input, rotation, per-head descales: modes 1 then 2 */
  a.x_dtype = FA3RT_F16;
  a.signs = 0x700000;
  a.per_head = 1;
  a.workspace = 0x710000;
  g_launches[H_QUANTIZE] = 0;
  EXPECT(fa3rt_quantize(k, &a, NULL) == FA3RT_OK && g_launches[H_QUANTIZE] == 2);
  /* the heads' amax words zeroed first (B x H of them) */
  EXPECT(g_memset32_value == 0 && g_memset32_count == 16);
  EXPECT(g_quantize[0].mode == 1 && g_quantize[1].mode == 2 && g_quantize[1].xIsF16 == 1 &&
         g_quantize[1].signs == 0x700000 && g_quantize[0].amax == 0x710000 &&
         g_quantize[1].amax == 0x710000);
  /* per head without rows: descale 1, nothing launched */
  a.x.shape[2] = a.y.shape[2] = 0;
  g_launches[H_QUANTIZE] = 0;
  EXPECT(fa3rt_quantize(k, &a, NULL) == FA3RT_OK && g_launches[H_QUANTIZE] == 0 &&
         g_memset32_value == 0x3F800000u && g_memset32_count == 16);
  a.per_head = 0;
  g_memset32_count = 0;
  EXPECT(fa3rt_quantize(k, &a, NULL) == FA3RT_OK && g_launches[H_QUANTIZE] == 0 &&
         g_memset32_count == 0);

#define QBAD(mutate, sub)                                                            \
  do {                                                                               \
    a = quantize_args();                                                             \
    mutate;                                                                          \
    EXPECT(err_is(fa3rt_quantize(k, &a, NULL), FA3RT_ERR_INVALID_ARGUMENT, sub));    \
  } while (0)
  QBAD(a.x_dtype = FA3RT_E4M3, "x_dtype 3 (e4m3) is not taken: x is bf16 or f16");
  QBAD(a.per_head = 2, "per_head is 2; 0 (a descale per 128 rows) or 1");
  QBAD(a.x.shape[3] = a.y.shape[3] = 64, "x's head dim is 64; kernel fa3_fwd_d128_e4m3_kernel "
       "quantizes head dim 128");
  QBAD(a.y.shape[2] = 999, "y.shape[2] (S) is 999, x's 1000");
  QBAD(a.x.ptr += 8, "x pointer 0x100008 is not 16-byte aligned (fa3rt_quantize's lanes");
  QBAD(a.y.strides[2] = 8 * 128 + 8, "y stride of dim S is 1032 elements = 1032 bytes; it must "
       "be a multiple of 16 bytes (16-byte aligned rows for fa3rt_quantize)");
  QBAD(a.x.strides[3] = 2, "x stride of the head dim (D) is 2 elements");
  QBAD(a.descale = 0, "fa3rt_quantize: descale is NULL");
  QBAD(a.descale = 0x600002, "descale 0x600002 is not 4-byte aligned");
  QBAD(a.signs = 0x700004, "signs 0x700004 is not 16-byte aligned (read 4 floats at a time)");
  QBAD((a.per_head = 1, a.workspace = 0), "fa3rt_quantize: workspace is NULL");
  QBAD(a.y.ptr = a.x.ptr + 4096, "y (0x101000) overlaps x (0x100000)");
  QBAD(a.descale = a.x.ptr + 64, "descale (0x100040) overlaps x (0x100000): the kernel writes "
       "descale while it reads or writes x");
  QBAD((a.per_head = 1, a.workspace = a.descale + 32),
       "workspace (0x600020) overlaps descale (0x600000)");
  a = quantize_args();
  a.per_head = 1;
  a.workspace = a.descale + 64;   /* just past [B, H] descales: fine */
  EXPECT(fa3rt_quantize(k, &a, NULL) == FA3RT_OK);
  QBAD((a.x.shape[2] = a.y.shape[2] = 65536 * 128 + 1,
        a.x.strides[0] = a.y.strides[0] = (65536LL * 128 + 1) * 8 * 128),
       "S = 8388609 is more than 65535 blocks of 128 rows (the grid's y extent)");
  QBAD(a.x.shape[0] = -1, "x.shape[0] (B): -1 is out of range");
#undef QBAD
  a = quantize_args();
  EXPECT(err_is(fa3rt_quantize(NULL, &a, NULL), FA3RT_ERR_INVALID_ARGUMENT, "NULL kernel"));
  EXPECT(err_is(fa3rt_quantize(k, NULL, NULL), FA3RT_ERR_INVALID_ARGUMENT, "NULL kernel or args"));
  fa3rt_kernel_destroy(k);

  /* an FP8 cubin without the quantization: refused at load */
  fa3rt_kernel *k2 = (fa3rt_kernel *)0x1;
  g_missing = "_quantize";
  EXPECT(err_is(fa3rt_kernel_load_data(cubin, sizeof cubin, kFp8Facts, strlen(kFp8Facts), &k2),
                FA3RT_ERR_FACTS, "the cubin of FP8 kernel 'fa3_fwd_d128_e4m3_kernel' (facts dtype "
                "e4m3) has no kernel named 'fa3_fwd_d128_e4m3_kernel_quantize'"));
  EXPECT(k2 == NULL);
  g_missing = NULL;

  /* a bf16 kernel has none */
  k = NULL;
  EXPECT(fa3rt_kernel_load_data(cubin, sizeof cubin, kFacts, strlen(kFacts), &k) == FA3RT_OK);
  if (k) {
    EXPECT(err_is(fa3rt_quantize(k, &a, NULL), FA3RT_ERR_INVALID_ARGUMENT,
                  "kernel fa3_fwd_d128_bf16_causal is bf16; the quantization is part of the FP8 "
                  "kernels"));
    fa3rt_kernel_destroy(k);
  }
  fake_reset(0);
}

static void test_no_gpu(void) {
  /* No driver here (link stub): loading must fail cleanly with a CUDA message. */
  fa3rt_kernel *k = (fa3rt_kernel *)0x1;
  const char dummy[16] = {0};
  fa3rt_status st = fa3rt_kernel_load_data(dummy, sizeof dummy, kFacts, strlen(kFacts), &k);
  EXPECT(st == FA3RT_ERR_CUDA || st == FA3RT_ERR_UNSUPPORTED_DEVICE);
  EXPECT(k == NULL);
  if (st == FA3RT_ERR_CUDA) {
    EXPECT(strstr(fa3rt_last_error(), "cuInit(0) failed: ") == fa3rt_last_error());
    EXPECT(strstr(fa3rt_last_error(), "(kernel fa3_fwd_d128_bf16_causal)") != NULL);
  }
  printf("no-GPU load error: %s\n", fa3rt_last_error());
  EXPECT(err_is(fa3rt_kernel_load("/nonexistent.cubin", "/nonexistent.facts", &k), FA3RT_ERR_IO,
                "cannot open facts file '/nonexistent.facts'"));
  fa3rt_fwd_args a = good_args();
  EXPECT(err_is(fa3rt_fwd(NULL, &a, NULL), FA3RT_ERR_INVALID_ARGUMENT, "NULL kernel"));
  fa3rt_kernel_destroy(NULL);
  /* a decoding kernel's load fails the same way, before its _combine */
  k = (fa3rt_kernel *)0x1;
  st = fa3rt_kernel_load_data(dummy, sizeof dummy, kDecFacts, strlen(kDecFacts), &k);
  EXPECT((st == FA3RT_ERR_CUDA || st == FA3RT_ERR_UNSUPPORTED_DEVICE) && k == NULL);
}

/* Pages of at most FA3RT_COPY_ROWS rows (facts copy_rows where given),
   fewer than the kernel's kv tile:
   the launch gives a paged kernel built to copy them (facts paged_copy 1: the
   decoding kernel's, a paged packed batch's) the pools' bases, byte
   strides and page count (its producer warps copy such pages by
   cp.async); NULL to other kernels, for larger pages, where K's and V's
   strides differ, and for a pool of more than 2^36 bytes. */
static void test_paged_copy(void) {
  char copying[4096];
  snprintf(copying, sizeof copying, "%spaged_copy 1\n", kDecFacts);
  fa3rt_facts f;
  EXPECT(fa3rt_facts_parse(copying, strlen(copying), &f) == FA3RT_OK && f.paged_copy == 1);
  EXPECT(fa3rt_facts_parse(kDecFacts, strlen(kDecFacts), &f) == FA3RT_OK && f.paged_copy == 0);
  /* the copies are the paged kernels' */
  char *plain = copied(text_with(copying, "split_kv", "split_kv 0"));
  char *plainer = plain ? copied(text_with(plain, "pack_gqa", "pack_gqa 0")) : NULL;
  EXPECT(plainer && err_is(fa3rt_facts_parse(plainer, strlen(plainer), &f), FA3RT_ERR_FACTS,
                          "paged_copy 1 needs split_kv 1 or paged_kv 1"));
  free(plain);
  free(plainer);
  /* a paged packed batch's kernel (block_n 128) copies pages of 16 rows
     of its one list of pages, boxes those of 32 */
  char *varlen = paged_varlen_facts();
  char packed[4096];
  snprintf(packed, sizeof packed, "%spaged_copy 1\n", varlen ? varlen : "");
  free(varlen);
  EXPECT(fa3rt_facts_parse(packed, strlen(packed), &f) == FA3RT_OK && f.paged_copy == 1 &&
         f.paged_kv == 1);
  fa3rt_kernel *pk = fake_load(packed);
  if (pk) {
    fa3rt_fwd_args pa = paged_varlen_args(3, 300, 40, 16, 8);
    EXPECT(fa3rt_fwd(pk, &pa, NULL) == FA3RT_OK && g_fwd.pagedK == 0x200000 &&
           g_fwd.pagedV == 0x300000 && g_fwd.pagedStridePage == 32768 &&
           g_fwd.pagedStrideRow == 2048 && g_fwd.pagedStrideHead == 256 &&
           g_fwd.pagedPages == 40 && g_fwd.pageSize == 16);
    pa = paged_varlen_args(3, 300, 20, 32, 4);
    EXPECT(fa3rt_fwd(pk, &pa, NULL) == FA3RT_OK && g_fwd.pagedK == 0 &&
           g_fwd.pagedPages == 0 && g_fwd.pageSize == 32);
    fa3rt_kernel_destroy(pk);
  }
  /* a kernel built without the copies (facts without paged_copy: head dim
     192's, or one older than them) gets TMA boxes of any page */
  fa3rt_kernel *k = fake_load(kDecFacts);
  if (!k) return;
  fa3rt_fwd_args a = paged_args(1, 32, 8, 64, 16, 64);
  a.num_splits = 1;
  EXPECT(fa3rt_fwd(k, &a, NULL) == FA3RT_OK && g_fwd.pagedK == 0 && g_fwd.pagedV == 0 &&
         g_fwd.pagedStridePage == 0 && g_fwd.pagedPages == 0 && g_fwd.pageSize == 16);
  fa3rt_kernel_destroy(k);
  k = fake_load(copying); /* block_n 128 */
  if (!k) return;
  a = paged_args(1, 32, 8, 64, 16, 64);
  a.num_splits = 1;
  /* pool [64 pages, 16 rows, 8 heads, 128] bf16: 32768-byte pages */
  EXPECT(fa3rt_fwd(k, &a, NULL) == FA3RT_OK && g_fwd.pagedK == 0x200000 &&
         g_fwd.pagedV == 0x300000 && g_fwd.pagedStridePage == 32768 &&
         g_fwd.pagedStrideRow == 2048 && g_fwd.pagedStrideHead == 256 &&
         g_fwd.pagedPages == 64 && g_fwd.pageSize == 16);
  EXPECT(!strcmp(kFwdParamNames[NFWDPARAMS - 1], "pagedPages") &&
         g_raw[NFWDPARAMS - 1] == 64 && g_raw[NFWDPARAMS - 6] == 0x200000);
  a = paged_args(1, 32, 8, 64, 1, 1024); /* SGLang's pages of one row */
  a.num_splits = 1;
  EXPECT(fa3rt_fwd(k, &a, NULL) == FA3RT_OK && g_fwd.pagedK == 0x200000 &&
         g_fwd.pagedStridePage == 2048 && g_fwd.pageSize == 1);
  /* pages of 32 rows (more than FA3RT_COPY_ROWS): TMA boxes, as fast or
     faster there */
  a = paged_args(1, 32, 8, 64, 32, 32);
  a.num_splits = 1;
  EXPECT(fa3rt_fwd(k, &a, NULL) == FA3RT_OK && g_fwd.pagedK == 0 && g_fwd.pagedPages == 0 &&
         g_fwd.pageSize == 32);
  /* a decoding kernel of 64-key tiles copies pages of 16 rows too (a
     quarter of its tile), boxes pages of a whole tile */
  fa3rt_kernel *k64 = fake_load(text_with(copying, "block_n", "block_n 64"));
  if (k64) {
    a = paged_args(1, 32, 8, 64, 16, 64);
    a.num_splits = 1;
    EXPECT(fa3rt_fwd(k64, &a, NULL) == FA3RT_OK && g_fwd.pagedK == 0x200000 &&
           g_fwd.pagedPages == 64 && g_fwd.pageSize == 16);
    a = paged_args(1, 32, 8, 64, 64, 16);
    a.num_splits = 1;
    EXPECT(fa3rt_fwd(k64, &a, NULL) == FA3RT_OK && g_fwd.pagedK == 0 && g_fwd.pageSize == 64);
    fa3rt_kernel_destroy(k64);
  }
  /* a page of a whole tile: TMA boxes */
  a = paged_args(1, 32, 8, 64, 128, 8);
  a.num_splits = 1;
  EXPECT(fa3rt_fwd(k, &a, NULL) == FA3RT_OK && g_fwd.pagedK == 0 && g_fwd.pagedV == 0 &&
         g_fwd.pagedStridePage == 0 && g_fwd.pagedPages == 0 && g_fwd.pageSize == 128);
  /* V's rows laid out otherwise than K's */
  a = paged_args(1, 32, 8, 64, 16, 64);
  a.num_splits = 1;
  a.v.strides[0] *= 2;
  EXPECT(fa3rt_fwd(k, &a, NULL) == FA3RT_OK && g_fwd.pagedK == 0 && g_fwd.pageSize == 16);
  /* a pool of 2^22 pages of 32 KiB (2^37 bytes): past 16-byte offsets in
     32 bits */
  a = paged_args(1, 32, 8, 1L << 22, 16, 64);
  a.num_splits = 1;
  EXPECT(fa3rt_fwd(k, &a, NULL) == FA3RT_OK && g_fwd.pagedK == 0);
  a = paged_args(1, 32, 8, 1L << 21, 16, 64); /* 2^36 bytes: copied */
  a.num_splits = 1;
  EXPECT(fa3rt_fwd(k, &a, NULL) == FA3RT_OK && g_fwd.pagedK == 0x200000 &&
         g_fwd.pagedPages == 1 << 21);
  /* a contiguous cache */
  a = dec_args(3, 1, 32, 8, 4096);
  a.num_splits = 1;
  EXPECT(fa3rt_fwd(k, &a, NULL) == FA3RT_OK && g_fwd.pagedK == 0 && g_fwd.pageSize == 0);
  fa3rt_kernel_destroy(k);
  /* facts copy_rows (FP8 decoding's four copying warps: 64): pages of up
     to that many rows copied, still fewer than block_n; only beside
     paged_copy 1, in range */
  char rows64[4096 + 16];
  snprintf(rows64, sizeof rows64, "%scopy_rows 64\n", copying);
  EXPECT(fa3rt_facts_parse(rows64, strlen(rows64), &f) == FA3RT_OK && f.copy_rows == 64);
  EXPECT(fa3rt_facts_parse(copying, strlen(copying), &f) == FA3RT_OK && f.copy_rows == 0);
  char *alone = copied(text_with(rows64, "paged_copy", "paged_copy 0"));
  EXPECT(alone && err_is(fa3rt_facts_parse(alone, strlen(alone), &f), FA3RT_ERR_FACTS,
                         "copy_rows 64 needs paged_copy 1"));
  free(alone);
  char *wide = copied(text_with(rows64, "copy_rows", "copy_rows 257"));
  EXPECT(wide && err_is(fa3rt_facts_parse(wide, strlen(wide), &f), FA3RT_ERR_FACTS,
                        "copy_rows"));
  free(wide);
  k = fake_load(rows64); /* block_n 128 */
  if (k) {
    const long sizes[] = {16, 32, 64, 128};
    for (int i = 0; i < 4; ++i) {
      a = paged_args(1, 32, 8, 4096 / sizes[i], sizes[i], 1024 / sizes[i]);
      a.num_splits = 1;
      const int copies = sizes[i] <= 64;
      EXPECT(fa3rt_fwd(k, &a, NULL) == FA3RT_OK && (g_fwd.pagedK == 0x200000) == copies &&
             g_fwd.pagedPages == (copies ? 4096 / sizes[i] : 0) && g_fwd.pageSize == sizes[i]);
    }
    fa3rt_kernel_destroy(k);
  }
  fake_reset(0);
}

/* A left-padded cache (FlashAttention's cache_leftpad): leftpad_k, int32
   [B] on the device, reaches the kernel as leftPadK (the .def's
   parameter before the small pages') for split_kv kernels, beside seqused_k or alone, with an
   append, and with pages that hold a batch's whole cache; refused by the
   other kernels, misaligned, with pages a batch spans, or overlapping
   seqlens_out. */
static void test_leftpad(void) {
  fa3rt_facts f;
  EXPECT(fa3rt_facts_parse(kDecFacts, strlen(kDecFacts), &f) == FA3RT_OK);
  fa3rt_fwd_launch L;
  fa3rt_fwd_args a = dec_args(3, 1, 32, 8, 4096);
  a.leftpad_k = 0xd00000;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK);
  a.seqused_k = 0x800000;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK);
  a.leftpad_k = 0xd00004; /* 4 bytes suffice */
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK);
  a.leftpad_k = 0xd00002;
  EXPECT(err_is(fa3rt_fwd_plan(&f, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "leftpad_k pointer 0xd00002 is not a 4-byte aligned device address of 3 int32 "
                "(one per batch) below 2^63"));
  a.leftpad_k = (1ULL << 63) - 8; /* 3 int32 do not fit below 2^63 */
  EXPECT(err_is(fa3rt_fwd_plan(&f, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "leftpad_k pointer 0x7ffffffffffffff8"));
  /* with an append: apart from seqlens_out, which the append writes */
  a = append_args(3, 5);
  a.leftpad_k = 0xd00000;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK);
  a.leftpad_k = 0xc00008; /* seqlens_out's third entry */
  EXPECT(err_is(fa3rt_fwd_plan(&f, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "leftpad_k (0xc00008) overlaps seqlens_out (0xc00000)"));
  a.leftpad_k = 0xc0000c; /* just past it */
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK);
  /* pages: each batch's keys in its first page (cache_batch_idx's one page
     a batch), not a table whose batches span pages */
  a = paged_args(3, 32, 8, 5, 1024, 1);
  a.leftpad_k = 0xd00000;
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK && L.Skv == 1024);
  a = paged_args(3, 32, 8, 40, 64, 16);
  a.leftpad_k = 0xd00000;
  EXPECT(err_is(fa3rt_fwd_plan(&f, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "leftpad_k with a page table whose batches span pages (logical Skv 1024 > "
                "page_size 64)"));
  a.paged_seqlen_k = 64; /* one page a batch after all */
  EXPECT(fa3rt_fwd_plan(&f, &a, &L) == FA3RT_OK);
  /* a kernel without split_kv */
  fa3rt_facts fwd;
  EXPECT(fa3rt_facts_parse(kFacts, strlen(kFacts), &fwd) == FA3RT_OK);
  a = good_args();
  a.leftpad_k = 0xd00000;
  EXPECT(err_is(fa3rt_fwd_plan(&fwd, &a, &L), FA3RT_ERR_INVALID_ARGUMENT,
                "kernel fa3_fwd_d128_bf16_causal takes no leftpad_k (facts split_kv 0): a "
                "left-padded KV cache needs a decoding kernel"));
  /* the launch: its parameter, and NULL without it */
  fa3rt_kernel *k = fake_load(kDecFacts);
  if (!k) return;
  a = dec_args(3, 1, 32, 8, 4096);
  a.num_splits = 1;
  a.leftpad_k = 0xd00000;
  EXPECT(fa3rt_fwd(k, &a, NULL) == FA3RT_OK && g_fwd.leftPadK == 0xd00000);
  EXPECT(NFWDPARAMS - 7 < (int)FAKE_NPARAMS && g_raw[NFWDPARAMS - 7] == 0xd00000 &&
         !strcmp(kFwdParamNames[NFWDPARAMS - 7], "leftPadK"));
  a.leftpad_k = 0;
  EXPECT(fa3rt_fwd(k, &a, NULL) == FA3RT_OK && g_fwd.leftPadK == 0);
  fa3rt_kernel_destroy(k);
  fake_reset(0);
}

int main(void) {
  test_facts();
  test_facts_grammar();
  test_plan();
  test_backward_facts();
  test_bwd_plan();
  test_deterministic();
  test_min_seqlen_q();
  test_bwd_launch_grids();
  test_decode_facts();
  test_split_heuristic();
  test_decode_plan();
  test_paged_plan();
  test_paged_varlen_plan();
  test_append_plan();
  test_append_launch();
  test_leftpad();
  test_paged_copy();
  test_ctas_per_sm();
  test_fp8_facts();
  test_fp8_plan();
  test_no_gpu();
  test_fwd_launch_array();
  test_tile_counter_slots();
  test_quantize();
  printf("%d checks, %d failed\n", g_n, g_fail);
  return g_fail ? 1 : 0;
}
