// tpbatch: an MPI-launched batch inference job runner. Subcommands: run (default), plan, inspect,
// make-model. (Being built; see README.)
#include <cstdio>
int main() { std::puts("tpbatch " TPBATCH_VERSION); return 0; }
