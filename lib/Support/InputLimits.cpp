//===- InputLimits.cpp - what input the tools accept ----------------------===//

#include "fa3/Support/InputLimits.h"

#include <algorithm>

int fa3::nestingDepth(llvm::StringRef text) {
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

std::string fa3::checkInputLimits(llvm::StringRef text) {
  int depth = nestingDepth(text);
  if (depth <= kMaxNesting)
    return "";
  return "brackets nested " + std::to_string(depth) +
         " levels deep; at most " + std::to_string(kMaxNesting) +
         " are accepted (MLIR's parser and passes recurse per level)";
}
