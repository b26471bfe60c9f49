//===- InputLimits.h - what input the tools accept --------------*- C++ -*-===//
//
// MLIR's parser, verifier and walks recurse once per level of nesting, so
// input nested thousands of levels deep overflows the stack (a crash, not a
// diagnostic). Every entry point that parses user text checks this first.
//
//===----------------------------------------------------------------------===//
#ifndef FA3_SUPPORT_INPUTLIMITS_H
#define FA3_SUPPORT_INPUTLIMITS_H

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace fa3 {
/// Deepest bracket nesting accepted. Real IR stays far below it; the stack
/// overflowed near 3,000 nested regions (6,000 brackets).
constexpr int kMaxNesting = 1000;

/// The deepest nesting of ( [ { < in `text`, outside string literals and
/// // comments ('->' is not a bracket): an upper bound is enough.
int nestingDepth(llvm::StringRef text);

/// Why `text` is refused ("" if it is not).
std::string checkInputLimits(llvm::StringRef text);

/// `s` is a C identifier (letters, digits and '_', not starting with a
/// digit): what kernel names must be, since they become PTX symbols and
/// file names.
inline bool isCIdentifier(llvm::StringRef s) {
  return !s.empty() && !llvm::isDigit(s[0]) &&
         llvm::all_of(s, [](char c) { return llvm::isAlnum(c) || c == '_'; });
}
} // namespace fa3

#endif
