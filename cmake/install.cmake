# cmake --install: the C++ package of mmpack (included by the top-level CMakeLists.txt).
#   PREFIX/bin/mmpack, PREFIX/bin/mmtrain           the programs (the Python package's install
#                                                   rule is in reader/python/CMakeLists.txt;
#                                                   the plugin's in tools/plugin/CMakeLists.txt)
#   PREFIX/lib/libmm_reader.so.0                    the reader as a shared library
#   PREFIX/include/mm/*.h                           its public headers (no third-party header)
#   PREFIX/lib/cmake/mmpack/mmpackConfig.cmake      find_package(mmpack) -> mmpack::reader,
#                                                   mmpack::mmpack (the program)
# Nothing installed names a folder of the build machine: the programs find the plugin and the
# Python package finds the programs by paths relative to themselves.
include(CMakePackageConfigHelpers)

set(MM_CMAKE_INSTALL_DIR lib/cmake/mmpack CACHE PATH
    "Where `cmake --install` puts mmpackConfig.cmake, relative to the prefix")

# libmm_reader.so: mm_reader's objects (compiled once, for the static library that mmpack and
# mmtrain link) in a shared library whose dependencies (HDF5, zstd, xxHash, libcurl, OpenSSL,
# libjpeg) stay private: a consumer needs only the headers and this library. It exports the
# mm:: names only (mm_reader.map); mm::internal's are in it but not part of the contract.
add_library(mm_reader_shared SHARED ${CMAKE_CURRENT_LIST_DIR}/mm_reader_so.cc)
target_link_libraries(mm_reader_shared PRIVATE
  "$<LINK_LIBRARY:WHOLE_ARCHIVE,mm_reader>" mm_schema)
target_link_options(mm_reader_shared PRIVATE
  -Wl,--version-script=${CMAKE_CURRENT_LIST_DIR}/mm_reader.map -Wl,--as-needed -Wl,--no-undefined)
set_property(TARGET mm_reader_shared APPEND PROPERTY LINK_DEPENDS
             ${CMAKE_CURRENT_LIST_DIR}/mm_reader.map)
target_include_directories(mm_reader_shared INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/reader/include>
  $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/reader/include>
  $<INSTALL_INTERFACE:include>)
target_link_libraries(mm_reader_shared INTERFACE Threads::Threads)
target_compile_features(mm_reader_shared INTERFACE cxx_std_17)
set_target_properties(mm_reader_shared PROPERTIES
  OUTPUT_NAME mm_reader EXPORT_NAME reader
  VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}
  LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/lib)
mm_target_warnings(mm_reader_shared)
add_library(mmpack::reader ALIAS mm_reader_shared)

install(TARGETS mmpack mm_reader_shared EXPORT mmpackTargets
        RUNTIME DESTINATION bin
        LIBRARY DESTINATION lib)
if(MM_BUILD_TRAINER)
  install(TARGETS mmtrain RUNTIME DESTINATION bin)
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/reader/include/mm DESTINATION include
        FILES_MATCHING PATTERN "*.h")
install(FILES ${PROJECT_BINARY_DIR}/reader/include/mm/version.h DESTINATION include/mm)

install(EXPORT mmpackTargets NAMESPACE mmpack:: DESTINATION ${MM_CMAKE_INSTALL_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/mmpackConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/mmpackConfig.cmake INSTALL_DESTINATION ${MM_CMAKE_INSTALL_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/mmpackConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/mmpackConfig.cmake
              ${PROJECT_BINARY_DIR}/cmake/mmpackConfigVersion.cmake
        DESTINATION ${MM_CMAKE_INSTALL_DIR})
