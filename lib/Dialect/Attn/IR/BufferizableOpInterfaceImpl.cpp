//===- BufferizableOpInterfaceImpl.cpp - one-shot-bufferize support ------===//
//
// The tensor form of attn.flash_attention is destination-passing, so
// bufferization maps each result onto its `outs` buffer (in place when the
// analysis allows) and rebuilds the op in memref form.
//
//===----------------------------------------------------------------------===//

#include "fa3/Dialect/Attn/IR/AttnDialect.h"

#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Dialect/Bufferization/IR/DstBufferizableOpInterfaceImpl.h"
#include "mlir/IR/DialectRegistry.h"

using namespace mlir;
using namespace mlir::bufferization;
using namespace fa3::attn;

namespace {
struct FlashAttentionBufferizeModel
    : public DstBufferizableOpInterfaceExternalModel<
          FlashAttentionBufferizeModel, FlashAttentionOp> {
  // Inputs are read; outputs are fully overwritten, never read.
  bool bufferizesToMemoryRead(Operation *op, OpOperand &opOperand,
                              const AnalysisState &) const {
    return !cast<DestinationStyleOpInterface>(op).isDpsInit(&opOperand);
  }

  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto fa = cast<FlashAttentionOp>(op);
    SmallVector<Value> buffers;
    for (Value operand : op->getOperands()) {
      FailureOr<Value> buf = getBuffer(rewriter, operand, options, state);
      if (failed(buf))
        return failure();
      buffers.push_back(*buf);
    }
    rewriter.setInsertionPoint(op);
    ValueRange outs = ValueRange(buffers).drop_front(3);
    FlashAttentionOp::create(rewriter, op->getLoc(), TypeRange{}, buffers[0],
                             buffers[1], buffers[2], outs, fa.getScaleAttr(),
                             fa.getCausalAttr(), fa.getWindowAttr(),
                             fa.getSoftcapAttr());
    replaceOpWithBufferizedValues(rewriter, op, outs);
    return success();
  }
};
} // namespace

void fa3::attn::registerBufferizableOpInterfaceExternalModels(
    DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, AttnDialect *) {
    FlashAttentionOp::attachInterface<FlashAttentionBufferizeModel>(*ctx);
  });
}
