//===- ParamsByValue.cpp - tensor maps as __grid_constant__ params --------===//
//
// attn-kernel-params-by-value: the kernel parameters that fa3rt_abi.def
// passes by value become byval __grid_constant__ arguments of the lowered
// llvm.func kernel (Passes.td says why this is a pass of its own).
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"
#include "fa3/Conversion/Passes.h"

#include "llvm/ADT/STLExtras.h"

namespace fa3 {
#define GEN_PASS_DEF_ATTNKERNELPARAMSBYVALUE
#include "fa3/Conversion/Passes.h.inc"
} // namespace fa3

using namespace mlir;

namespace {
struct AttnKernelParamsByValuePass
    : public fa3::impl::AttnKernelParamsByValueBase<
          AttnKernelParamsByValuePass> {
  void runOnOperation() override {
    for (auto fn : getOperation().getOps<LLVM::LLVMFuncOp>())
      if (auto launch = fn->getAttrOfType<DictionaryAttr>("attn.launch"))
        if (failed(markByValue(fn, launch)))
          return signalPassFailure();
  }

  LogicalResult markByValue(LLVM::LLVMFuncOp fn, DictionaryAttr launch) {
    if (!fn->hasAttr(NVVM::NVVMDialect::getKernelFuncAttrName()))
      return fn.emitError("attn.launch on a function that is not an NVVM "
                          "kernel: run this pass after gpu-to-nvvm");
    // The forward's parameters, or with `backward` the backward's.
    auto backward = launch.getAs<BoolAttr>("backward");
    if (backward && backward.getValue())
      return markByValue(fn, launch, fa3::hopper::kGradKernelParams);
    return markByValue(fn, launch, fa3::hopper::kKernelParams);
  }

  template <size_t N>
  LogicalResult markByValue(LLVM::LLVMFuncOp fn, DictionaryAttr launch,
                            const fa3::hopper::KernelParam (&abi)[N]) {
    // The facts' parameter list is what the runtime launches with; the
    // kernel's arguments must be those, in the ABI's order.
    auto params = launch.getAs<ArrayAttr>("params");
    auto isAbi = [&] {
      return params && params.size() == N &&
             llvm::all_of(llvm::zip_equal(params, abi),
                          [](auto pair) {
                            auto name = dyn_cast<StringAttr>(std::get<0>(pair));
                            return name && name == std::get<1>(pair).name;
                          });
    };
    if (!isAbi() || fn.getNumArguments() != N)
      return fn.emitError("kernel parameters are not the ABI's "
                          "(runtime/include/fa3rt_abi.def): ")
             << fn.getNumArguments() << " arguments, attn.launch params "
             << (params ? Attribute(params) : Attribute());

    Builder b(fn.getContext());
    auto i8 = b.getI8Type();
    for (auto [i, p] : llvm::enumerate(abi)) {
      if (p.valueBytes == 0)
        continue;
      auto ptr = dyn_cast<LLVM::LLVMPointerType>(fn.getArgumentTypes()[i]);
      if (!ptr || ptr.getAddressSpace() != 0)
        return fn.emitError("parameter ") << p.name << " is passed by value "
               << "and read through a generic !llvm.ptr, but its argument is "
               << fn.getArgumentTypes()[i];
      fn.setArgAttr(i, LLVM::LLVMDialect::getByValAttrName(),
                    TypeAttr::get(LLVM::LLVMArrayType::get(i8, p.valueBytes)));
      fn.setArgAttr(i, LLVM::LLVMDialect::getAlignAttrName(),
                    b.getI64IntegerAttr(p.valueAlign));
      fn.setArgAttr(i, NVVM::NVVMDialect::getGridConstantAttrName(),
                    b.getUnitAttr());
    }
    return success();
  }
};
} // namespace
