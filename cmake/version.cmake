# Run at build time (cmake -P): writes OUT with the commit the sources are at, rewriting it
# only when it changed so that a build with no new commit recompiles nothing.
execute_process(COMMAND git -C "${SRC}" describe --always --dirty --abbrev=10
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET
                RESULT_VARIABLE failed)
if(failed OR commit STREQUAL "")
  set(commit "unknown")
endif()
set(text "namespace fs { extern const char* const kBuildCommit; const char* const kBuildCommit = \"${commit}\"; }\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
