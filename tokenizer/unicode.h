// Code-point helpers with the exact predicates Hugging Face tokenizers uses (Rust's char
// methods and its Bert helpers), backed by utf8proc's Unicode tables. Input is valid UTF-8
// (validated once at the tokenizer's entry).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace quiver::tokenizer {

// Decodes the code point at s[i] (valid UTF-8) and advances i past it.
char32_t NextCodePoint(std::string_view s, size_t& i);
// Byte length of the UTF-8 sequence starting with lead byte `b`.
inline size_t Utf8Length(uint8_t b) { return b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4; }
void AppendUtf8(char32_t c, std::string& out);
size_t CountCodePoints(std::string_view s);

bool IsWhitespace(char32_t c);      // Rust char::is_whitespace (White_Space property)
bool IsBertWhitespace(char32_t c);  // \t \n \r or whitespace
bool IsBertControl(char32_t c);     // category C* except \t \n \r
bool IsPunctuation(char32_t c);     // ASCII punctuation or category P*
bool IsCombiningMark(char32_t c);   // category M*
bool IsNonspacingMark(char32_t c);  // category Mn
bool IsChineseChar(char32_t c);     // the CJK blocks BERT pads with spaces
bool IsAlphanumeric(char32_t c);    // categories L*, N* (Rust char::is_alphanumeric)
bool IsDigit(char32_t c);           // Rust char::is_numeric (categories Nd, Nl, No)

// Appends Rust's char::to_lowercase(c) (full mapping: U+0130 becomes two code points).
void AppendLowercase(char32_t c, std::string& out);

// Whether an extended grapheme cluster (UAX #29, utf8proc's Unicode version) may end between
// code points a and b, where b follows a. `state` starts at 0 for a text and is passed to every
// call in order.
bool GraphemeBreak(char32_t a, char32_t b, int32_t& state);

enum class NormalizationForm { kNFC, kNFD, kNFKC, kNFKD };
// out = form(in). Pure-ASCII input is returned unchanged without calling utf8proc.
void Normalize(std::string_view in, NormalizationForm form, std::string& out);

}  // namespace quiver::tokenizer
