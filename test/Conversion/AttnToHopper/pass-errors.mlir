// What convert-attn-to-hopper refuses: untiled input, tiles without a
// configuration, a recorded configuration the kernel cannot take, and a
// host function doing other work. (The options' errors are
// attn-hopper-config's: hopper-config.mlir.)
// RUN: not fa3-opt %s --convert-attn-to-hopper 2>&1 | FileCheck %s --check-prefix=UNTILED
// RUN: not fa3-opt %s --attn-tile --convert-attn-to-hopper 2>&1 | FileCheck %s --check-prefix=NOCONFIG
// UNTILED: error: 'attn.flash_attention' op convert-attn-to-hopper needs the tiled form: run attn-hopper-config and attn-tile first
// NOCONFIG: error: cannot generate the Hopper kernel: its tiles carry no configuration (attn.hopper_config on attn.kv_range): run attn-hopper-config before attn-tile

// A configuration written by hand is checked as the table's choices are:
// K/V multicast needs a full mask, ping-pong two consumer warpgroups.
// RUN: sed -e 's/outs(%o : memref<1x2x64x128xbf16>)/& causal {attn.hopper_config = #attn.hopper_config<block_m = 128, block_n = 128, stages = 2, persistent = true, q_buffers = 2, lazy_rescale = true, rescale_threshold = 8.0, cluster_m = 2, pingpong = true, tma_store = true>}/' %s | not fa3-opt --attn-tile --convert-attn-to-hopper 2>&1 | FileCheck %s --check-prefix=MCAST
// RUN: sed -e 's/outs(%o : memref<1x2x64x128xbf16>)/& {attn.hopper_config = #attn.hopper_config<block_m = 192, block_n = 128, stages = 2, persistent = true, q_buffers = 1, lazy_rescale = true, rescale_threshold = 8.0, cluster_m = 1, pingpong = true, tma_store = true>}/' -e 's/x128xbf16/x64xbf16/g' %s | not fa3-opt --attn-tile --convert-attn-to-hopper 2>&1 | FileCheck %s --check-prefix=TURNS
// MCAST: error: cannot generate the Hopper kernel: unsupported K/V multicast with a causal or window mask (the two CTAs of a cluster share each K/V tile, so they must visit the same kv blocks: only a full mask guarantees that)
// TURNS: error: cannot generate the Hopper kernel: unsupported ping-pong with block-m 192 (the turns alternate between two consumer warpgroups: block-m 128)
func.func @attn(%q: memref<1x2x64x128xbf16>, %o: memref<1x2x64x128xbf16>) {
  attn.flash_attention ins(%q, %q, %q : memref<1x2x64x128xbf16>, memref<1x2x64x128xbf16>, memref<1x2x64x128xbf16>) outs(%o : memref<1x2x64x128xbf16>)
  return
}

// RUN: not fa3-opt %S/Inputs/other-work.mlir --attn-hopper-config --attn-tile --convert-attn-to-hopper 2>&1 | FileCheck %s --check-prefix=LOST
// LOST: error: 'memref.store' op would be lost: convert-attn-to-hopper replaces @mixed by its attention kernels; keep other work out of that function
