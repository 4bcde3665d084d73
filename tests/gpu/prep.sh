#!/usr/bin/env bash
# tests/gpu/prep.sh: runs HERE (Debian 12), before the GPU check is sent to a lent machine.
# Writes tests/gpu/carry/ (git-ignored; the device `run` carries it), under 2 MB:
#   deps.tar.xz    Debian 12 headers, .pc/CMake files and a few run-time libraries the reader,
#                  the Python module and mmtrain need and the GPU image lacks (HDF5 1.10.8
#                  serial + libsz/libaec, zstd, xxHash, nlohmann-json, libjpeg62-turbo, curl and
#                  OpenSSL headers, CLI11, pkgconf), cut from the .debs (apt-get download)
#   tokens.json    the token ids of examples/data/coco-cc's captions under the shared ALBERT
#                  tokenizer (lowercased), its SHA-256 and vocabulary: the device has no
#                  sentencepiece, and the check's sets are packed there (tests/gpu/pack.py)
#   MANIFEST.txt   what is in it, from which .debs and commit
# Learned from ../shared/gpu-check/prep.sh (the draft that ran end to end on CPU).
# usage: bash tests/gpu/prep.sh        (STAGE=/tmp/... for the scratch folder)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SHARED=${MM_SHARED_DIR:-$ROOT/../shared}
CARRY=$HERE/carry
STAGE=${STAGE:-/tmp/mm-gpu-prep}
DEBS_DIR=${DEBS_DIR:-/tmp/mm-gpu-debs}
ARCH=x86_64-linux-gnu
mkdir -p "$CARRY" "$DEBS_DIR"

# --- the .debs ---------------------------------------------------------------------------------
DEBS=(libhdf5-dev libhdf5-103-1 libsz2 libaec0 libzstd-dev libxxhash-dev libxxhash0
      nlohmann-json3-dev libjpeg62-turbo-dev libjpeg62-turbo libcurl4-openssl-dev libssl-dev
      libcli11-dev pkgconf-bin libpkgconf3)
missing=0
for p in "${DEBS[@]}"; do ls "$DEBS_DIR/${p}_"*.deb >/dev/null 2>&1 || missing=1; done
if [ $missing = 1 ]; then
  echo "prep: apt-get download ${#DEBS[@]} packages into $DEBS_DIR"
  (cd "$DEBS_DIR" && { apt-get download "${DEBS[@]}" >/dev/null 2>&1 ||
                       { apt-get update -qq && apt-get download "${DEBS[@]}"; }; })
fi

# --- deps.tar.xz -------------------------------------------------------------------------------
rm -rf "$STAGE"; mkdir -p "$STAGE/x" "$STAGE/root"
for p in "${DEBS[@]}"; do dpkg -x "$(ls "$DEBS_DIR/${p}_"*.deb | head -1)" "$STAGE/x"; done
X=$STAGE/x/usr R=$STAGE/root/usr L=$STAGE/x/usr/lib/$ARCH
mkdir -p "$R/include/openssl" "$R/include/hdf5/serial" "$R/lib/$ARCH/pkgconfig" \
         "$R/lib/$ARCH/hdf5/serial" "$R/share/pkgconfig" "$R/share/cmake" "$R/bin"
# Debian's multiarch include dir is no default include directory there: flattened.
cp -a "$X/include/$ARCH/curl" "$R/include/curl"
cp -a "$X/include/$ARCH/jconfig.h" "$R/include/"
cp -a "$X/include/openssl/." "$X/include/$ARCH/openssl/." "$R/include/openssl/"
cp -a "$X/include/hdf5/serial/"*.h "$R/include/hdf5/serial/"
cp -a "$X/include/"{zstd.h,zstd_errors.h,zdict.h,xxhash.h,xxh3.h,jpeglib.h,jmorecfg.h,jerror.h} \
      "$R/include/"
cp -a "$X/include/nlohmann" "$X/include/CLI" "$R/include/"
# Of OpenSSL and HDF5 only the headers the sources' includes reach (gcc -M).
closure() {
  local dir=$1; shift
  printf '#include <%s>\n' "$@" > "$STAGE/closure.c"
  gcc -M -w -I"$R/include" -I"$R/include/hdf5/serial" "$STAGE/closure.c" |
    tr ' \\' '\n\n' | grep "^$dir/" | sort -u
}
keep_only() {
  find "$1" -type f | sort > "$STAGE/all"
  comm -23 "$STAGE/all" "$2" | xargs -r rm -f
}
{ closure "$R/include/openssl" openssl/evp.h openssl/sha.h; echo "$R/include/openssl/ssl.h"; } |
  sort -u > "$STAGE/keep_ssl"
