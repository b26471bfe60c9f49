//===- InitAll.cpp - register everything fa3 tools need -------------------===//

#include "fa3/InitAll.h"
#include "fa3/Conversion/Passes.h"
#include "fa3/Dialect/Attn/IR/AttnDialect.h"
#include "fa3/Dialect/Attn/Transforms/Passes.h"
#include "fa3/Dialect/Hopper/IR/HopperDialect.h"
#include "fa3/Dialect/Hopper/Transforms/Passes.h"
#include "fa3/Pipelines/Pipelines.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"

void fa3::registerAllDialects(mlir::DialectRegistry &registry) {
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::registerAllToLLVMIRTranslations(registry);
  mlir::NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  registry.insert<fa3::attn::AttnDialect, fa3::hopper::HopperDialect>();
  fa3::attn::registerBufferizableOpInterfaceExternalModels(registry);
}

void fa3::registerAllPasses() {
  mlir::registerAllPasses();
  fa3::attn::registerAttnPasses();
  fa3::hopper::registerHopperPasses();
  fa3::registerAttnPipelines();
  fa3::registerFA3ConversionPasses();
}
