// human_bytes.h: byte counts as people read them in mmpack's messages (build summary, info).
#pragma once

#include <cstdio>
#include <string>

namespace mm::pack {

/// `bytes` in decimal units (1 KB = 1000 bytes), B to TB: "512 B", "6.9 MB" (whole bytes, else
/// one decimal).
inline std::string HumanBytes(double bytes) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (bytes >= 1000.0 && u < 4) {
    bytes /= 1000.0;
    ++u;
  }
  char text[32];
  std::snprintf(text, sizeof text, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return text;
}

}  // namespace mm::pack
