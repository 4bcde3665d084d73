// ini_file.h: the INI files of AWS's tools (~/.aws/credentials, ~/.aws/config), parsed with
// inih (Debian's libinih-dev, https://github.com/benhoyt/inih). Private to mm_reader.
//
// What is read: "[section]" headers, "key = value" (or "key: value") lines, whole-line comments
// starting with '#' or ';', and the indented lines that AWS's config nests below a key
// ("s3 =\n  endpoint_url = http://..."), stored as "s3.endpoint_url". Keys and section names as
// written; a section given twice adds to the first; a key given twice keeps the last value.
//
// inih as Debian builds it (ini.h: INI_MAX_LINE 200, no INI_ALLOW_REALLOC) cuts lines at 199
// bytes, and an STS session token (aws_session_token) is 700 to 2,000: so the text reaches
// inih through its stream reader (ini_parse_stream), which hands it each line whole when it
// fits and otherwise with the value replaced by a short reference to the full value, kept
// aside and put back by the handler. Differences from botocore (configparser), kept because
// inih is built so: " ;" starts an inline comment in a value that fits a line.
//
// Thread-safe: functions of their arguments.
#pragma once

#include <map>
#include <string>

#include "mm/status.h"

namespace mm::reader::internal {

/// One parsed file: section -> key -> value.
struct IniFile {
  std::map<std::string, std::map<std::string, std::string>> sections;
  /// The value of `key` in `section`, or nullptr.
  const std::string* Find(const std::string& section, const std::string& key) const;
};

/// Parses `text`; `name` (a path) is what errors name.
/// Errors: InvalidArgument ("NAME line N: not a [section] or key = value line").
Result<IniFile> ParseIni(const std::string& text, const std::string& name);

/// Reads and parses the file `path` (at most 1 MiB).
/// Errors: NotFound (no such file), IOError, those of ParseIni.
Result<IniFile> ReadIniFile(const std::string& path);

}  // namespace mm::reader::internal
