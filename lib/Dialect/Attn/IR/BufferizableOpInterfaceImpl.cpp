//===- BufferizableOpInterfaceImpl.cpp - one-shot-bufferize support ------===//
//
// The tensor forms of attn.flash_attention, flash_attention_varlen,
// flash_attention_grad and quantize are destination-passing, so bufferization maps each result onto its
// `outs` buffer (in place when the analysis allows) and rebuilds the op in
// memref form.
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
/// The memref form of `op` on `buffers` (its operands' buffers, in order).
void createOnBuffers(RewriterBase &rewriter, FlashAttentionOp op,
                     ValueRange buffers) {
  size_t nd = op.getDescales().size();
  FlashAttentionOp::create(rewriter, op->getLoc(), TypeRange{}, buffers[0],
                           buffers[1], buffers[2], buffers.slice(3, nd),
                           buffers.drop_front(3 + nd), op.getScaleAttr(),
                           op.getCausalAttr(), op.getWindowAttr(),
                           op.getSoftcapAttr());
}
void createOnBuffers(RewriterBase &rewriter, FlashAttentionVarlenOp op,
                     ValueRange buffers) {
  unsigned ins = op.getSequsedK() ? 6 : 5;
  FlashAttentionVarlenOp::create(
      rewriter, op->getLoc(), TypeRange{}, buffers[0], buffers[1], buffers[2],
      buffers[3], buffers[4], op.getSequsedK() ? buffers[5] : Value(),
      buffers.drop_front(ins), op.getScaleAttr(), op.getCausalAttr(),
      op.getWindowAttr(), op.getSoftcapAttr());
}
void createOnBuffers(RewriterBase &rewriter, FlashAttentionGradOp op,
                     ValueRange buffers) {
  FlashAttentionGradOp::create(
      rewriter, op->getLoc(), TypeRange{}, buffers[0], buffers[1], buffers[2],
      buffers[3], buffers[4], buffers[5], buffers.drop_front(6),
      op.getScaleAttr(), op.getCausalAttr(), op.getWindowAttr(),
      op.getSoftcapAttr(), op.getDeterministicAttr());
}
void createOnBuffers(RewriterBase &rewriter, QuantizeOp op,
                     ValueRange buffers) {
  unsigned ins = op.getSigns() ? 2 : 1;
  QuantizeOp::create(rewriter, op->getLoc(), TypeRange{}, buffers[0],
                     op.getSigns() ? buffers[1] : Value(),
                     buffers.drop_front(ins), op.getBlockAttr());
}

/// Whether the op writes every element of its outputs: the varlen form
/// leaves the tokens past its last sequence as they were, so its outputs
/// are read too (an out-of-place buffer then starts as a copy).
template <typename OpT> constexpr bool kOverwritesOutputs = true;
template <>
constexpr bool kOverwritesOutputs<FlashAttentionVarlenOp> = false;

template <typename OpT>
struct AttentionBufferizeModel
    : public DstBufferizableOpInterfaceExternalModel<
          AttentionBufferizeModel<OpT>, OpT> {
  // Inputs are read; outputs are read only where not fully overwritten.
  bool bufferizesToMemoryRead(Operation *op, OpOperand &opOperand,
                              const AnalysisState &) const {
    return !kOverwritesOutputs<OpT> ||
           !cast<DestinationStyleOpInterface>(op).isDpsInit(&opOperand);
  }

  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    SmallVector<Value> buffers;
    for (Value operand : op->getOperands()) {
      FailureOr<Value> buf = getBuffer(rewriter, operand, options, state);
      if (failed(buf))
        return failure();
      buffers.push_back(*buf);
    }
    rewriter.setInsertionPoint(op);
    auto dps = cast<DestinationStyleOpInterface>(op);
    ValueRange outs =
        ValueRange(buffers).drop_front(dps.getNumDpsInputs());
    createOnBuffers(rewriter, cast<OpT>(op), buffers);
    replaceOpWithBufferizedValues(rewriter, op, outs);
    return success();
  }
};
} // namespace

void fa3::attn::registerBufferizableOpInterfaceExternalModels(
    DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, AttnDialect *) {
    FlashAttentionOp::attachInterface<
        AttentionBufferizeModel<FlashAttentionOp>>(*ctx);
    FlashAttentionGradOp::attachInterface<
        AttentionBufferizeModel<FlashAttentionGradOp>>(*ctx);
    FlashAttentionVarlenOp::attachInterface<
        AttentionBufferizeModel<FlashAttentionVarlenOp>>(*ctx);
    QuantizeOp::attachInterface<AttentionBufferizeModel<QuantizeOp>>(*ctx);
  });
}
