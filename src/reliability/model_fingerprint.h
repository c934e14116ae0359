#pragma once
// A fingerprint of the model folder, so that resume can refuse a model changed since the results
// file was started (weights replaced in place would otherwise mix rows of two models in one file),
// and so that every rank can check it runs the same model as rank 0.
//
// Text form: "NAME=HASH;NAME=HASH;..." over config.json, tokenizer.json (and
// tokenizer_config.json, generation_config.json, model.safetensors.index.json when present) — FNV-1a
// of their bytes — and every *.safetensors file: "size:hash" of its header and of 64 blocks of 4 KiB
// spread over its data (cheap on a 100 GB checkpoint; any in-place re-save changes the header or
// the sampled bytes in practice).
#include <cstddef>
#include <cstdint>
#include <string>

namespace tpbatch {

std::string model_fingerprint(const std::string& model_dir);   // throws Error naming an unreadable file

// "" when equal; else which files differ ("config.json changed, model.safetensors changed").
// A fingerprint in an unknown form compares as text.
std::string model_fingerprint_difference(const std::string& there, const std::string& here);

// A whole file's fingerprint, "<bytes>:<FNV-1a 64, hex>" (a job's chat template: resume refuses a
// template edited since the results file was started). Throws Error naming an unreadable file.
std::string file_fingerprint(const std::string& path);

// FNV-1a 64 of bytes, continuing from h (for fingerprints that must agree across ranks and runs).
uint64_t fnv1a64(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ull);

}  // namespace tpbatch
