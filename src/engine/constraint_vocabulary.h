#pragma once
// The bytes each token of a tokenizer writes into the output text, for the constraint engine.
#include <memory>

#include "guided/constraint.h"
#include "tokenizer/tokenizer.h"

namespace tpbatch {

// SentencePiece-style vocabularies (with byte-fallback pieces "<0xHH>"): "▁" is a space and
// "<0xHH>" one byte; byte-level ones (GPT-2 style): each character is the byte it stands for.
// Special tokens write nothing a constraint can match: they are never allowed.
std::shared_ptr<const guided::TokenBytes> constraint_vocabulary(const Tokenizer& tok);

}  // namespace tpbatch
