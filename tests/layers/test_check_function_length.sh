#!/usr/bin/env bash
# The function_length test: no function of src/ or kernels/ is over 80 lines without a comment
# above it saying why it is one function, and the check itself catches a long function, accepts
# one with a reason, and is not fooled by a long data table, braces in strings and comments, a
# constructor's braced member initializers or a braced default argument.
set -euo pipefail
ROOT=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
CHECK="$ROOT/scripts/check_function_length.py"
python3 "$CHECK" "$ROOT"

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/src/common" "$WORK/kernels"
body() { for ((k = 0; k < $1; k++)); do echo "  total += $k;"; done; }
long_function() {  # $1: the comment line above it (may be empty)
  { echo "namespace tp {"
    [ -n "$1" ] && echo "$1"
    echo "int Widget::sum(int total) const {"
    body 85
    echo "  return total;"
    echo "}"
    echo "}  // namespace tp"; } >"$WORK/src/common/a.cpp"
}

long_function ""
if out=$(python3 "$CHECK" "$WORK"); then echo "FAIL: an 88-line function passed"; exit 1; fi
grep -q "^src/common/a.cpp:2: Widget::sum is 88 lines (limit 80)$" <<<"$out" ||
  { echo "FAIL: the report does not name the file, line, function and length: $out"; exit 1; }

long_function "// One function: the steps share every local (a reason)."
python3 "$CHECK" "$WORK" >/dev/null || { echo "FAIL: a long function with a reason was reported"; exit 1; }
long_function "// Sums the widget."
python3 "$CHECK" "$WORK" >/dev/null && { echo "FAIL: a comment that gives no reason was accepted"; exit 1; }

# Not functions, or short ones: a long table, a brace in a string and in a comment, a
# constructor whose member initializers are braced, a class with short inline members.
{ echo "#define OPEN {"
  echo "const int kTable[] = {"
  for ((k = 0; k < 100; k++)); do echo "  $k,"; done
  echo "};"
  echo "struct Box {"
  echo "  Box(int a) : a_{a}, b_{a + 1} { check(\"}\"); }  // a } in a comment"
  echo "  int get() const { return a_; }"
  echo "  int a_, b_;"
  echo "};"
  echo "int f() { const char* s = R\"x({{{)x\"; return s[0]; }"; } >"$WORK/src/common/a.cpp"
python3 "$CHECK" "$WORK" >/dev/null || { echo "FAIL: a table, strings or member initializers were read as a long function"; exit 1; }

# A long function whose parameter has a braced default is still found.
{ echo "int g(std::vector<int> v = {}, int n = 0) {"
  body 85
  echo "}"; } >"$WORK/src/common/a.cpp"
out=$(python3 "$CHECK" "$WORK") && { echo "FAIL: a long function with a braced default argument passed"; exit 1; }
grep -q "^src/common/a.cpp:1: g is 87 lines" <<<"$out" || { echo "FAIL: the function was not named: $out"; exit 1; }

# A __global__ kernel with launch bounds, in kernels/, is checked and named.
{ echo "__global__ void __launch_bounds__(128) my_kernel(float* x) {"
  body 90
  echo "}"; } >"$WORK/kernels/k.cu"
out=$(python3 "$CHECK" "$WORK") && { echo "FAIL: a long kernel passed"; exit 1; }
grep -q "^kernels/k.cu:1: my_kernel is 92 lines" <<<"$out" || { echo "FAIL: the kernel was not named: $out"; exit 1; }
echo "function_length: ok"
