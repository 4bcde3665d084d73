// byte_level.h: GPT-2's reversible map from bytes to printable code points (bytes_to_unicode
// in OpenAI's gpt-2 encoder.py and CLIP's simple_tokenizer.py, ByteLevel in Hugging Face
// tokenizers): the bytes '!'..'~', U+00A1..U+00AC and U+00AE..U+00FF stand for themselves, the
// other 68 bytes for U+0100.. in byte order. BPE vocabularies are written in these code points.
#pragma once

#include <array>
#include <string>

namespace mm::pack {

struct ByteLevelMap {
  std::array<char32_t, 256> code_point{};  // byte -> its code point
  std::array<std::string, 256> utf8;       // byte -> that code point in UTF-8
  std::array<int, 256> order{};            // byte -> its place in bytes_to_unicode's order
};

/// The map (built once, immutable, thread-safe).
const ByteLevelMap& GetByteLevelMap();

}  // namespace mm::pack
