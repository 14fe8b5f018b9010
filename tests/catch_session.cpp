// Catch2's implementation, compiled once for every test executable (it is most of a test's build
// time when compiled per main): catch_main.cpp's two mains call run_catch_session.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

int run_catch_session(int argc, char** argv) { return Catch::Session().run(argc, argv); }
