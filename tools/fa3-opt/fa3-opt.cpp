//===- fa3-opt.cpp - the FA3-MLIR optimizer driver ------------------------===//
//
// Like mlir-opt, with the attn dialect and its passes and pipelines added.
//
//===----------------------------------------------------------------------===//

#include "fa3/InitAll.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  fa3::registerAllDialects(registry);
  fa3::registerAllPasses();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv,
      "FA3-MLIR optimizer: lowers attn.flash_attention to CPU loops or to a "
      "Hopper (sm_90a) kernel\n",
      registry));
}
