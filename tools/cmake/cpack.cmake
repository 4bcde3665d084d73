# cpack -G DEB (run in the build tree; included by the top-level CMakeLists.txt): one Debian
# package of everything `cmake --install` installs, under /usr: the programs, the Python package
# in /usr/lib/python3/dist-packages, libmm_reader with its headers and mmpackConfig.cmake, the
# zstd plugin in /usr/lib/hdf5/plugins.
# Depends: the shared libraries' packages as dpkg-shlibdeps finds them (libhdf5, libvips,
# libsentencepiece, LibTorch, ...), plus the Python the module is built for and numpy.
set(CPACK_PACKAGE_NAME mmpack)
set(CPACK_PACKAGE_VENDOR "mmpack")
set(CPACK_PACKAGE_CONTACT "mmpack maintainers <mmpack@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "compile image-text pairs into HDF5 shards, read them fast, train on them")
# Installed with CMAKE_INSTALL_PREFIX=/usr and DESTDIR (CPACK_SET_DESTDIR, which takes the
# prefix from CPACK_INSTALL_PREFIX): the Python package's install rule sees the prefix /usr and
# picks lib/python3/dist-packages (reader/python/CMakeLists.txt).
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_SET_DESTDIR ON)
set(CPACK_STRIP_FILES ON)  # no debug information: it names the build machine's folders
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)  # libmm_reader.so.0: shlibs file, ldconfig trigger
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(_mm_deb_depends "")
if(MM_WITH_PYTHON)
  math(EXPR _mm_py_next "${Python_VERSION_MINOR} + 1")
  set(_mm_py "${Python_VERSION_MAJOR}.${Python_VERSION_MINOR}")
  set(_mm_deb_depends "python3 (>= ${_mm_py}~), python3 (<< ${Python_VERSION_MAJOR}.${_mm_py_next})")
  string(APPEND _mm_deb_depends ", python3-numpy")
endif()
set(CPACK_DEBIAN_PACKAGE_DEPENDS "${_mm_deb_depends}")
set(CPACK_GENERATOR DEB)
include(CPack)
