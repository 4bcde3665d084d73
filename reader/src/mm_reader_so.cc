// mm_reader_so.cc: the one source of libmm_reader.so (reader/CMakeLists.txt), which is mm_reader's
// objects linked whole; CMake wants a source for a shared library target. Nothing is defined
// here.
