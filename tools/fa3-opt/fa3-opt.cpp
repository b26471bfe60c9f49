//===- fa3-opt.cpp - the FA3-MLIR optimizer driver ------------------------===//
//
// Like mlir-opt, with the attn dialect and its passes and pipelines added,
// and one guard in front: MLIR's parser, verifier and walks recurse once per
// level of nesting, so an input nested thousands of levels deep would
// overflow the stack; such input is refused with a message instead.
//
//===----------------------------------------------------------------------===//

#include "fa3/InitAll.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <unistd.h>

namespace {
/// Deepest bracket nesting fa3-opt accepts. Real IR stays far below it; the
/// stack overflowed near 3,000 nested regions (6,000 brackets).
constexpr int kMaxNesting = 1000;

/// The deepest nesting of ( [ { < in `text`, outside string literals and
/// // comments ('->' is not a bracket). An upper bound is enough here.
int nestingDepth(llvm::StringRef text) {
  int depth = 0, deepest = 0;
  for (size_t i = 0, n = text.size(); i < n; ++i) {
    char c = text[i];
    if (c == '"') { // string literal, with backslash escapes
      for (++i; i < n && text[i] != '"'; ++i)
        if (text[i] == '\\')
          ++i;
    } else if (c == '/' && i + 1 < n && text[i + 1] == '/') {
      while (i < n && text[i] != '\n')
        ++i;
    } else if (c == '(' || c == '[' || c == '{' || c == '<') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ')' || c == ']' || c == '}' ||
               (c == '>' && (i == 0 || text[i - 1] != '-'))) {
      depth = std::max(0, depth - 1);
    }
  }
  return deepest;
}

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
  int depth = nestingDepth(file->getBuffer());
  if (depth > kMaxNesting) {
    llvm::errs() << (input == "-" ? "<stdin>" : input)
                 << ": error: brackets nested " << depth
                 << " levels deep; fa3-opt accepts at most " << kMaxNesting
                 << " (MLIR's parser and passes recurse per level)\n";
    return 1;
  }
  if (input == "-" && !restoreStdin(file->getBuffer())) {
    llvm::errs() << "fa3-opt: cannot buffer standard input\n";
    return 1;
  }
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, input, output, registry));
}
