/* shared_lib.c - the source of libdriftbench.so, which has none of its own:
 * CMakeLists.txt links the static library's objects into it whole
 * (--whole-archive), so the shared library is exactly the static one with
 * only the DRIFT_API functions exported (-fvisibility=hidden). A target
 * needs one source file; this is it, and it defines nothing. */
