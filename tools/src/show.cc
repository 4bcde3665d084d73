// placeholder: see tools/CMakeLists.txt for the owner
