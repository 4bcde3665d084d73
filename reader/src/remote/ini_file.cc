// ini_file.cc: see ini_file.h.
#include "remote/ini_file.h"

#include <ini.h>

#include <cstring>
#include <vector>

#include "mm/internal/file.h"

namespace mm::reader::internal {
namespace {

// Marks a value kept aside: "\x01" + its index. A byte no text file of AWS's holds; a line
// that holds it is refused (LineFeeder::Next).
constexpr char kLongValueMark = '\x01';

// Feeds inih one line at a time (ini_parse_stream's reader), each short enough for its buffer.
struct LineFeeder {
  const std::string* text = nullptr;
  size_t pos = 0;
  int line = 0;
  bool indented = false;  // the line just fed starts with a space or a tab
  std::string fed;        // that line as fed, without its end of line and leading blanks
  std::vector<std::string> long_values;
  std::string error;  // the first problem found here (a control byte, an over-long key)

  // Copies the next line (with its '\n') into `out` of `size` bytes; nullptr at the end.
  char* Next(char* out, int size) {
    if (pos >= text->size()) return nullptr;
    size_t end = text->find('\n', pos);
    end = end == std::string::npos ? text->size() : end + 1;
    std::string line_text = text->substr(pos, end - pos);
    pos = end;
    ++line;
    indented = !line_text.empty() && (line_text[0] == ' ' || line_text[0] == '\t');
    if (line_text.find(kLongValueMark) != std::string::npos && error.empty()) {
      error = "line " + std::to_string(line) + ": a control byte (\\x01)";
    }
    if (line_text.size() + 1 > static_cast<size_t>(size)) line_text = Shorten(line_text, size);
    fed = line_text;
    while (!fed.empty() && std::strchr(" \t\r\n", fed.back())) fed.pop_back();
    fed.erase(0, fed.find_first_not_of(" \t"));
    std::memcpy(out, line_text.data(), line_text.size());
    out[line_text.size()] = '\0';
    return out;
  }

  // "key = <long value>\n" -> "key = \x01N\n", the value kept as long_values[N] (inih strips
  // the spaces around a value; so does this). A line without a delimiter near its start is
  // not one inih could read either: it is cut, and reported.
  std::string Shorten(const std::string& line_text, int size) {
    const size_t delim = line_text.find_first_of("=:");
    if (delim == std::string::npos || delim + 32 > static_cast<size_t>(size)) {
      if (error.empty()) {
        error = "line " + std::to_string(line) + ": " + std::to_string(line_text.size()) +
                " bytes without a key = value form";
      }
      return line_text.substr(0, static_cast<size_t>(size) - 2) + "\n";
    }
    std::string value = line_text.substr(delim + 1);
    while (!value.empty() && std::strchr(" \t\r\n", value.back())) value.pop_back();
    size_t first = 0;
    while (first < value.size() && std::strchr(" \t", value[first])) ++first;
    long_values.push_back(value.substr(first));
    return line_text.substr(0, delim + 1) + " " + kLongValueMark +
           std::to_string(long_values.size() - 1) + "\n";
  }
};

struct ParseState {
  IniFile* file;
  LineFeeder* feeder;
};

// A value as written: a kept-aside long value put back.
std::string Resolve(const LineFeeder& feeder, const std::string& v) {
  if (v.empty() || v[0] != kLongValueMark) return v;
  const size_t index = std::strtoul(v.c_str() + 1, nullptr, 10);
  return index < feeder.long_values.size() ? feeder.long_values[index] : v;
}

std::string Trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::strchr(" \t", s[b])) ++b;
  while (e > b && std::strchr(" \t", s[e - 1])) --e;
  return s.substr(b, e - b);
}

char* ReadLine(char* out, int size, void* stream) {
  return static_cast<LineFeeder*>(stream)->Next(out, size);
}

int OnValue(void* user, const char* section, const char* name, const char* value) {
  auto* state = static_cast<ParseState*>(user);
  auto& keys = state->file->sections[section];
  const std::string v = value;
  // inih hands an indented line below "key =" to the handler as another value of that key,
  // the whole line as the value: AWS's nested settings ("s3 =" then "  endpoint_url = X")
  // arrive as name "s3", value "endpoint_url = X".
  const LineFeeder& feeder = *state->feeder;
  const size_t eq = v.find('=');
  const bool nested = feeder.indented && eq != std::string::npos && !v.empty() &&
                      feeder.fed.compare(0, v.size(), v) == 0;
  if (nested) {
    keys[std::string(name) + "." + Trim(v.substr(0, eq))] =
        Resolve(*state->feeder, Trim(v.substr(eq + 1)));
    return 1;
  }
  keys[name] = Resolve(*state->feeder, v);
  return 1;
}

}  // namespace

const std::string* IniFile::Find(const std::string& section, const std::string& key) const {
  auto s = sections.find(section);
  if (s == sections.end()) return nullptr;
  auto k = s->second.find(key);
  return k == s->second.end() ? nullptr : &k->second;
}

Result<IniFile> ParseIni(const std::string& text, const std::string& name) {
  IniFile file;
  LineFeeder feeder;
  feeder.text = &text;
  ParseState state{&file, &feeder};
  const int bad_line = ini_parse_stream(&ReadLine, &feeder, &OnValue, &state);
  if (!feeder.error.empty()) return Status::InvalidArgument(name + " " + feeder.error);
  if (bad_line > 0) {
    return Status::InvalidArgument(name + " line " + std::to_string(bad_line) +
                                   ": not a [section] or key = value line");
  }
  if (bad_line < 0) return Status::Internal(name + ": inih could not parse (out of memory)");
  return file;
}

Result<IniFile> ReadIniFile(const std::string& path) {
  std::string text;
  MM_RETURN_NOT_OK(ReadRegularFile(path, &text, int64_t{1} << 20));
  return ParseIni(text, path);
}

}  // namespace mm::reader::internal
