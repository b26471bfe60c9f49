//===- Passes.td - hopper dialect passes -----------------------*- tablegen -*-===//

#ifndef FA3_HOPPER_PASSES
#define FA3_HOPPER_PASSES

include "mlir/Pass/PassBase.td"

def HopperPingPong : Pass<"hopper-pingpong"> {
  let summary = "Order two consumer warpgroups' wgmma issues (ping-pong)";
  let description = [{
    FA3's warp scheduling: the two consumer warpgroups of a
    `hopper.warp_specialize` marked `hopper.pingpong` take turns to issue
    their warpgroup MMAs, so that one's softmax runs while the other's
    GEMMs do. Each issue window — an `nvvm.wgmma.fence.aligned` and the
    `hopper.wgmma.ss` / `hopper.wgmma.rs` ops right after it — is preceded
    by a sync on the consumer's own turn barrier and followed by an arrive
    on the other's (`hopper.named_barrier` kind `turn`, 256 threads: 128
    syncing, 128 arriving). Both consumers issue as many windows, so the
    turns are balanced by two edges around the consumers' region: consumer 1
    opens consumer 0's first turn at the start, consumer 0 takes the turn
    consumer 1 handed over last at the end (in a persistent kernel the turn
    thus passes on from one tile to the next, and consumer 0 starts an
    epilogue without waiting for consumer 1's last turn). The two consumers
    must run
    the same number of windows (in the kernel they work on one tile, whose
    kv blocks set the count). The marker is removed.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::scf::SCFDialect"];
}

#endif // FA3_HOPPER_PASSES
