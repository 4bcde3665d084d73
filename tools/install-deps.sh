#!/usr/bin/env bash
# Installs mmpack's build and run dependencies from Debian 12's archive (as root or via sudo).
# Idempotent: packages already present are skipped without touching the network.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git
  libhdf5-dev hdf5-tools libzstd-dev libxxhash-dev nlohmann-json3-dev
  libvips-dev libvips-tools zstd  # vips, zstd commands: format tests, h5py round trip
  libsentencepiece-dev sentencepiece libtbb-dev libcli11-dev
  libarchive-dev libssl-dev libfmt-dev libturbojpeg0-dev libjpeg62-turbo-dev
  libcurl4-openssl-dev  # remote shard sets: HTTP(S) and S3 (reader/src/remote)
  libinih-dev  # ~/.aws/credentials and ~/.aws/config (reader/src/remote/ini_file.cc)
  nodejs curl  # the S3 test server (s3rver, put in the build tree by tests/remote/npm_setup.sh); uploads
  libicu-dev fonts-dejavu-core  # NFKC + lowercasing before tokenizing; `mmpack preview` font
  libpcre2-dev zlib1g-dev  # tokenizers: pre-tokenizer regexes, CLIP's gzipped BPE merges
  libgtest-dev libgmock-dev libbenchmark-dev
  libtorch-dev libgloo-dev openmpi-bin libopenmpi-dev
  libopenblas0-openmp  # LibTorch CPU GEMM: the default reference libblas is ~4x slower
  python3-h5py python3-numpy python3-pil python3-torch python3-torchvision python3-sentencepiece
  python3-dev pybind11-dev python3-pybind11 python3-pytest  # the Python module (reader/python)
  python3-matplotlib  # mmtrain plot (curves.png)
  python3-regex python3-wcwidth  # the CLIP tokenizer reference (simple_tokenizer.py, ftfy)
  python3-pip python3-venv python3-setuptools python3-wheel  # pip install . (tools/python_package)
  patchelf dpkg-dev  # the wheel's bundled libraries (tools/bundle_libs.py); cpack -G DEB's Depends
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm installs s3rver for the tests; a nodejs from elsewhere (NodeSource) brings its own npm.
command -v npm >/dev/null || missing+=(npm)
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
echo "install-deps: installing ${#missing[@]} packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
