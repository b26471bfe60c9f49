// Parsers of hopper ops with !llvm.ptr operands build that type themselves,
// so loading the hopper dialect loads the LLVM dialect too, even for a file
// that names no !llvm type (this input, from the IR fuzzer, crashed
// hopper.tma_load's parser before).
// RUN: not fa3-opt %s 2>&1 | FileCheck %s
// CHECK: error: use of undeclared SSA value name
// CHECK-NOT: Stack dump
!k = !hopper.ring<stages = 2, stage_bytes = 32768, data = 0, full = 65536, empty = 65552, arrivals = 264, cluster = 2>
  hopper.tma_load %map[%x, %x, %x, %x] into %k[%u] at %x multicast 4 : !k
