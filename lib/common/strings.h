// Small string helpers for parsing settings and rule strings.
#pragma once

#include <string>
#include <vector>

namespace collx {

// Without leading and trailing white space.
std::string trim(const std::string& text);
// Fields between separators, each trimmed; "a;;b" gives {"a", "", "b"}, "" gives {""}.
std::vector<std::string> split_trimmed(const std::string& text, char separator);
// `text` as a JSON string literal, quotes included: '"' and '\\' escaped, control characters
// as \u00XX, every other byte as it is.
std::string json_quote(const std::string& text);

}  // namespace collx
