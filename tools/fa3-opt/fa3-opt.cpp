//===- fa3-opt.cpp - the FA3-MLIR optimizer driver ------------------------===//
//
// Like mlir-opt, with the attn dialect and its passes and pipelines added,
// and one guard in front: input nested deeper than fa3::kMaxNesting is
// refused with a message (fa3/Support/InputLimits.h) instead of overflowing
// the stack in the parser.
//
//===----------------------------------------------------------------------===//

#include "fa3/InitAll.h"
#include "fa3/Support/InputLimits.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <unistd.h>

namespace {
/// Puts `bytes` back as standard input (MlirOptMain reads it from fd 0).
bool restoreStdin(llvm::StringRef bytes) {
  std::FILE *tmp = std::tmpfile();
  if (!tmp)
    return false;
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), tmp) == bytes.size() &&
            std::fflush(tmp) == 0 && std::fseek(tmp, 0, SEEK_SET) == 0 &&
            dup2(fileno(tmp), STDIN_FILENO) >= 0;
  return ok; // the FILE stays open: fd 0 now shares its file
}
} // namespace

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  fa3::registerAllDialects(registry);
  fa3::registerAllPasses();
  auto [input, output] = mlir::registerAndParseCLIOptions(
      argc, argv,
      "FA3-MLIR optimizer: lowers attn.flash_attention to CPU loops or to a "
      "Hopper (sm_90a) kernel.\n\n"
      "Our passes and pipelines are the --attn-* and "
      "--convert-attn-to-hopper options below (the rest are MLIR's own);\n"
      "docs/design.md describes each level.\n",
      registry);
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> file = mlir::openInputFile(input, &error);
  if (!file) {
    llvm::errs() << "fa3-opt: " << error << "\n";
    return 1;
  }
  std::string why = fa3::checkInputLimits(file->getBuffer());
  if (!why.empty()) {
    llvm::errs() << (input == "-" ? "<stdin>" : input) << ": error: " << why
                 << "\n";
    return 1;
  }
  if (input == "-" && !restoreStdin(file->getBuffer())) {
    llvm::errs() << "fa3-opt: cannot buffer standard input\n";
    return 1;
  }
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, input, output, registry));
}
