/* An out-of-tree user of the installed runtime (target FA3MLIR::runtime):
 * reads a kernel's launch facts, as fa3-consumer wrote them, and plans a
 * launch for batch 2, 16 heads, 4096 queries and keys (BSHD storage)
 * without a GPU: what fa3rt_fwd checks and derives before it launches.
 * Running it needs the CUDA driver's libcuda.so.1 (libfa3rt.so links it),
 * not a GPU.
 *
 * Usage: fa3-consumer-plan KERNEL.facts
 */
#include "fa3rt.h"

#include <stdio.h>

static fa3rt_tensor bshd(uint64_t ptr, int64_t b, int64_t h, int64_t s,
                         int64_t d) {
  fa3rt_tensor t = {ptr, {b, h, s, d}, {s * h * d, d, h * d, 1}};
  return t;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: fa3-consumer-plan KERNEL.facts\n");
    return 2;
  }
  fa3rt_facts facts;
  if (fa3rt_facts_load(argv[1], &facts) != FA3RT_OK) {
    fprintf(stderr, "fa3-consumer-plan: %s\n", fa3rt_last_error());
    return 1;
  }
  const int64_t B = 2, H = 16, S = 4096, D = facts.head_dim;
  fa3rt_fwd_args args = {0};
  args.dtype = facts.dtype;
  /* Device addresses are only checked for alignment when planning. */
  args.q = bshd(1u << 20, B, H, S, D);
  args.k = bshd(2u << 20, B, H, S, D);
  args.v = bshd(3u << 20, B, H, S, facts.head_dim_v);
  args.o = bshd(4u << 20, B, H, S, facts.head_dim_v);
  fa3rt_fwd_launch launch;
  if (fa3rt_fwd_plan(&facts, &args, &launch) != FA3RT_OK) {
    fprintf(stderr, "fa3-consumer-plan: %s\n", fa3rt_last_error());
    return 1;
  }
  printf("%s: %s head dim %d%s, grid (%u, %u, %u) x %u threads, %u bytes of "
         "shared memory, scale %g\n",
         facts.kernel, fa3rt_dtype_name(facts.dtype), facts.head_dim,
         facts.causal ? " causal" : "", launch.grid[0], launch.grid[1],
         launch.grid[2], launch.block[0], launch.dynamic_smem, launch.scale);
  return 0;
}