keep_only "$R/include/openssl" "$STAGE/keep_ssl"
closure "$R/include/hdf5/serial" hdf5.h H5PLextern.h > "$STAGE/keep_h5"
keep_only "$R/include/hdf5/serial" "$STAGE/keep_h5"
cp -a "$L"/libhdf5_serial.so "$L"/libhdf5_serial.so.103* "$L"/libsz.so* "$L"/libaec.so* \
      "$L"/libxxhash.so* "$L"/libjpeg.so* "$L"/libpkgconf.so* "$R/lib/$ARCH/"
ln -s ../../libhdf5_serial.so "$R/lib/$ARCH/hdf5/serial/libhdf5.so"
ln -s ../../../../include/hdf5/serial "$R/lib/$ARCH/hdf5/serial/include"
cp -a "$X/bin/pkgconf" "$R/bin/"
for pc in libzstd libxxhash libjpeg libcurl libcrypto libssl openssl hdf5-serial; do
  cp "$L/pkgconfig/$pc.pc" "$R/lib/$ARCH/pkgconfig/"
done
cp "$X/share/pkgconfig/"{nlohmann_json,CLI11}.pc "$R/share/pkgconfig/"
cp -a "$X/share/cmake/nlohmann_json" "$X/share/cmake/CLI11" "$R/share/cmake/"
sed -i 's#^libdir=${exec_prefix}/lib$#libdir=${exec_prefix}/lib/x86_64-linux-gnu#' \
  "$R/lib/$ARCH/pkgconfig/libzstd.pc"
sed -i 's#^includedir=/usr/include/x86_64-linux-gnu$#includedir=${prefix}/include#' \
  "$R/lib/$ARCH/pkgconfig/libcurl.pc"
# Every /usr of a .pc file becomes @PREFIX@/usr (deps.sh writes the prefix in).
find "$R" -name '*.pc' -exec sed -i -E 's#(^|[=[:space:]]|-I|-L)/usr(/|$)#\1@PREFIX@/usr\2#g' {} +
if grep -n -E '(^|[=[:space:]]|-I|-L)/usr' "$R"/lib/$ARCH/pkgconfig/*.pc "$R"/share/pkgconfig/*.pc; then
  echo "prep: a .pc file still names /usr" >&2; exit 1
fi
# Comments out of the headers (directives and code kept): a third less to carry.
while IFS= read -r -d '' h; do
  lang=c; case $h in *.hpp|*/CLI/*|*/nlohmann/*) lang=c++ ;; esac
  if grep -q -E '^[[:space:]]*#[[:space:]]*pragma[[:space:]]+once' "$h"; then
    echo '#pragma once' > "$h.tmp"; else : > "$h.tmp"; fi
  gcc -x $lang -w -fpreprocessed -dD -E -P "$h" >> "$h.tmp" && mv "$h.tmp" "$h"
done < <(find "$R/include" -type f \( -name '*.h' -o -name '*.hpp' \) -print0)
(cd "$DEBS_DIR" && ls -1 *.deb) > "$STAGE/root/DEBS"
tar -C "$STAGE/root" --owner=0 --group=0 --sort=name --mtime=@0 -cf - . |
  xz -T1 -9e > "$CARRY/deps.tar.xz"

# --- tokens.json -------------------------------------------------------------------------------
/usr/bin/python3 "$HERE/pack.py" tokens --captions "$ROOT/examples/data/coco-cc/captions.jsonl" \
  --tokenizer "$SHARED/tokenizers/albert-30k-clean.model" --lowercase --out "$CARRY/tokens.json"

{
  echo "made by tests/gpu/prep.sh on $(date -u +%FT%TZ) at commit $(git -C "$ROOT" rev-parse HEAD)"
  (cd "$CARRY" && sha256sum deps.tar.xz tokens.json)
  echo "debs:"; cat "$STAGE/root/DEBS"
} > "$CARRY/MANIFEST.txt"
du -b "$CARRY"/* | sed "s#$ROOT/##"
echo "prep: carry with run(..., carry=[\"tests/gpu/carry\"]): $(du -sb "$CARRY" | cut -f1) bytes"
