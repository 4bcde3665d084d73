#!/usr/bin/env bash
# tests/gpu/deps.sh PREFIX DEPS_TARBALL: unpacks prep.sh's deps.tar.xz into PREFIX (never into
# /), points its .pc files at PREFIX, links the libraries the system has (libcrypto.so.3,
# libzstd.so.1, libcurl.so.4, libz.so.1; a stub libcurl that fails every transfer when the
# system has none: only remote sets need it) and writes PREFIX/env.sh: LD_LIBRARY_PATH,
# PKG_CONFIG_PATH and MM_DEPS_CMAKE (the CMake arguments). Status 0 when a build can be tried.
# Learned from ../shared/gpu-check/mmdeps.sh.
set -uo pipefail
P=${1:?PREFIX}; TARBALL=${2:?DEPS_TARBALL}
A=x86_64-linux-gnu; LIB=$P/usr/lib/$A
rm -rf "$P" && mkdir -p "$P" || exit 1
{ command -v xz >/dev/null && tar -xJf "$TARBALL" -C "$P" 2>/dev/null; } ||
  "${PY:-python3}" -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' \
    "$TARBALL" "$P" || { echo "deps: cannot unpack $TARBALL"; exit 1; }
find "$P/usr" -name '*.pc' -exec sed -i "s#@PREFIX@#$P#g" {} +
echo "deps: $(find "$P" -type f | wc -l) files in $P"
syslib() {
  local f
  f=$(ldconfig -p 2>/dev/null | awk -v s="$1" '$1 == s && /x86-64/ {print $NF; exit}')
  if [ -z "$f" ]; then
    for d in /lib/$A /usr/lib/$A /lib64 /usr/lib64 /usr/local/lib; do
      [ -e "$d/$1" ] && { f=$d/$1; break; }
    done
  fi
  [ -n "$f" ] && readlink -f "$f"
}
status=0
for pair in crypto:libcrypto.so.3 zstd:libzstd.so.1 curl:libcurl.so.4 z:libz.so.1; do
  name=${pair%%:*}; soname=${pair#*:}
  f=$(syslib "$soname")
  [ "$name" = curl ] && [ "${MM_FORCE_CURL_STUB:-0}" = 1 ] && f=""
  # Debian's libhdf5 wants curl_*@CURL_OPENSSL_4: another libcurl flavour does not load.
  if [ "$name" = curl ] && [ -n "$f" ] && command -v readelf >/dev/null &&
     [ "$(readelf -V "$f" 2>/dev/null | grep -c CURL_OPENSSL_4)" = 0 ]; then f=""; fi
  if [ -n "$f" ]; then
    ln -sf "$f" "$LIB/lib$name.so"; echo "deps: lib$name.so -> $f"
  elif [ "$name" = curl ]; then
    cat > "$P/curl_stub.c" <<'STUB'
#include <stddef.h>
typedef void CURL; struct curl_slist;
int curl_global_init(long f) { (void)f; return 2; }
void curl_global_cleanup(void) {}
CURL *curl_easy_init(void) { return NULL; }
void curl_easy_cleanup(CURL *c) { (void)c; }
void curl_easy_reset(CURL *c) { (void)c; }
int curl_easy_setopt(CURL *c, int o, ...) { (void)c; (void)o; return 2; }
int curl_easy_perform(CURL *c) { (void)c; return 2; }
int curl_easy_getinfo(CURL *c, int i, ...) { (void)c; (void)i; return 2; }
const char *curl_easy_strerror(int e) { (void)e; return "libcurl stub (tests/gpu/deps.sh)"; }
struct curl_slist *curl_slist_append(struct curl_slist *l, const char *s) { (void)l; (void)s; return NULL; }
void curl_slist_free_all(struct curl_slist *l) { (void)l; }
STUB
    echo 'CURL_OPENSSL_4 { global: curl_*; local: *; };' > "$P/curl_stub.map"
    if gcc -shared -fPIC -O1 -o "$LIB/libcurl.so.4" "$P/curl_stub.c" -Wl,-soname,libcurl.so.4 \
         -Wl,--version-script="$P/curl_stub.map"; then
      ln -sf libcurl.so.4 "$LIB/libcurl.so"; echo "deps: libcurl.so -> a STUB (remote sets fail)"
    else
      echo "deps: FATAL: no libcurl.so.4 and the stub did not build"; status=1
    fi
  else
    echo "deps: FATAL: no $soname on this system"; status=1
  fi
done
mkdir -p "$P/bin"
printf '#!/bin/sh\nLD_LIBRARY_PATH=%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec %s "$@"\n' \
  "$LIB" "$P/usr/bin/pkgconf" > "$P/bin/pkg-config"
chmod +x "$P/bin/pkg-config"
PKGCONF=$P/bin/pkg-config
"$PKGCONF" --version >/dev/null 2>&1 || PKGCONF=$(command -v pkg-config || command -v pkgconf || echo "")
[ -n "$PKGCONF" ] || { echo "deps: FATAL: no pkg-config"; status=1; }
cat > "$P/env.sh" <<ENV
# written by tests/gpu/deps.sh
export LD_LIBRARY_PATH=$LIB:$LIB/hdf5/serial\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
export PKG_CONFIG_PATH=$LIB/pkgconfig:$P/usr/share/pkgconfig
export MM_LIBXXHASH=$LIB/libxxhash.so.0
MM_DEPS_CMAKE=(-DPKG_CONFIG_EXECUTABLE=$PKGCONF -DHDF5_ROOT=$LIB/hdf5/serial
  -DHDF5_NO_FIND_PACKAGE_CONFIG_FILE=ON -DHDF5_PREFER_PARALLEL=OFF
  -DOPENSSL_ROOT_DIR=$P/usr -DCURL_NO_CURL_CMAKE=ON
  -Dnlohmann_json_DIR=$P/usr/share/cmake/nlohmann_json -DCLI11_DIR=$P/usr/share/cmake/CLI11
  -DCMAKE_PREFIX_PATH=$P/usr)
ENV
echo "deps: wrote $P/env.sh (status $status)"
exit $status
